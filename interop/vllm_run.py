"""Runs vLLM (the vLLM venv's python, scripts/setup-vllm.sh) on HF repos, all in
one process so that vLLM is imported once: python vllm_run.py JOBS.json OUT.json.

JOBS.json: {"prompts": [...], "max_tokens": N, "jobs": [{"id": ..., "model": DIR, "mtp": bool, "probe": [LAYER, ...]}]}.
For each job, OUT.json gets its greedy token ids and texts, the spec-decode
counters (drafted, accepted), the quant method vLLM built for every layer
of the trunk and of the drafter ("Class" or "Class/Scheme" for
compressed-tensors), the seconds the job and vLLM's import took, and for each probed trunk linear layer an input x (4
rows, seeded) with the layer's output y, computed by vLLM's own kernel from
the weights as it loaded them; or the error the engine failed with. The engine runs
in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so the layers can be read.
"""
import gc
import json
import os
import sys
import time
import traceback

STARTED = time.monotonic()

import torch  # noqa: E402

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from vllm import LLM, SamplingParams  # noqa: E402
from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel  # noqa: E402
from vllm.model_executor.layers.quantization.kv_cache import BaseKVCacheMethod  # noqa: E402

IMPORTED = time.monotonic() - STARTED


def layer_methods(model):
    out = {}
    for name, mod in model.named_modules():
        qm = getattr(mod, "quant_method", None)
        if qm is None or isinstance(qm, BaseKVCacheMethod):  # attention's KV cache: none of these repos quantizes it
            continue
        m = type(qm).__name__
        scheme = getattr(mod, "scheme", None)
        if scheme is not None:
            m += "/" + type(scheme).__name__
        out[name] = m
    return out


def probe(model, name):
    layer = model.get_submodule(name)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, layer.input_size, generator=g).to(torch.bfloat16)
    with torch.no_grad():
        y = layer(x)
    y = y[0] if isinstance(y, tuple) else y
    return {"x": x.float().tolist(), "y": y.float().tolist()}


def counters(llm):
    got = {"drafted": 0, "accepted": 0}
    for m in llm.get_metrics():
        if m.name == "vllm:spec_decode_num_draft_tokens":
            got["drafted"] += m.value
        elif m.name == "vllm:spec_decode_num_accepted_tokens":
            got["accepted"] += m.value
    return got


def run(job, prompts, max_tokens):
    spec = {"method": "mtp", "num_speculative_tokens": 1} if job["mtp"] else None
    # Prefix caching (the default) crashes GatedDeltaNet models at the first
    # speculative step on CPU; the CPU GDN kernel wants bf16.
    llm = LLM(model=job["model"], speculative_config=spec, enforce_eager=True, dtype="bfloat16",
              enable_prefix_caching=False, disable_log_stats=False, max_model_len=512, seed=0)
    try:
        runner = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner
        res = {"trunk": layer_methods(runner.model), "probes": {n: probe(runner.model, n) for n in job.get("probe", [])}}
        if job["mtp"]:
            res["drafter"] = layer_methods(runner.drafter.model)
        outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
        res["tokens"] = [list(o.outputs[0].token_ids) for o in outs]
        res["texts"] = [o.outputs[0].text for o in outs]
        res.update(counters(llm))
        return res
    finally:
        del llm
        gc.collect()


def main():
    spec = json.loads(open(sys.argv[1]).read())
    results = {}
    for job in spec["jobs"]:
        t = time.monotonic()
        try:
            results[job["id"]] = run(job, spec["prompts"], spec["max_tokens"])
        except Exception as e:  # the test asserts on the error
            results[job["id"]] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
        finally:
            destroy_model_parallel()
            destroy_distributed_environment()
        results[job["id"]]["seconds"] = round(time.monotonic() - t, 1)
        results[job["id"]]["import_seconds"] = round(IMPORTED, 1)
        with open(sys.argv[2], "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
