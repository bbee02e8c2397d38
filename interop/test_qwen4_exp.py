"""Qwen3.8-Flash-Next (qwen4_exp): our --target mlx drafter against mlx-vlm
0.7.10 itself.

- Our drafter folder equals what mlx-vlm's own qwen4_exp_mtp splitter writes
  from the fixture: every tensor byte for byte (mtp.* renamed, the fused
  experts split into switch_mlp, the zero-centred norms as stored), every
  config.json key, the tokenizer files; at bf16 and at every quantization the
  splitter offers.
- mlx-vlm's own speculative loop (generate_step with draft_kind "mtp") drafts
  with our drafter next to mlx-vlm's qwen4_exp trunk (hyper-connection
  streams handed over before the trunk's mixer): on the rigged fixture its
  drafts are accepted, and the greedy text equals the text generated without
  drafting; on the plain fixture the same drafter's drafts are rejected.
- mlx-vlm's qwen4_exp_mtp drafter of our folder agrees with the float64
  numpy reference of the head (reference_qwen4_exp.py) built from the
  folder's tensors, logits for logits, through the QSA indexer's sparse
  attention and chained steps.
- A block-FP8 source with per-expert experts (the layout mlx-vlm's
  convert_qwen4_exp_fp8_weights reads): our bf16 drafter of it equals the one
  of its dequantized float32 twin byte for byte, and at --head-precision fp8
  it is what mlx-vlm's splitter writes from the FP8 source itself (mxfp8 of
  the exact weights, the experts stacked).
"""
import json

import mlx.core as mx
import numpy as np
import pytest

from conftest import export
from mlx_vlm_loop import assert_rejected, assert_rigged_accepted, bf16_drafters, fp8_drafters, greedy, load_drafter as load_ours, load_trunk as load_mlx_vlm_trunk, make_fixtures
from test_glm import QUANTIZED, assert_same_drafter

FIXTURES = {"plain": "qwen3.8-flash-next-tiny", "rigged": "qwen3.8-flash-next-tiny-rigged",
            "fp8": "qwen3.8-flash-next-fp8-tiny", "fp8-dequant": "qwen3.8-flash-next-fp8-dequant-tiny"}


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures(FIXTURES)


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """bf16 (the fixture's storage): our drafter is the splitter's, tensor for
    tensor and byte for byte in config.json, and load_drafter takes both."""
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.qwen4_exp_mtp.split import split_qwen4_exp_mtp
    ours, ref = bf16_drafters(mtpconv, dirs["plain"], tmp_path, split_qwen4_exp_mtp)
    got = assert_same_drafter(ours, ref)
    assert (ours / "config.json").read_bytes() == (ref / "config.json").read_bytes()
    cfg = json.loads((ours / "config.json").read_text())
    assert cfg["model_type"] == "qwen4_exp_mtp" and cfg["block_size"] == 2
    # The splitter's layout, seen in its output: experts split, the
    # hyper-connection tensors under their own names, norms not shifted.
    assert got["layers.0.mlp.switch_mlp.gate_proj.weight"].shape == (8, 64, 128)
    assert got["pre_fc_norm_hidden.weight"].shape == (4 * 128,)
    assert got["hyper_connection_mixer.input_mix_weight_up.weight"].shape == (4 * 128, 32)
    assert abs(got["pre_fc_norm_embedding.weight"].astype(mx.float32)).max().item() < 0.5
    # What the manifest and card say of the norms is true of these bytes.
    man = json.loads((ours / "mtpconv-manifest.json").read_text())
    assert man["model"]["norm_convention"].startswith("zero-centred RMSNorm weights stored as the source stores them: w")
    assert man["model"]["norm_convention"] in (ours / "README.md").read_text()
    for folder in (ours, ref):
        drafter, kind = load_drafter(str(folder))
        assert kind == "mtp" and type(drafter).__name__ == "Qwen4ExpMTPDraftModel"


@pytest.mark.parametrize("prec,group,opts", QUANTIZED, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path, prec, group, opts):
    """Quantized, our drafter is what the splitter writes when asked to
    quantize (mx.quantize on the CPU stream: --mlx-rounding cpu), its
    quantization block included: mlp.gate stays float, shared_expert_gate is
    quantized, the mixers' up-projections (rows of 32) only at groups of 32."""
    from mlx_vlm.speculative.drafters.qwen4_exp_mtp.split import Qwen4ExpMTPSplitter
    src = dirs["plain"]
    with mx.stream(mx.cpu):
        ref = Qwen4ExpMTPSplitter().split(str(src), str(tmp_path / "ref"), **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu"]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, src, tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    assert got["layers.0.mlp.gate.weight"].dtype == mx.bfloat16
    assert "layers.0.mlp.shared_expert_gate.scales" in got
    gs = json.loads((ours / "config.json").read_text())["quantization"]["group_size"]
    assert ("hyper_connection_mixer.input_mix_weight_up.scales" in got) == (32 % gs == 0), gs


def load_trunk(folder):
    """mlx-vlm's qwen4_exp model of the fixture (mlx_vlm_loop.load_trunk)."""
    model = load_mlx_vlm_trunk(folder)
    assert len(model.language_model.model.layers) == 4
    return model


@pytest.fixture(scope="module")
def rigged_trunk(dirs):
    model = load_trunk(dirs["rigged"])
    return model, greedy(model)


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4"])
def test_mlx_vlm_drafts_with_rigged_head(mtpconv, dirs, rigged_trunk, tmp_path, prec):
    """mlx-vlm's own MTP loop drafts with our drafter next to its trunk: the
    greedy tokens equal the no-draft ones and nearly every draft is accepted."""
    model, want = rigged_trunk
    drafter = load_ours(export(mtpconv, dirs["rigged"], tmp_path / "ours", "--target", "mlx", "--head-precision", prec))
    assert_rigged_accepted(model, want, drafter, f"qwen4_exp rigged {prec}")


def test_unrigged_head_is_rejected(mtpconv, dirs, tmp_path):
    """The rigged acceptance above can fail: on the plain fixture (random
    weights) mlx-vlm accepts few of the same drafter's drafts."""
    model = load_trunk(dirs["plain"])
    drafter = load_ours(export(mtpconv, dirs["plain"], tmp_path / "ours", "--target", "mlx"))
    assert_rejected(model, drafter, "qwen4_exp plain bf16")


def test_fp8_source(mtpconv, dirs, tmp_path):
    from mlx_vlm.speculative.drafters.qwen4_exp_mtp.split import split_qwen4_exp_mtp
    got = assert_same_drafter(*fp8_drafters(mtpconv, dirs["fp8"], dirs["fp8-dequant"], tmp_path, split_qwen4_exp_mtp))
    assert got["layers.0.mlp.switch_mlp.gate_proj.weight"].dtype == mx.uint32


PREFILL = 24  # past indexer_budget / indexer_compress_ratio = 4 complete blocks: QSA picks blocks


def drive_head(step, tokens, hidden):
    """The head's three stateful calls as the loop makes them: a prefill of
    PREFILL tokens with the trunk's streams, then two single tokens each fed
    the streams of the call before. step(tokens, hidden, positions) returns
    (mixed hidden, streams); the mixed hiddens are returned."""
    outs, streams = [], hidden
    for i, (lo, hi) in enumerate([(0, PREFILL), (PREFILL, PREFILL + 1), (PREFILL + 1, PREFILL + 2)]):
        mixed, streams = step(tokens[lo:hi], streams if i == 0 else streams[-1:], np.arange(lo, hi))
        outs.append(mixed)
    return outs


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4"])
def test_drafter_logits_match_numpy_reference(mtpconv, dirs, tmp_path, prec):
    """mlx-vlm's qwen4_exp_mtp drafter of our folder computes the head's math:
    its logits (trunk lm_head of the head's mixer) agree with an independent
    numpy reference (interop/reference_qwen4_exp.py) built from the folder's
    own tensors, over a prefill long enough for the QSA indexer to choose key
    blocks and two chained single-token steps; and with the reference built
    from the raw checkpoint within what the precision allows."""
    from reference_qwen4_exp import Qwen4ExpMTPReference
    from test_mlx_head import drafter_weights
    from test_mlx_head import Target
    src = dirs["plain"]
    ours = export(mtpconv, src, tmp_path / prec, "--target", "mlx", "--head-precision", prec)
    drafter = load_ours(ours)
    target = Target(src)
    cfg = json.loads((src / "config.json").read_text())["text_config"]
    rng = np.random.default_rng(2)  # a draw whose indexer choices have no ties at the cut-off (AmbiguousSelection)
    tokens = [int(t) for t in rng.integers(0, cfg["vocab_size"], PREFILL + 2)]
    hidden = rng.standard_normal((PREFILL, cfg["hc_count"] * cfg["hidden_size"]))
    lm_head = np.array(target.lm_head.weight).astype(np.float64)

    drafter.reset(target)

    def mlx_step(toks, h, positions):
        mixed, streams = drafter._forward_tokens(mx.array([toks]), mx.array(h[None].astype(np.float32)), mx.int32)
        return [np.array(a[0].astype(mx.float32)).astype(np.float64) for a in (mixed, streams)]

    def ref_step(ref):
        return lambda toks, h, positions: ref.step(target.emb[toks], h, positions)

    got = [m @ lm_head.T for m in drive_head(mlx_step, tokens, hidden)]
    file_ref = Qwen4ExpMTPReference(cfg, drafter_weights(ours))
    want = [m @ lm_head.T for m in drive_head(ref_step(file_ref), tokens, hidden)]
    assert file_ref.sparse_queries == 7, file_ref.sparse_queries  # positions 19..25 see the indexer's blocks, not plain causal attention
    for call, (g, w) in enumerate(zip(got, want)):
        rel = np.abs(g - w).max() / np.abs(w).max()
        print(f"qwen4_exp {prec} call {call}: logits vs reference of the file's tensors {rel:.2e} (bound 1e-4)")
        assert rel < 1e-4, (call, rel)
        assert (g.argmax(-1) == w.argmax(-1)).mean() >= 0.9, call
    # Against the raw checkpoint: quantization noise in every row (its
    # median bounded), now and then a discrete choice (an expert, a key
    # block) flipped by it in a row (the max only printed).
    raw = np.concatenate(drive_head(ref_step(Qwen4ExpMTPReference.from_checkpoint(src)), tokens, hidden)) @ lm_head.T
    rows = np.abs(np.concatenate(got) - raw).max(axis=-1) / np.abs(raw).max()
    bound = {"bf16": 1e-4, "int8": 1e-2, "int4": 0.15}[prec]
    print(f"qwen4_exp {prec}: logits vs reference of the raw checkpoint, median row {np.median(rows):.2e} (bound {bound}), max {rows.max():.2e}")
    assert np.median(rows) < bound
    if prec == "bf16":  # the drafter's bf16 tensors are the checkpoint's
        assert rows.max() < bound
