"""What mtpconv bench needs to know about the vLLM a python has, without
importing vLLM (that takes seconds and imports torch): one JSON line with the
distribution and version that provide the `vllm` package, whether its OpenAI
server module is there, and whether its server has the per-request metrics
flags (found in the source files that define them; absent means bench reads
/metrics alone)."""
import importlib.metadata
import importlib.util
import json
import os
import sys


def has(root, rel, text):
    try:
        with open(os.path.join(root, *rel.split("/")), encoding="utf-8") as f:
            return text in f.read()
    except OSError:
        return False


out = {"python": sys.version.split()[0], "vllm": None}
spec = importlib.util.find_spec("vllm")
if spec is not None and spec.submodule_search_locations:
    root = list(spec.submodule_search_locations)[0]
    dists = sorted(importlib.metadata.packages_distributions().get("vllm", []))
    out["dist"] = dists[0] if dists else None
    out["vllm"] = importlib.metadata.version(dists[0]) if dists else "unknown"
    out["api_server"] = os.path.isfile(os.path.join(root, "entrypoints", "openai", "api_server.py"))
    out["per_request_metrics"] = has(root, "entrypoints/launchers/cli_args.py", "enable_per_request_metrics")
    out["per_request_spec_metrics"] = has(root, "config/observability.py", "per_request_spec_decode_metrics")
print(json.dumps(out))
