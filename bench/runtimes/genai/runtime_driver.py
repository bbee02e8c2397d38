"""mtpconv bench's OpenVINO GenAI driver: one arm of a ContinuousBatchingPipeline,
plain or with the MTP model as its draft model (GenAI's MTP speculative
decoding), one request at a time. Counts are GenAI's own per-request extended
perf metrics (get_num_draft_tokens, get_num_accepted_tokens); throughput and
time to first token its perf_metrics. Nothing here compares tokens.

Run by mtpconv_driver.py; nothing heavy is imported before start()."""
import json
import os

REQUIRES = [("openvino-genai", "2026.4.1", "pip install openvino-genai==2026.4.1")]


def version():
    from importlib import metadata
    return metadata.version("openvino-genai")


def value(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_args(args):
    """The user's runtime arguments, each KEY=VALUE: device=NAME (default CPU); an UPPER_CASE OpenVINO
    property (INFERENCE_PRECISION_HINT=f32, KV_CACHE_PRECISION=f32, NUM_STREAMS=1 ...), given to the
    pipeline and to the draft model alike; a lower_case SchedulerConfig field (cache_size=2 ...)."""
    import openvino_genai as g
    device, props, sched = "CPU", {}, g.SchedulerConfig()
    for arg in args:
        key, eq, raw = arg.partition("=")
        if not eq or not key:
            raise ValueError("openvino-genai argument %r: give KEY=VALUE (device=, an OpenVINO property, or a "
                             "SchedulerConfig field)" % arg)
        if key == "device":
            device = raw
        elif key.isupper():
            props[key] = value(raw)
        elif not key.startswith("_") and hasattr(sched, key):
            setattr(sched, key, value(raw))
        else:
            raise ValueError("openvino-genai argument %s: neither device, an UPPER_CASE OpenVINO property nor a "
                             "SchedulerConfig field" % key)
    return device, props, sched


class Session(object):
    def __init__(self, pipe, draft_tokens, generation_config):
        self.pipe, self.draft_tokens, self.generation_config = pipe, draft_tokens, generation_config
        self.tokenizer = pipe.get_tokenizer()

    def generate(self, req):
        import openvino_genai as g
        # The model's generation_config.json, read alike in both arms: GenAI 2026.4.1's get_config() drops
        # the eos token when a draft model is attached, so the MTP arm would not stop where the plain one does.
        c = g.GenerationConfig(self.generation_config) if self.generation_config else g.GenerationConfig()
        c.max_new_tokens = req["max_tokens"]
        c.apply_chat_template = False  # a raw prompt is raw; messages are templated below
        c.rng_seed = req.get("seed", 0)
        if req.get("greedy", True):
            c.do_sample = False
        if self.draft_tokens:
            c.num_assistant_tokens = self.draft_tokens
        prompt = req.get("prompt") or ""
        if req.get("messages"):
            prompt = self.tokenizer.apply_chat_template(req["messages"], add_generation_prompt=True)
        r = self.pipe.generate([prompt], [c])[0]
        # A request that ran to its end reads RUNNING or FINISHED in 2026.4.1; these two did not run to it.
        if r.m_status in (g.GenerationStatus.IGNORED, g.GenerationStatus.CANCEL):
            raise RuntimeError("GenAI ended the request with status %s" % r.m_status.name)
        pm = r.perf_metrics
        out = {
            "text": r.m_generation_ids[0],
            "tokens": None,  # the MTP pipeline takes text prompts only and answers text
            "prompt_tokens": pm.get_num_input_tokens(),
            "decode_tokens": pm.get_num_generated_tokens(),
            "decode_per_second": pm.get_throughput().mean,
            "ttft_seconds": pm.get_ttft().mean / 1000.0,
            "counted": False,
        }
        if self.draft_tokens:
            em = r.extended_perf_metrics
            out.update(counted=True, drafted=em.get_num_draft_tokens(), accepted=em.get_num_accepted_tokens())
        return out


def start(cfg):
    device, props, sched = parse_args(cfg.get("args") or [])
    import openvino_genai as g
    pipe_props = dict(props)
    if cfg["mtp"]:
        pipe_props["draft_model"] = g.draft_model(cfg.get("head") or cfg["model"], device, **props)
    pipe = g.ContinuousBatchingPipeline(cfg["model"], sched, device, pipe_props)
    gen = os.path.join(cfg["model"], "generation_config.json")
    return Session(pipe, cfg.get("draft_tokens", 0) if cfg["mtp"] else 0, gen if os.path.isfile(gen) else None)
