"""Hy4 (hy_v4): our --target mlx drafter against mlx-vlm 0.7.10 itself.

- Our drafter folder equals what mlx-vlm's own hy_v4_mtp splitter writes
  from the MXFP8 release layout (hy4-tiny): every tensor byte for byte (the
  MXFP8 codes viewed as uint32 words and their E8M0 scales as stored, the
  fused experts kept fused as switch_mlp, kv_b_proj dequantized and
  re-quantized mxfp8 as embed_q / unembed_out), config.json byte for byte
  (its one mxfp8 quantization block), the tokenizer files; other
  precisions are refused (the splitter writes one form). verify --src
  recomputes every tensor from the release's bytes.
- mlx-vlm's own speculative loop (generate_step, draft_kind "mtp") drafts
  with our drafter next to mlx-vlm's hy_v4 trunk (MLA with the DSA
  indexer, output gate, sink and four hyper-connection streams, run on the
  CPU in float32): rigged, the greedy text equals the no-draft text and
  nearly every draft is accepted; plain (random head), the drafts are
  rejected and the text is still the no-draft text.
"""
import json
import subprocess

import mlx.core as mx
import pytest

from conftest import export
from mlx_vlm_loop import assert_rejected, assert_rigged_accepted, bf16_drafters, greedy, load_drafter, make_fixtures
from test_glm import assert_same_drafter

FIXTURES = {"plain": "hy4-tiny", "rigged": "hy4-tiny-rigged"}


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures(FIXTURES)


def load_trunk(src, tmp):
    """mlx-vlm's hy_v4 model of the fixture, loaded strictly in float32.
    mlx-vlm's sanitize keeps the MXFP8 weights (codes viewed as uint32, the
    E8M0 scales as .scales) but reads no quantization from a release's
    config.json: the folder's config names them mxfp8 of 32 (what hy_v4's
    make_quantization_config says), as an MLX conversion of the release does."""
    from mlx_vlm.utils import load_model
    folder = tmp / "trunk"
    folder.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (folder / f.name).symlink_to(f.resolve())
    cfg = json.loads((src / "config.json").read_text())
    cfg["quantization"] = {"group_size": 32, "bits": 8, "mode": "mxfp8"}
    (folder / "config.json").write_text(json.dumps(cfg))
    model = load_model(folder, strict=True)
    model.set_dtype(mx.float32)
    return model


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """Our drafter is what mlx-vlm's hy_v4_mtp splitter writes from the
    MXFP8 release, tensor for tensor and byte for byte in config.json; the
    manifest says which tensors were moved and which re-quantized; verify
    --src recomputes it; other precisions are refused, leaving nothing."""
    from mlx_vlm.speculative.drafters.hy_v4_mtp.split import split_hy_v4_mtp
    ours, ref = bf16_drafters(mtpconv, dirs["plain"], tmp_path, split_hy_v4_mtp)
    got = assert_same_drafter(ours, ref)
    assert (ours / "config.json").read_bytes() == (ref / "config.json").read_bytes()
    cfg = json.loads((ours / "config.json").read_text())
    assert cfg["model_type"] == "hy_v4_mtp" and cfg["block_size"] == 2
    assert cfg["quantization"] == {"group_size": 32, "bits": 8, "mode": "mxfp8"}
    assert got["decoder.mlp.switch_mlp.gate_up_proj.weight"].dtype == mx.uint32
    assert got["decoder.mlp.switch_mlp.gate_up_proj.weight"].shape == (4, 128, 32)
    assert got["decoder.self_attn.embed_q.scales"].shape == (2, 64, 1)
    assert got["decoder.self_attn.learnable_sink_param"].dtype == mx.float32
    man = json.loads((ours / "mtpconv-manifest.json").read_text())
    how = {t["name"]: [x["name"] for x in t["transforms"] or []] for t in man["tensors"]}
    assert how["decoder.mlp.switch_mlp.gate_up_proj.weight"] == ["move_mxfp8"]
    assert how["decoder.self_attn.unembed_out.weight"][0] == "dequantize_mxfp8" and "quantize" in how["decoder.self_attn.unembed_out.weight"]
    res = subprocess.run([str(mtpconv), "verify", "--src", str(tmp_path / "src"), str(ours)], capture_output=True, text=True)
    assert res.returncode == 0 and "28 recomputed from the source: OK" in res.stdout, res.stdout + res.stderr
    res = subprocess.run([str(mtpconv), "export", "--src", str(dirs["plain"]), "--out", str(tmp_path / "int4"), "--target", "mlx",
                          "--head-precision", "int4"], capture_output=True, text=True)
    assert res.returncode != 0 and "ignores any quantization asked" in res.stderr, res.stderr
    assert not (tmp_path / "int4").exists()


@pytest.mark.parametrize("key", ["plain", "rigged"])
def test_mlx_vlm_drafts_with_mtpconv_drafter(mtpconv, dirs, tmp_path, key):
    """mlx-vlm's own MTP loop drafts with our drafter next to its hy_v4
    trunk: the greedy tokens equal the no-draft ones; rigged >= 95 %
    accepted, plain (random head) rejected."""
    model = load_trunk(dirs[key], tmp_path)
    drafter = load_drafter(export(mtpconv, dirs[key], tmp_path / "ours", "--target", "mlx"))
    if key == "rigged":
        assert_rigged_accepted(model, greedy(model), drafter, "hy_v4 rigged: mtpconv drafter in mlx-vlm")
    else:
        assert_rejected(model, drafter, "hy_v4 plain: mtpconv drafter in mlx-vlm")
