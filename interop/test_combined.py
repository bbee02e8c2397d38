"""--target combined: one MLX file whose trunk stock mlx-lm loads (strictly)
and whose inline mtp.* head is in the one-file layout."""
import json
import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten, tree_map_with_path
from mlx_lm.utils import compute_bits_per_weight, load_model, quantize_model
from safetensors import safe_open

from conftest import export

PROMPT = [[3, 14, 15, 92, 65, 35, 89, 79, 32, 38]]


def logits(model):
    model.set_dtype(mx.float32)  # MLX's CPU gather-matmul runs in float32 only
    out = model(mx.array(PROMPT))
    mx.eval(out)
    return np.array(out)


def test_bf16_trunk_logits_equal_raw(mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["a"]
    out = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--trunk-precision", "bf16")
    ours, _ = load_model(out, strict=True)
    raw, _ = load_model(src, strict=True)  # mlx-lm's own sanitize of the raw checkpoint
    a, b = logits(ours), logits(raw)
    err = np.abs(a - b).max()
    print(f"combined bf16 vs raw fixture: max |logit diff| {err:.2e}")
    assert err < 1e-3
    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"format": "mlx"}


def same_trunk(mine, ref):
    """Our combined file's trunk (all but mtp.*) equals ref tensor for tensor, bits and all."""
    trunk = {k: v for k, v in mine.items() if not k.startswith("mtp.")}
    assert sorted(trunk) == sorted(ref)
    for k in ref:
        assert trunk[k].dtype == ref[k].dtype and trunk[k].shape == ref[k].shape, k
        assert bool(mx.array_equal(trunk[k], ref[k])), k


def mlx_lm_convert(src, bits, group):
    """What mlx_lm.convert does to the raw fixture: load (its sanitize), cast
    to the config dtype (bf16, A_log kept), quantize_model with the model's
    own predicate. (test_equals_mlx_lm_convert runs mlx_lm.convert itself.)"""
    model, config = load_model(src, lazy=True)
    cast = getattr(model, "cast_predicate", lambda _: True)
    model.update(tree_map_with_path(
        lambda k, v: v.astype(mx.bfloat16) if cast(k) and mx.issubdtype(v.dtype, mx.floating) else v,
        model.parameters()))
    return quantize_model(model, config, group, bits, mode="affine")


@pytest.mark.parametrize("bits,group", [(4, 64), (8, 128), (4, 32)])
def test_quantized_trunk_matches_mlx_lm_convert(bits, group, mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["a"]
    out = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--trunk-precision", f"int{bits}",
                 "--head-precision", "bf16", "--group-size", group, "--mlx-rounding", "cpu")
    ref_model, ref_config = mlx_lm_convert(src, bits, group)
    ref = dict(tree_flatten(ref_model.parameters()))
    mine = mx.load(str(out / "model.safetensors"))
    same_trunk(mine, ref)
    # The config declares the same per-module exceptions, keyed by mlx-lm's module path.
    ours_q = json.loads((out / "config.json").read_text())["quantization"]
    strip = lambda q: {k: ({kk: vv for kk, vv in v.items() if kk != "mode"} if isinstance(v, dict) else v)
                       for k, v in q.items() if not k.startswith("mtp.")}
    assert strip(ours_q) == strip(ref_config["quantization"])
    # Stock mlx-lm loads it strictly and computes what the reference model computes.
    ours_model, _ = load_model(out, strict=True)
    err = np.abs(logits(ours_model) - logits(ref_model)).max()
    print(f"combined int{bits} g{group} vs mlx-lm quantized: max |logit diff| {err:.2e}")
    assert err < 1e-4


def test_head_inline_and_independent_precision(mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["a"]
    comb = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--trunk-precision", "int4",
                  "--head-precision", "bf16")
    head = export(mtpconv, src, tmp_path / "h", "--target", "mlx", "--head-precision", "bf16")
    c = mx.load(str(comb / "model.safetensors"))
    h = mx.load(str(head / "model.safetensors"))
    mtp = {k[len("mtp."):]: v for k, v in c.items() if k.startswith("mtp.")}
    assert sorted(mtp) == sorted(h)
    assert "layers.0.mlp.switch_mlp.gate_proj.weight" in mtp
    for k in h:
        assert mtp[k].dtype == mx.bfloat16 and bool(mx.array_equal(mtp[k], h[k])), k
    assert c["language_model.model.layers.0.mlp.switch_mlp.gate_proj.weight"].dtype == mx.uint32
    cfg = json.loads((comb / "config.json").read_text())
    assert "vision_config" not in cfg and cfg["quantization"] == cfg["quantization_config"]
    assert list(cfg) == sorted(cfg)


def test_sharded_combined_loads(mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["a"]
    out = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--max-shard-size", "40MB")
    assert len(list(out.glob("model-*-of-*.safetensors"))) >= 3 and (out / "model.safetensors.index.json").exists()
    ours, _ = load_model(out, strict=True)
    raw, _ = load_model(src, strict=True)
    assert np.abs(logits(ours) - logits(raw)).max() < 1e-3


def run_mlx_lm_convert(src, out, *args):
    """Stock mlx_lm.convert on the raw fixture (its tokenizer included), on this machine's CPU."""
    subprocess.run([sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(src), "--mlx-path", str(out), "-q",
                    *map(str, args)], check=True, capture_output=True)
    return out


def load_dir(d):
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(mx.load(str(f)))
    return out


RECIPES = ["mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6"]


@pytest.mark.parametrize("ours,theirs", [
    (["--trunk-precision", "int3"], ["--q-bits", 3]),
    (["--trunk-precision", "int5", "--group-size", 32], ["--q-bits", 5, "--q-group-size", 32]),
    (["--trunk-precision", "int6", "--group-size", 128], ["--q-bits", 6, "--q-group-size", 128]),
    (["--q-bits", 2, "--q-group-size", 32], ["--q-bits", 2, "--q-group-size", 32]),  # mlx-lm's spellings
    *[(["--trunk-recipe", r], ["--quant-predicate", r, "--q-group-size", 64]) for r in RECIPES],
    (["--quant-predicate", "mixed_3_6", "--q-group-size", 32], ["--quant-predicate", "mixed_3_6", "--q-group-size", 32]),
    *[(["--trunk-precision", m], ["--q-mode", m]) for m in ("mxfp4", "mxfp8", "nvfp4")],
    (["--q-mode", "nvfp4", "--q-bits", 4], ["--q-mode", "nvfp4", "--q-bits", 4]),
], ids=lambda a: "_".join(map(str, a)))
def test_equals_mlx_lm_convert(ours, theirs, mtpconv, fixture_dirs, tmp_path):
    """Tensor for tensor, our combined trunk is what mlx_lm.convert writes; the
    config declares the same quantization; stock mlx-lm loads ours strictly and
    computes exactly the logits of mlx_lm.convert's model."""
    src = fixture_dirs["at"]
    out = export(mtpconv, src, tmp_path / "c", "--target", "combined", "--head-precision", "int4",
                 "--mlx-rounding", "cpu", *ours)
    ref = run_mlx_lm_convert(src, tmp_path / "ref", *theirs)
    mine, want = load_dir(out), load_dir(ref)
    same_trunk(mine, want)
    # The head keeps its own precision (int4), declared per module where it differs.
    q = json.loads((out / "config.json").read_text())["quantization"]
    fq = q.get("mtp.fc", q)
    fc = mine["mtp.fc.weight"]
    assert fq["bits"] == 4 and fq["mode"] == "affine" and fc.dtype == mx.uint32
    assert mine["mtp.fc.scales"].shape[-1] * fq["group_size"] == fc.shape[-1] * 8
    r = json.loads((ref / "config.json").read_text())["quantization"]
    assert sorted(k for k in q if not k.startswith("mtp.")) == sorted(r)
    for k, v in r.items():
        if isinstance(v, dict):  # mlx-lm leaves out "mode" where the model's own predicate set the entry
            assert q[k] == {"mode": "affine", **v}, k
        else:
            assert q[k] == v, k
    if any(a in ("--trunk-recipe", "--quant-predicate") for a in ours):
        # every module listed, at two bit widths (low and high)
        assert len(r) > 50 and len({v["bits"] for v in r.values() if isinstance(v, dict)}) == 2
    ours_model, _ = load_model(out, strict=True)
    ref_model, _ = load_model(ref, strict=True)
    # The card states the trunk's bits per weight as mlx-lm counts them.
    card = (out / "README.md").read_text()
    assert f"- trunk: {compute_bits_per_weight(ref_model):.3f} bits per weight" in card
    a, b = logits(ours_model), logits(ref_model)
    assert np.array_equal(a, b), float(np.abs(a - b).max())
