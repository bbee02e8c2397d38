"""Model coverage: an official-FP8-shaped release (block-scaled F8_E4M3
weights) and a dense (Qwen3.5/3.6-27B-shaped) head, through the real
consumers: OpenVINO against the independent numpy reference (which
dequantizes FP8 itself), mlx-vlm's drafter and splitter, stock mlx-lm."""
import json

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.utils import load_model
from mlx_vlm.speculative.drafters import load_drafter
from mlx_vlm.speculative.drafters.qwen3_5_mtp.split import Qwen3_5MTPSplitter

from conftest import export
from reference import MTPReference, load_raw
from test_combined import logits
from test_mlx_head import Target, bits_of, drive, drive_reference
from test_openvino import CORE, EXACT, embedding, reference_calls, run_three_calls


def openvino_vs_reference(mtpconv, src, ref_src, tmp_path, precision):
    out = export(mtpconv, src, tmp_path / precision, "--target", "openvino", "--head-precision", precision, "--lm-head-precision", "f16")
    layer = CORE.compile_model(CORE.read_model(out / "openvino_mtp_model.xml"), "CPU", EXACT)
    head = CORE.compile_model(CORE.read_model(out / "openvino_mtp_lm_head.xml"), "CPU", EXACT)
    emb, lm_head = embedding(ref_src)
    rng = np.random.default_rng(5)
    tokens = [int(t) for t in rng.integers(0, emb.shape[0], 7)]
    hidden = rng.standard_normal((5, emb.shape[1]))
    got, got_logits = run_three_calls(layer, head, emb, tokens, hidden)
    want, want_logits = reference_calls(MTPReference(ref_src), emb, lm_head, tokens, hidden)
    rel = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, want))
    rel_l = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got_logits, want_logits))
    return rel, rel_l


@pytest.mark.parametrize("key,ref", [("fp8", "fp8"), ("fp8", "fp8d"), ("dense", "dense")])
def test_openvino_head_matches_reference(key, ref, mtpconv, fixture_dirs, tmp_path):
    """The f16 head made from an FP8 release (against the reference that
    dequantizes the release itself, and against its dequantized twin) and the
    dense head compute the checkpoint's MTP forward, within f16's rounding."""
    rel, rel_l = openvino_vs_reference(mtpconv, fixture_dirs[key], fixture_dirs[ref], tmp_path, "f16")
    print(f"openvino f16 from {key} vs reference on {ref}: hidden {rel:.2e} logits {rel_l:.2e} (bound 1e-2)")
    assert rel < 1e-2 and rel_l < 1e-2


def test_openvino_dense_int4_within_quantization(mtpconv, fixture_dirs, tmp_path):
    rel, rel_l = openvino_vs_reference(mtpconv, fixture_dirs["dense"], fixture_dirs["dense"], tmp_path, "int4")
    print(f"openvino int4 dense vs reference: hidden {rel:.2e} logits {rel_l:.2e} (bound 0.5)")
    assert rel < 0.5 and rel_l < 0.5


@pytest.mark.parametrize("key", ["fp8", "dense"])
def test_drafter_runs_and_matches_reference(key, mtpconv, fixture_dirs, tmp_path):
    """mlx-vlm's load_drafter takes the head (FP8-made or dense) and its
    forward equals the reference on the source within bf16's rounding."""
    src = fixture_dirs[key]
    out = export(mtpconv, src, tmp_path / "d", "--target", "mlx", "--head-precision", "bf16")
    drafter, kind = load_drafter(str(out))
    assert kind == "mtp"
    drafter.set_dtype(mx.float32)
    ref_src = fixture_dirs["fp8d"] if key == "fp8" else src
    target = Target(ref_src)
    rng = np.random.default_rng(9)
    tokens = [int(t) for t in rng.integers(0, target.emb.shape[0], 7)]
    hidden = rng.standard_normal((5, target.emb.shape[1]))
    got = drive(drafter, target, tokens, hidden)
    want = drive_reference(MTPReference(src), target, tokens, hidden)
    rel = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, want))
    print(f"drafter from {key} vs reference: {rel:.2e} (bound 1e-2)")
    assert rel < 1e-2


def test_dense_drafter_equals_mlx_vlm_splitter(mtpconv, fixture_dirs, tmp_path):
    """What mlx-vlm's own splitter writes for a dense model, tensor for tensor."""
    src = fixture_dirs["dense"]
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx", "--head-precision", "bf16")
    theirs = Qwen3_5MTPSplitter().split(str(src), str(tmp_path / "theirs"))
    a, b = mx.load(str(ours / "model.safetensors")), mx.load(str(theirs / "model.safetensors"))
    assert sorted(a) == sorted(b) and "layers.0.mlp.gate_proj.weight" in a
    for k in a:
        assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and np.array_equal(bits_of(a[k]), bits_of(b[k])), k


def test_dense_combined_loads_strictly_with_raw_logits(mtpconv, fixture_dirs, tmp_path):
    """Stock mlx-lm's qwen3_5 loader takes the dense combined file strictly;
    its logits equal those of mlx-lm on the raw checkpoint."""
    src = fixture_dirs["dense"]
    out = export(mtpconv, src, tmp_path / "c", "--target", "combined")
    ours, _ = load_model(out, strict=True)
    raw, _ = load_model(src, strict=True)
    err = np.abs(logits(ours) - logits(raw)).max()
    print(f"dense combined vs raw: max |logit diff| {err:.2e}")
    assert err < 1e-3


def fused_copy(src, dst):
    """The checkpoint at src with per-expert experts fused as the bf16 releases
    store them (gate_up_proj [E, 2I, H], down_proj [E, H, I]): stock mlx-lm's
    sanitize reads only that layout from a raw checkpoint."""
    dst.mkdir()
    weights = {}
    for f in sorted(src.glob("model-*.safetensors")):
        weights.update(mx.load(str(f)))
    prefixes = sorted({k.split(".experts.")[0] for k in weights if ".experts." in k})
    for p in prefixes:
        n = len({k.split(".experts.")[1].split(".")[0] for k in weights if k.startswith(p + ".experts.")})
        e = lambda i, proj: weights.pop(f"{p}.experts.{i}.{proj}.weight")
        gate_up = [mx.concatenate([e(i, "gate_proj"), e(i, "up_proj")]) for i in range(n)]
        weights[p + ".experts.gate_up_proj"] = mx.stack(gate_up)
        weights[p + ".experts.down_proj"] = mx.stack([e(i, "down_proj") for i in range(n)])
    mx.save_safetensors(str(dst / "model.safetensors"), weights, metadata={"format": "pt"})
    (dst / "config.json").write_text((src / "config.json").read_text())
    return dst


def test_fp8_combined_loads_strictly(mtpconv, fixture_dirs, tmp_path):
    """An FP8 release's combined file carries no FP8 declaration: stock mlx-lm
    loads it strictly, with the logits mlx-lm computes on the dequantized twin
    (its experts fused, the only raw layout mlx-lm's sanitize reads)."""
    out = export(mtpconv, fixture_dirs["fp8"], tmp_path / "c", "--target", "combined")
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg and "quantization" not in cfg
    ours, _ = load_model(out, strict=True)
    raw, _ = load_model(fused_copy(fixture_dirs["fp8d"], tmp_path / "fused"), strict=True)
    err = np.abs(logits(ours) - logits(raw)).max()
    print(f"fp8 combined vs dequantized raw: max |logit diff| {err:.2e}")
    assert err < 1e-3


def test_fp8_release_to_mlx_mxfp8(mtpconv, fixture_dirs, tmp_path):
    """--head-precision fp8 on an FP8 release: MLX's mxfp8, every quantized
    tensor equal to mx.quantize(mode="mxfp8") of the exactly dequantized
    weights (the reference dequantizes the release itself), cast to bf16."""
    from test_mlx_quant import quantized_tensors
    src = fixture_dirs["fp8"]
    out = export(mtpconv, src, tmp_path / "o", "--target", "mlx", "--head-precision", "fp8", "--mlx-rounding", "cpu")
    checked = 0
    for base, q, rows, ours in quantized_tensors(src, out):
        if q.get("mode", "affine") == "affine":  # the routers, 8-bit affine as mlx-lm's predicate
            continue
        w = mx.array(rows.astype(np.float32)).astype(mx.bfloat16)
        wq, s = mx.quantize(w, group_size=32, bits=8, mode="mxfp8", stream=mx.cpu)
        assert bool(mx.array_equal(ours[base + ".weight"], wq)) and bool(mx.array_equal(ours[base + ".scales"], s)), base
        checked += 1
    assert checked == 11  # fc, q/k/v/o, shared expert x3, experts x3 (the routers stay affine)
    drafter, kind = load_drafter(str(out))
    assert kind == "mtp"
