"""Asks the installed vLLM's own functions how it builds head modules (the
vLLM venv's python): python vllm_rules.py CASES.json OUT.json.

CASES.json: [{"name": module, "kind": "linear"|"experts", "ignore": [...],
"method": "compressed-tensors"|"fp8"|"modelopt", "family": ...}].
OUT.json: for each case, whether vLLM builds it quantized.
- compressed-tensors, a config whose one group targets "Linear": not
  should_ignore_layer (with the packed_modules_mapping of the MTP classes),
  and for experts, expert 0's three projections all ignored or none
  (compressed_tensors_moe.py);
- fp8 (block): Fp8Config.from_config of the list as modules_to_not_convert,
  then what its get_quant_method asks (fp8.py:177-200): is_layer_skipped of
  the module's prefix (a FusedMoE's: the experts module) with the packed
  modules, in the config's match mode; Ling-3.0's class sets that mode
  itself (bailing_moe_v3.py:230-237), so for "ling3" its own function
  configures the config first, and for Qwen3.8-Flash-Next its draft config's
  ignored_layers are renumbered past the trunk by its own _remap_ignored_layers
  (models/qwen4_exp/nvidia/mtp.py:68-82, applied :135-163);
- modelopt (FP8): ModelOptFp8Config.from_config of the list as ignore, its
  entries as apply_vllm_mapper rewrites them (a "x*" entry also as "x" and
  "x.*"), then not is_layer_excluded of the module's prefix: what its
  get_quant_method asks of a linear layer and of a FusedMoE
  (modelopt.py:224-245); Qwen3.8-Flash-Next's exclude_modules renumbered as
  its ignored_layers.
A case with "fp8" (a DeepSeek-V4 block-FP8 quantization_config): vLLM's
DeepseekV4FP8Config made from that config (asserted to be the method vLLM
picks for a deepseek_v4 model) and its is_layer_skipped on the module, as its
get_quant_method asks it for linears and routed experts alike
(models/deepseek_v4/quant_config.py:178-196, fp8.py:177-198). Cases may carry
"fused" (the MTP class's packed_modules_mapping, when not FUSED's) and
"projs" (the names its MoE asks expert 0's projections by)."""
import json
import sys
import types

from vllm.model_executor.layers.quantization.compressed_tensors.utils import should_ignore_layer
from vllm.model_executor.layers.quantization.fp8 import Fp8Config
from vllm.model_executor.layers.quantization.modelopt import ModelOptFp8Config
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped
from vllm.models.deepseek_v4.quant_config import DeepseekV4FP8Config

FUSED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
         "fused_qkv_a_proj": ["q_a_proj", "kv_a_proj_with_mqa"]}


def fp8_quantized(case):
    cfg = Fp8Config.from_config({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                                 "modules_to_not_convert": case["ignore"]})
    if case["family"] == "ling3":
        from vllm.model_executor.models.bailing_moe_v3 import _configure_ling_fp8_quant_config
        _configure_ling_fp8_quant_config(cfg, types.SimpleNamespace(quantization_config={}))
    if case["family"] == "qwen3.8-flash-next":
        from vllm.models.qwen4_exp.nvidia.mtp import _remap_ignored_layers
        cfg.ignored_layers = _remap_ignored_layers(cfg.ignored_layers, case["trunk_layers"])
    return not is_layer_skipped(case["name"], ignored_layers=cfg.ignored_layers, fused_mapping=FUSED,
                                match_mode=cfg.ignored_layers_match_mode)


def modelopt_quantized(case):
    from vllm.model_executor.models.utils import WeightsMapper
    cfg = ModelOptFp8Config.from_config({"quant_method": "modelopt", "quant_algo": "FP8", "ignore": case["ignore"]})
    cfg.packed_modules_mapping = FUSED
    if case["family"] == "qwen3.8-flash-next":
        from vllm.models.qwen4_exp.nvidia.mtp import _remap_ignored_layers
        cfg.exclude_modules = _remap_ignored_layers(cfg.exclude_modules, case["trunk_layers"])
    cfg.apply_vllm_mapper(WeightsMapper())
    return not cfg.is_layer_excluded(case["name"])


def quantized(case):
    if "fp8" in case:
        assert DeepseekV4FP8Config.override_quantization_method(
            case["fp8"], None, types.SimpleNamespace(model_type="deepseek_v4")) == "deepseek_v4_fp8"
        cfg = DeepseekV4FP8Config.from_config(case["fp8"])
        return not is_layer_skipped(case["name"], cfg.ignored_layers, fused_mapping=cfg.packed_modules_mapping,
                                    match_mode=cfg.ignored_layers_match_mode)
    if case.get("method") == "fp8":
        return fp8_quantized(case)
    if case.get("method") == "modelopt":
        return modelopt_quantized(case)
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
