"""mtpconv bench's mlx-vlm driver: one arm of mlx-vlm's own generation, plain or
with an MTP drafter (its speculative loop, draft_kind "mtp"), one request at a
time. Counts are mlx-vlm's own: the drafter's round counters, which its loop
records for every verify round (mlx_vlm.speculative.utils's
speculative_stats_snapshot / speculative_stats_since, the per-request
attribution its own server uses), and the per-round history the loop keeps on
the drafter (accept_lens, draft_lens). Nothing here compares tokens.

Run by mtpconv_driver.py; nothing heavy is imported before start()."""
import json

REQUIRES = [("mlx-vlm", "0.7.10", "pip install mlx-vlm==0.7.10")]

# generate() arguments bench sets itself: the user's KEY=VALUE may not.
BENCH_OWNED = {"max_tokens", "temperature", "seed", "draft_model", "draft_kind", "draft_block_size", "verbose",
               "prompt", "model", "processor"}
DTYPES = {"float32", "float16", "bfloat16"}


def version():
    from importlib import metadata
    return metadata.version("mlx-vlm")


def parse_args(args):
    """The user's runtime arguments: KEY=VALUE, a mlx_vlm.generate keyword (the value read as JSON, else
    a string), or dtype=float32|float16|bfloat16 (the trunk and drafter cast after loading)."""
    from mlx_vlm.generate.ar import generate_step
    from mlx_vlm.generate.types import GenerateKwargs
    import inspect
    known = set(GenerateKwargs.__annotations__) | set(inspect.signature(generate_step).parameters)
    known.discard("kwargs")
    kwargs, dtype = {}, None
    for arg in args:
        key, eq, raw = arg.partition("=")
        if not eq or not key:
            raise ValueError("mlx-vlm argument %r: give KEY=VALUE (a mlx_vlm.generate keyword, or dtype=...)" % arg)
        if key == "dtype":
            if raw not in DTYPES:
                raise ValueError("mlx-vlm argument dtype=%s: must be one of %s" % (raw, ", ".join(sorted(DTYPES))))
            dtype = raw
            continue
        if key in BENCH_OWNED:
            raise ValueError("mlx-vlm argument %s: bench sets it (--max-tokens, --sample, --draft-tokens)" % key)
        if key not in known:
            raise ValueError("mlx-vlm argument %s: not a keyword of mlx_vlm.generate %s" % (key, version()))
        try:
            kwargs[key] = json.loads(raw)
        except ValueError:
            kwargs[key] = raw
    return kwargs, dtype


class Session(object):
    def __init__(self, model, processor, drafter, draft_tokens, kwargs):
        self.model, self.processor, self.drafter = model, processor, drafter
        self.draft_tokens, self.kwargs = draft_tokens, kwargs

    def prompt(self, req):
        if req.get("messages"):
            from mlx_vlm.prompt_utils import apply_chat_template
            return apply_chat_template(self.processor, self.model.config, req["messages"])
        return req["prompt"]

    def generate(self, req):
        from mlx_vlm import generate
        from mlx_vlm.speculative.utils import speculative_stats_since, speculative_stats_snapshot
        kw = dict(self.kwargs)
        kw["max_tokens"] = req["max_tokens"]
        kw["seed"] = req.get("seed", 0)
        if req.get("greedy", True):
            kw["temperature"] = 0.0
        if self.drafter is not None:
            # block = the verified token + the drafts (mlx-vlm may draft fewer than asked: its own
            # adaptive rule above the drafter's configured depth; draft_lens says what it drafted).
            kw.update(draft_model=self.drafter, draft_kind="mtp", draft_block_size=self.draft_tokens + 1)
            snapshot = speculative_stats_snapshot(self.drafter)
        res = generate(self.model, self.processor, self.prompt(req), **kw)
        out = {
            "text": res.text,
            "tokens": list(res.token_ids) if res.token_ids is not None else None,
            "prompt_tokens": res.prompt_tokens,
            "decode_tokens": res.generation_tokens,
            "decode_per_second": res.generation_tps,
            # mlx-vlm's prompt_tps is prompt_tokens / (time to the first token): its own clock.
            "ttft_seconds": res.prompt_tokens / res.prompt_tps if res.prompt_tps else 0.0,
            "counted": False,
        }
        if self.drafter is None:
            return out
        rounds, accepted, drafted = speculative_stats_since(self.drafter, snapshot)
        if rounds is None:  # mlx-vlm's own "no round ran" (its server then reports no draft counts)
            return out
        out.update(counted=True, drafted=drafted, accepted=accepted, verify_steps=rounds)
        # The loop's per-round history (reset at the start of each request's rounds): round i drafted
        # draft_lens[i] tokens and accepted the first accept_lens[i] of them.
        acc, lens = list(self.drafter.accept_lens), list(getattr(self.drafter, "draft_lens", []))
        if len(acc) == rounds and len(lens) == rounds and sum(lens) == drafted and round(sum(acc)) == accepted:
            per = [0] * max(lens or [0])
            for a in acc:
                for i in range(int(a)):
                    per[i] += 1
            out["accepted_per_pos"] = per
        return out


def start(cfg):
    kwargs, dtype = parse_args(cfg.get("args") or [])
    import mlx.core as mx
    from mlx_vlm import load
    model, processor = load(cfg["model"])
    drafter = None
    if cfg["mtp"]:
        from mlx_vlm.speculative.drafters import load_drafter
        where = cfg.get("head") or cfg["model"]
        drafter, kind = load_drafter(where)
        if kind != "mtp":
            raise ValueError("mlx-vlm finds no MTP drafter in %s (load_drafter resolved draft kind %r, %s): give the "
                             "drafter folder (mtpconv export --target mlx) as --head" % (where, kind, type(drafter).__name__))
    if dtype is not None:
        for m in (model, drafter):
            if m is not None:
                m.set_dtype(getattr(mx, dtype))
    return Session(model, processor, drafter, cfg.get("draft_tokens", 0), kwargs)
