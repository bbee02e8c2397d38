"""Asks the installed vLLM's own compressed-tensors functions how it builds
head modules (the vLLM venv's python): python vllm_rules.py CASES.json OUT.json.

CASES.json: [{"name": module, "kind": "linear"|"experts", "ignore": [...]}],
each optionally with "fused" (the MTP class's packed_modules_mapping, when
not FUSED's) and "projs" (the names its MoE asks expert 0's projections by,
when not gate/up/down_proj), or with "fp8": a DeepSeek-V4 block-FP8
quantization_config.
OUT.json: for each case, whether vLLM builds it quantized under a config
whose one group targets "Linear": not should_ignore_layer (with the
packed_modules_mapping of the MTP classes), and for experts, expert 0's
three projections all ignored or none (compressed_tensors_moe.py); for an
"fp8" case, vLLM's DeepseekV4FP8Config made from that config (asserted to be
the method vLLM picks for a deepseek_v4 model) and its is_layer_skipped on
the module, as its get_quant_method asks it for linears and routed experts
alike (models/deepseek_v4/quant_config.py:178-196, fp8.py:177-198)."""
import json
import sys
from types import SimpleNamespace

from vllm.model_executor.layers.quantization.compressed_tensors.utils import should_ignore_layer
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped
from vllm.models.deepseek_v4.quant_config import DeepseekV4FP8Config

FUSED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
         "fused_qkv_a_proj": ["q_a_proj", "kv_a_proj_with_mqa"]}


def quantized(case):
    if "fp8" in case:
        assert DeepseekV4FP8Config.override_quantization_method(
            case["fp8"], None, SimpleNamespace(model_type="deepseek_v4")) == "deepseek_v4_fp8"
        cfg = DeepseekV4FP8Config.from_config(case["fp8"])
        return not is_layer_skipped(case["name"], cfg.ignored_layers, fused_mapping=cfg.packed_modules_mapping,
                                    match_mode=cfg.ignored_layers_match_mode)
    fused = case.get("fused", FUSED)
    if case["kind"] == "experts":
        ignored = [should_ignore_layer(f"{case['name']}.0.{p}", ignore=case["ignore"], fused_mapping=fused)
                   for p in case.get("projs", ("gate_proj", "up_proj", "down_proj"))]
        if any(ignored) and not all(ignored):
            return "error"
        return not all(ignored)
    return not should_ignore_layer(case["name"], ignore=case["ignore"], fused_mapping=fused)


def main():
    cases = json.loads(open(sys.argv[1]).read())
    json.dump([quantized(c) for c in cases], open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
