"""Inkling (inkling_mm_model): our --target mlx drafter against mlx-vlm
0.7.10 itself.

- Our drafter folder equals what mlx-vlm's own inkling_mtp splitter writes
  from the fixture: every tensor byte for byte (model.mtp.* renamed into
  blocks.{j}, wq/wk/wv/wr stacked as qkvr_proj, w13_dn's interleaved rows
  dealt to gate_proj and up_proj, the short convolutions as MLX's [C, K, 1],
  the trunk's final norm carried), config.json byte for byte (num_mtp_layers
  and mtp_local_layer_ids after text_config's keys and beside it), the
  tokenizer files; at bf16 and at every quantization the splitter offers.
- mlx-vlm's own speculative loop (generate_step with draft_kind "mtp")
  drafts with our drafter next to mlx-vlm's inkling trunk (its two depths,
  one sliding-window, the second drafting every token after the first): on
  the rigged fixture its drafts are accepted and the greedy text equals the
  text generated without drafting; on the plain fixture the same drafter's
  drafts are rejected.
- mlx-vlm's inkling_mtp drafter of our folder agrees with the float64 numpy
  reference of the depths (reference_inkling.py) built from the folder's
  tensors, logits for logits, past the window and the relative extent.
"""
import json

import mlx.core as mx
import pytest

from conftest import export
from mlx_vlm_loop import assert_rejected, assert_rigged_accepted, bf16_drafters, greedy, load_drafter as load_ours, load_trunk, make_fixtures
from test_glm import QUANTIZED, QUANTIZED_1BIT, assert_same_drafter, lossy, one_bit

FIXTURES = {"plain": "inkling-tiny", "rigged": "inkling-tiny-rigged"}


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures(FIXTURES)


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """bf16 (the fixture's storage): our drafter is the splitter's, tensor for
    tensor and byte for byte in config.json, and load_drafter takes both."""
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.inkling_mtp.split import split_inkling_mtp
    ours, ref = bf16_drafters(mtpconv, dirs["plain"], tmp_path, split_inkling_mtp)
    got = assert_same_drafter(ours, ref)
    assert (ours / "config.json").read_bytes() == (ref / "config.json").read_bytes()
    cfg = json.loads((ours / "config.json").read_text())
    assert cfg["model_type"] == "inkling_mtp" and cfg["block_size"] == 4 and cfg["num_mtp_layers"] == 2
    assert list(cfg["text_config"])[-2:] == ["num_mtp_layers", "mtp_local_layer_ids"]
    # The splitter's layout, seen in its output: q/k/v/r stacked (depth 1
    # sliding-window: the swa_* heads), the convolutions [C, K, 1], the
    # trunk's norm carried, global_scale float32 as stored.
    assert got["blocks.1.transformer_block.self_attn.qkvr_proj.weight"].shape == (128 + 128 + 128 + 64, 128)
    assert got["blocks.0.transformer_block.self_attn.qkvr_proj.weight"].shape == (128 + 64 + 64 + 64, 128)
    assert got["blocks.0.transformer_block.attn_sconv.conv.weight"].shape == (128, 4, 1)
    assert got["blocks.0.transformer_block.mlp.global_scale"].dtype == mx.float32
    assert "norm.weight" in got
    for folder in (ours, ref):
        drafter, kind = load_drafter(str(folder))
        assert kind == "mtp" and type(drafter).__name__ == "InklingMTPDraftModel"


@pytest.mark.parametrize("prec,group,opts", QUANTIZED + QUANTIZED_1BIT, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED + QUANTIZED_1BIT])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path, prec, group, opts):
    """Quantized, our drafter is what the splitter writes when asked to
    quantize (mx.quantize on the CPU stream: --mlx-rounding cpu), its
    quantization block included: every .weight matrix whose rows divide into
    the groups, the convolutions (rows of 1), rel_proj and the norms float."""
    from mlx_vlm.speculative.drafters.inkling_mtp.split import InklingMTPSplitter
    src = dirs["plain"]
    with mx.stream(mx.cpu):
        ref = InklingMTPSplitter().split(str(src), str(tmp_path / "ref"), **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu", *lossy(prec)]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, src, tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    assert "blocks.1.transformer_block.self_attn.qkvr_proj.scales" in got
    assert got["blocks.1.transformer_block.self_attn.rel_proj"].dtype == mx.bfloat16
    assert "blocks.0.transformer_block.mlp_sconv.conv.scales" not in got


@pytest.fixture(scope="module")
def rigged_trunk(dirs):
    model = load_trunk(dirs["rigged"])
    assert len(model.language_model.model.layers) == 2
    return model, greedy(model)


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4", "int1"])
def test_mlx_vlm_drafts_with_rigged_head(mtpconv, dirs, rigged_trunk, tmp_path, prec):
    """mlx-vlm's own MTP loop drafts with our drafter next to its trunk: the
    greedy tokens equal the no-draft ones and nearly every draft is accepted."""
    model, want = rigged_trunk
    drafter = load_ours(export(mtpconv, dirs["rigged"], tmp_path / "ours", "--target", "mlx", "--head-precision", prec, *one_bit(prec)))
    assert_rigged_accepted(model, want, drafter, f"inkling rigged {prec}")


def test_unrigged_head_is_rejected(mtpconv, dirs, tmp_path):
    """The rigged acceptance above can fail: on the plain fixture (random
    weights) mlx-vlm accepts few of the same drafter's drafts."""
    model = load_trunk(dirs["plain"])
    drafter = load_ours(export(mtpconv, dirs["plain"], tmp_path / "ours", "--target", "mlx"))
    assert_rejected(model, drafter, "inkling plain bf16")


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4"])
def test_drafter_logits_match_numpy_reference(mtpconv, dirs, tmp_path, prec):
    """mlx-vlm's inkling_mtp drafter of our folder computes the head's math:
    its logits agree with an independent numpy reference
    (interop/reference_inkling.py) built from the folder's own tensors, on
    each depth: a prefill longer than the relative-position extent (depth 0,
    global, log-scaled) or the window (depth 1, sliding), then a single
    token fed the depth's own output (the caches and short-convolution
    histories carried)."""
    import mlx.nn as nn
    import numpy as np
    from reference import load_raw
    from reference_inkling import InklingMTPReference
    from test_mlx_head import drafter_weights
    src = dirs["plain"]
    ours = export(mtpconv, src, tmp_path / prec, "--target", "mlx", "--head-precision", prec)
    drafter = load_ours(ours)
    cfg = json.loads((ours / "config.json").read_text())
    text = cfg["text_config"]
    raw = load_raw(src, "model.llm.")
    emb, head = raw["model.llm.embed.weight"], raw["model.llm.unembed.weight"]

    class Target(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(*emb.shape)
            self.embed_tokens.weight = mx.array(emb.astype(np.float32))
            self.lm_head = nn.Linear(emb.shape[1], head.shape[0], bias=False)
            self.lm_head.weight = mx.array(head.astype(np.float32))

    drafter.reset(Target())
    ref = InklingMTPReference(text, drafter_weights(ours), cfg["mtp_local_layer_ids"])
    rng = np.random.default_rng(5)
    for depth, n in [(0, 70), (1, 40)]:  # past rel_extent 64; past the window 32
        tokens = [int(t) for t in rng.integers(0, emb.shape[0], n + 1)]
        hidden = rng.standard_normal((n, emb.shape[1]))
        for call, (toks, h) in enumerate([(tokens[:n], hidden), (tokens[n:], None)]):
            if h is None:
                h = want_h[-1:]
            got_h = drafter._forward_seq(mx.array([toks]), mx.array(h[None].astype(np.float32)), depth, mx.int32)
            got = np.array(drafter._block_logits(got_h)[0].astype(mx.float32)).astype(np.float64)
            want_h = ref.step(depth, emb[toks], h)
            want = ref.logits(want_h, head)
            rel = np.abs(got - want).max() / np.abs(want).max()
            print(f"inkling {prec} depth {depth} call {call}: logits vs reference of the file's tensors {rel:.2e} (bound 1e-4)")
            assert rel < 1e-4, (depth, call, rel)
            assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.9
