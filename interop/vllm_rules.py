"""Asks the installed vLLM's own compressed-tensors functions how it builds
head modules (the vLLM venv's python): python vllm_rules.py CASES.json OUT.json.

CASES.json: [{"name": module, "kind": "linear"|"experts", "ignore": [...]}].
OUT.json: for each case, whether vLLM builds it quantized under a config
whose one group targets "Linear": not should_ignore_layer (with the
packed_modules_mapping of the MTP classes), and for experts, expert 0's
three projections all ignored or none (compressed_tensors_moe.py)."""
import json
import sys

from vllm.model_executor.layers.quantization.compressed_tensors.utils import should_ignore_layer

FUSED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
         "fused_qkv_a_proj": ["q_a_proj", "kv_a_proj_with_mqa"]}


def quantized(case):
    if case["kind"] == "experts":
        ignored = [should_ignore_layer(f"{case['name']}.0.{p}", ignore=case["ignore"], fused_mapping=FUSED)
                   for p in ("gate_proj", "up_proj", "down_proj")]
        if any(ignored) and not all(ignored):
            return "error"
        return not all(ignored)
    return not should_ignore_layer(case["name"], ignore=case["ignore"], fused_mapping=FUSED)


def main():
    cases = json.loads(open(sys.argv[1]).read())
    json.dump([quantized(c) for c in cases], open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
