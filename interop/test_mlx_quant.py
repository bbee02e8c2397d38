"""Every quantized tensor mtpconv writes is bit-identical to real MLX's
mx.quantize (CPU stream) of the same input, with --mlx-rounding cpu; the
committed golden vectors are still what the pinned MLX produces; and the +1
of zero-centred norms is present exactly once."""
import json
import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest

from conftest import ROOT, export
from reference import load_raw


def source_rows(raw, name, cfg):
    """The source tensor behind an output tensor of the drafter, fixed as the
    format requires (experts split or stacked), as float32."""
    full = "mtp." + name
    if ".switch_mlp." in name:
        proj = name.split(".switch_mlp.")[1].split(".")[0]
        p = "mtp.layers.0.mlp.experts."
        if p + "gate_up_proj" in raw:
            i = cfg["moe_intermediate_size"]
            if proj == "down_proj":
                return raw[p + "down_proj"]
            gu = raw[p + "gate_up_proj"]
            return gu[:, :i] if proj == "gate_proj" else gu[:, i:]
        return np.stack([raw[f"{p}{e}.{proj}.weight"] for e in range(cfg["num_experts"])])
    return raw[full]


def quantized_tensors(src, out):
    """Each quantized tensor of an --target mlx output: (module name, its
    quantization entry, the fixed source rows, the output's tensors)."""
    cfg = json.loads((src / "config.json").read_text())["text_config"]
    quant = json.loads((out / "config.json").read_text())["quantization"]
    raw = load_raw(src, "mtp.")
    ours = mx.load(str(out / "model.safetensors"))
    for k in sorted(ours):
        if k.endswith(".scales"):
            base = k[: -len(".scales")]
            yield base, quant.get(base, quant), source_rows(raw, base + ".weight", cfg), ours


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_quantized_tensors_match_mx_quantize(bits, group, mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs["b"]  # per-expert source: stacking and quantization together
    out = export(mtpconv, src, tmp_path / "o", "--target", "mlx", "--head-precision", f"int{bits}",
                 "--group-size", group, "--mlx-rounding", "cpu")
    quant = json.loads((out / "config.json").read_text())["quantization"]
    checked = 0
    for base, q, rows, ours in quantized_tensors(src, out):
        w = mx.array(rows.astype(np.float32)).astype(mx.bfloat16)
        wq, s, b = mx.quantize(w, group_size=q["group_size"], bits=q["bits"], stream=mx.cpu)
        for name, theirs in ((".weight", wq), (".scales", s), (".biases", b)):
            mine = ours[base + name]
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, base + name
            assert bool(mx.array_equal(mine, theirs)), base + name
        checked += 1
    # fc, q/k/v/o_proj, the router, the shared expert's three projections and
    # its gate, and the three stacked expert projections.
    assert checked == 13
    # Routers are quantized as mlx-lm's predicate does (8 bits, group 64),
    # declared per module when that differs from the default.
    routers = sorted(k for k in quant if isinstance(quant[k], dict))
    want = [] if (bits, group) == (8, 64) else ["layers.0.mlp.gate", "layers.0.mlp.shared_expert_gate"]
    assert routers == want
    for r in routers:
        assert (quant[r]["bits"], quant[r]["group_size"]) == (8, 64)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
def test_microscaling_tensors_match_mx_quantize(mode, mtpconv, fixture_dirs, tmp_path):
    """Each microscaling mode at its own group size: codes and U8 scales equal
    mx.quantize's (CPU stream) on the same bf16 input; no biases."""
    src = fixture_dirs["b"]
    out = export(mtpconv, src, tmp_path / "o", "--target", "mlx", "--head-precision", mode, "--mlx-rounding", "cpu")
    quant = json.loads((out / "config.json").read_text())["quantization"]
    assert quant["mode"] == mode and (quant["group_size"], quant["bits"]) == {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}[mode]
    checked = 0
    for base, q, rows, ours in quantized_tensors(src, out):
        w = mx.array(rows.astype(np.float32)).astype(mx.bfloat16)
        if q.get("mode", "affine") == "affine":  # the routers: affine 8-bit, group 64, as mlx-lm's predicate
            assert base.endswith(("mlp.gate", "shared_expert_gate")) and (q["bits"], q["group_size"]) == (8, 64), base
            continue
        assert q["mode"] == mode and base + ".biases" not in ours, base
        wq, s = mx.quantize(w, group_size=q["group_size"], bits=q["bits"], mode=mode, stream=mx.cpu)
        for name, theirs in ((".weight", wq), (".scales", s)):
            mine = ours[base + name]
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape, base + name
            assert bool(mx.array_equal(mine, theirs)), base + name
        checked += 1
    assert checked == 11  # the 13 quantized tensors but the two routers
    # The corner cases (ties, all-zero and -0 groups, maxima at powers of two)
    # are in the golden vectors quant's Go tests compare with (see below).


def test_golden_vectors_are_current(tmp_path):
    fresh = tmp_path / "golden.safetensors"
    subprocess.run([sys.executable, str(ROOT / "interop" / "golden_mlx.py"), str(fresh)], check=True)
    a = mx.load(str(fresh))
    b = mx.load(str(ROOT / "testdata" / "golden" / "mlx_affine_cpu.safetensors"))
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and bool(mx.array_equal(a[k], b[k])), k


def test_fp_golden_vectors_are_current(tmp_path):
    fresh = tmp_path / "golden.safetensors"
    subprocess.run([sys.executable, str(ROOT / "interop" / "golden_mlx_fp.py"), str(fresh)], check=True)
    a = mx.load(str(fresh))
    b = mx.load(str(ROOT / "testdata" / "golden" / "mlx_fp_cpu.safetensors"))
    assert sorted(a) == sorted(b) and len(a) == 12
    for k in a:
        assert a[k].dtype == b[k].dtype and bool(mx.array_equal(a[k], b[k])), k


@pytest.mark.parametrize("key", ["a", "b", "c"])
def test_norm_plus_one_exactly_once(key, mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs[key]
    out = export(mtpconv, src, tmp_path / "o", "--target", "mlx", "--head-precision", "f16")
    raw = load_raw(src, "mtp.")
    ours = mx.load(str(out / "model.safetensors"))
    norms = [k for k in ours if ours[k].ndim == 1]
    assert len(norms) == 7  # 3 MTP norms, input/post-attention, q/k
    for k in norms:
        got = np.array(ours[k].astype(mx.float32)).astype(np.float64)
        w = raw["mtp." + k]
        want = np.float16(w.astype(np.float32) + np.float32(1)).astype(np.float64)  # f32 add, one rounding
        assert np.array_equal(got, want), k
        # Never judged by magnitude: compared with the source, neither w nor w+2.
        assert np.abs(got - w).min() > 0.5 and np.abs(got - (w + 2)).min() > 0.5, k


@pytest.mark.parametrize("bits", [4, 8])
def test_dequantized_head_within_bound_of_source(bits, mtpconv, fixture_dirs, tmp_path):
    """Every quantized head tensor, dequantized with the format's formula, is
    within one step (plus the bf16 rounding of its scale) of the fixed source."""
    from test_mlx_head import dequantize

    src = fixture_dirs["a"]
    out = export(mtpconv, src, tmp_path / "o", "--target", "mlx", "--head-precision", f"int{bits}")
    checked = 0
    for base, q, w, ours in quantized_tensors(src, out):
        k = base + ".scales"
        w = np.array(mx.array(w.astype(np.float32)).astype(mx.bfloat16).astype(mx.float32)).astype(np.float64)
        deq = dequantize(ours[base + ".weight"], ours[k], ours[base + ".biases"], q["bits"], q["group_size"])
        step = np.abs(np.array(ours[k].astype(mx.float32))).repeat(q["group_size"], axis=-1).reshape(deq.shape)
        slack = 1 + (2 ** q["bits"] - 1) / 256
        err = np.abs(deq - w)
        assert np.all(err <= step * slack + 1e-6), (base, float((err / np.maximum(step, 1e-12)).max()))
        checked += 1
    assert checked == 13
