"""Asks the installed vLLM's own compressed-tensors functions how it builds
head modules (the vLLM venv's python): python vllm_rules.py CASES.json OUT.json.

CASES.json: [{"name": module, "kind": "linear"|"experts", "ignore": [...],
"mapper": {"substr": {...}, "prefix": {...}} (optional)}].
OUT.json: for each case, whether vLLM builds it quantized under a config
whose one group targets "Linear": not should_ignore_layer (with the
packed_modules_mapping of the MTP classes), and for experts, expert 0's
three projections all ignored or none (compressed_tensors_moe.py). A case
with a mapper has its ignore list renamed first as vLLM renames a quant
config's lists for a class with an hf_to_vllm_mapper (model_loader/utils.py
configure_quant_config): compressed-tensors' own apply_vllm_mapper given
the mapper's get_rename_mapper(), both the installed vLLM's."""
import json
import sys
from types import SimpleNamespace

from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig
from vllm.model_executor.layers.quantization.compressed_tensors.utils import should_ignore_layer
from vllm.model_executor.models.utils import WeightsMapper

FUSED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"],
         "fused_qkv_a_proj": ["q_a_proj", "kv_a_proj_with_mqa"],
         # Inkling's attention (vLLM 0.34.0 models/inkling/nvidia/model.py:410-413).
         "qkvr": ["wq_du", "wk_dv", "wv_dv", "wr_du"]}


def renamed(ignore, mapper):
    """The ignore list after CompressedTensorsConfig.apply_vllm_mapper."""
    cfg = SimpleNamespace(ignore=list(ignore), target_scheme_map={}, kv_cache_scheme=None)
    wm = WeightsMapper(orig_to_new_substr=mapper.get("substr", {}), orig_to_new_prefix=mapper.get("prefix", {}))
    CompressedTensorsConfig.apply_vllm_mapper(cfg, wm.get_rename_mapper())
    return cfg.ignore


def quantized(case):
    if "mapper" in case:
        case = dict(case, ignore=renamed(case["ignore"], case["mapper"]))
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
