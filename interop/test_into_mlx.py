"""--target combined --into: the MTP head added to a folder stock mlx_lm.convert
wrote (4-bit, a mixed recipe, mxfp4), without touching its trunk."""
import hashlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.utils import load_model

from conftest import ROOT, export
from test_combined import load_dir, logits, run_mlx_lm_convert


def sha256(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def files(d):
    return {str(p.relative_to(d)): sha256(p) for p in sorted(Path(d).rglob("*")) if p.is_file()}


def into(mtpconv, src, d, *args):
    return subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "combined", "--into", str(d),
                           "--quiet", *map(str, args)], capture_output=True, text=True)


def verify(mtpconv, d, *args):
    return subprocess.run([str(mtpconv), "verify", *map(str, args), str(d)], capture_output=True, text=True)


# mlx_lm.convert's flags, and the precision --target combined names for the
# head the folder's quantization gives (a mixed recipe's default: 4 bits).
FOLDERS = [
    (["--q-bits", 4], ["--head-precision", "int4", "--group-size", 64]),
    (["--quant-predicate", "mixed_3_6"], ["--head-precision", "int4", "--group-size", 64]),
    (["--q-mode", "mxfp4"], ["--head-precision", "mxfp4"]),
]


@pytest.mark.parametrize("theirs,same", FOLDERS, ids=lambda a: "_".join(map(str, a)))
def test_into_mlx_lm_folder(theirs, same, mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["at"]
    ref = run_mlx_lm_convert(src, tmp_path / "ref", *theirs)
    grafted = tmp_path / "grafted"
    shutil.copytree(ref, grafted)
    before = files(grafted)
    res = into(mtpconv, src, grafted, "--mlx-rounding", "cpu")
    assert res.returncode == 0, res.stderr
    after = files(grafted)

    # The trunk's files keep their bytes; config.json and the index are updated,
    # their originals kept; the head is a file of its own.
    for name, h in before.items():
        if name in ("config.json", "model.safetensors.index.json"):
            assert after[name] != h and after[f"mtpconv-original/{name}"] == h, name
        else:
            assert after[name] == h, name
    assert sorted(set(after) - set(before)) == ["model-mtp.safetensors", "mtpconv-manifest.json",
                                                "mtpconv-original/config.json",
                                                "mtpconv-original/model.safetensors.index.json"]

    # Stock mlx-lm loads the grafted folder strictly; the trunk computes exactly what it did.
    ours, cfg = load_model(grafted, strict=True)
    theirs_model, _ = load_model(ref, strict=True)
    a, b = logits(ours), logits(theirs_model)
    assert np.array_equal(a, b), float(np.abs(a - b).max())

    # The head is what --target combined writes from the same source at the same precision.
    comb = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--mlx-rounding", "cpu", *same)
    want = {k: v for k, v in mx.load(str(comb / "model.safetensors")).items() if k.startswith("mtp.")}
    head = mx.load(str(grafted / "model-mtp.safetensors"))
    assert sorted(head) == sorted(want) and len(head) > 20
    for k, v in want.items():
        assert head[k].dtype == v.dtype and bool(mx.array_equal(head[k], v)), k

    # config.json declares every quantized head module; the index maps the head to its file.
    q = json.loads((grafted / "config.json").read_text())["quantization"]
    mode = "mxfp4" if "mxfp4" in theirs else "affine"
    assert q["mtp.fc"]["mode"] == mode and q["mtp.layers.0.mlp.switch_mlp.down_proj"]["mode"] == mode
    assert q["mtp.layers.0.mlp.gate"] == {"group_size": 64, "bits": 8, "mode": "affine"}
    old_q = json.loads((ref / "config.json").read_text())["quantization"]
    assert {k: v for k, v in q.items() if not k.startswith("mtp.")} == old_q
    idx = json.loads((grafted / "model.safetensors.index.json").read_text())["weight_map"]
    assert all(idx[k] == "model-mtp.safetensors" for k in head)

    # verify passes (recomputing the head from the source) and catches a changed trunk tensor.
    res = verify(mtpconv, grafted, "--src", src)
    assert res.returncode == 0, res.stdout + res.stderr
    trunk = grafted / "model.safetensors"
    raw = bytearray(trunk.read_bytes())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    begin = header["language_model.model.layers.0.mlp.switch_mlp.down_proj.weight"]["data_offsets"][0]
    raw[8 + n + begin] ^= 0xFF
    trunk.write_bytes(bytes(raw))
    res = verify(mtpconv, grafted)
    assert res.returncode == 1 and "model.safetensors" in res.stdout and "file_changed" in res.stdout, res.stdout


def test_inspect_says_how_to_add_the_head(mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["at"]
    ref = run_mlx_lm_convert(src, tmp_path / "ref", "--q-bits", 4)
    r = json.loads(subprocess.run([str(mtpconv), "inspect", "--json", str(ref)], check=True,
                                  capture_output=True, text=True).stdout)
    assert r["kind"] == "mlx_folder" and r["mtp_head"] is False
    assert r["add_head_command"] == f"mtpconv export --src SRC --target combined --into {ref}"
    assert into(mtpconv, src, ref).returncode == 0
    out = subprocess.run([str(mtpconv), "inspect", str(ref)], check=True, capture_output=True, text=True).stdout
    assert "added into:" in out and "model-mtp.safetensors" in out


def test_mkfixtures_mlx_folder_is_mlx_lm_convert(tmp_path):
    """mkfixtures' qwen3.6-moe-tiny-bpe-mlx-4bit (written in Go, internal/fixtures/mlx.go,
    for the README's combined --into lines) is what stock `mlx_lm.convert -q --q-bits 4`
    writes of qwen3.6-moe-tiny-bpe on this machine's CPU: every tensor, byte for byte,
    and config.json; and mlx-lm loads it."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", "qwen3.6-moe-tiny-bpe", "qwen3.6-moe-tiny-bpe-mlx-4bit"],
                         cwd=ROOT, check=True, capture_output=True, text=True)
    src, ours = map(Path, res.stdout.split())
    ref = run_mlx_lm_convert(src, tmp_path / "ref", "--q-bits", 4)
    a, b = load_dir(ref), load_dir(ours)
    assert sorted(a) == sorted(b)

    def raw(x):
        return np.array(x.view(mx.uint16) if x.dtype == mx.bfloat16 else x)

    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(raw(a[k]), raw(b[k])), k
    assert json.loads((ours / "config.json").read_text()) == json.loads((ref / "config.json").read_text())
    load_model(ours, strict=True)
