"""vllm_rules.py for the MTP classes whose hf_to_vllm_mapper renames a
quant config's module lists (vLLM 0.34.0's InklingMTP): python
vllm_inkling_rules.py CASES.json OUT.json, each case vllm_rules.py's plus
"mapper": {"substr": {...}, "prefix": {...}}. The ignore list is renamed
first as vLLM renames a quant config's lists for such a class
(model_loader/utils.py configure_quant_config): compressed-tensors' own
apply_vllm_mapper given the mapper's get_rename_mapper(), both the installed
vLLM's; Inkling's fused qkvr is added to the packed modules
(models/inkling/nvidia/model.py:410-413)."""
import json
import sys
from types import SimpleNamespace

import vllm_rules
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig
from vllm.model_executor.models.utils import WeightsMapper

vllm_rules.FUSED["qkvr"] = ["wq_du", "wk_dv", "wv_dv", "wr_du"]


def renamed(ignore, mapper):
    """The ignore list after CompressedTensorsConfig.apply_vllm_mapper."""
    cfg = SimpleNamespace(ignore=list(ignore), target_scheme_map={}, kv_cache_scheme=None)
    wm = WeightsMapper(orig_to_new_substr=mapper.get("substr", {}), orig_to_new_prefix=mapper.get("prefix", {}))
    CompressedTensorsConfig.apply_vllm_mapper(cfg, wm.get_rename_mapper())
    return cfg.ignore


def main():
    cases = json.loads(open(sys.argv[1]).read())
    json.dump([vllm_rules.quantized(dict(c, ignore=renamed(c["ignore"], c["mapper"])) if "mapper" in c else c)
               for c in cases], open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
