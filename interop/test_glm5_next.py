"""GLM-5.3-Flash (glm5_next): our --target mlx drafter against mlx-vlm 0.7.10
itself.

- Our drafter folder equals what mlx-vlm's own glm5_next_mtp splitter writes
  from the fixture: every tensor byte for byte (qkv_a_proj and the shared
  expert's gate_up_proj concatenated, kv_b_proj absorbed, experts stacked,
  float32 tensors kept), every config.json key, the tokenizer files; at bf16
  and at every quantization the splitter offers.
- mlx-vlm's own speculative loop (generate_step with draft_kind "mtp") drafts
  with our drafter next to mlx-vlm's glm5_next trunk: on the rigged fixture
  (a correctly wired head predicts the trunk's next token) its drafts are
  accepted, and the greedy text equals the text generated without drafting.
- A block-FP8 source (mlx-vlm#2044: FP8 must be dequantized before any
  cast): our bf16 drafter of it equals the one of its dequantized float32
  twin byte for byte, and at --head-precision fp8 it is what mlx-vlm's
  splitter writes from the FP8 source itself (mxfp8 of the exact weights).
"""
import json

import mlx.core as mx
import pytest

from conftest import export
from mlx_vlm_loop import NEW_TOKENS, PROMPT, acceptance, bf16_drafters, fp8_drafters, greedy as run, load_drafter as load_ours, load_trunk as load_mlx_vlm_trunk, make_fixtures
from test_glm import QUANTIZED, assert_same_drafter

FIXTURES = {"plain": "glm5.3-flash-tiny", "rigged": "glm5.3-flash-tiny-rigged",
            "fp8": "glm5.3-flash-fp8-tiny", "fp8-dequant": "glm5.3-flash-fp8-dequant-tiny"}


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures(FIXTURES)


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """bf16 (the fixture's storage): our drafter is the splitter's, tensor for
    tensor and key for key, and mlx-vlm's load_drafter takes both."""
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.glm5_next_mtp.split import split_glm5_next_mtp
    ours, ref = bf16_drafters(mtpconv, dirs["plain"], tmp_path, split_glm5_next_mtp)
    got = assert_same_drafter(ours, ref)
    assert (ours / "config.json").read_bytes() == (ref / "config.json").read_bytes()
    cfg = json.loads((ours / "config.json").read_text())
    assert cfg["model_type"] == "glm5_next_mtp" and cfg["block_size"] == 2
    # The splitter's layout, seen in its output.
    assert got["mtp_block.self_attn.qkv_a_proj.weight"].shape == (64 + 64, 128)
    assert got["mtp_block.mlp.shared_experts.gate_up_proj.weight"].shape == (2 * 64, 128)
    assert got["mtp_block.self_attn.embed_q.weight"].shape == (4, 64, 64)
    assert got["mtp_block.mlp.switch_mlp.down_proj.weight"].shape == (8, 128, 64)
    for k in ("mtp_block.self_attn.indexer.index_kpool_compress_ape", "mtp_block.mlp.gate.e_score_correction_bias"):
        assert got[k].dtype == mx.float32, k
    for folder in (ours, ref):
        drafter, kind = load_drafter(str(folder))
        assert kind == "mtp" and type(drafter).__name__ == "Glm5NextMTPDraftModel"


@pytest.mark.parametrize("prec,group,opts", QUANTIZED, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path, prec, group, opts):
    """Quantized, our drafter is what the splitter writes when asked to
    quantize (mx.quantize on the CPU stream: --mlx-rounding cpu), its
    quantization block included; the router stays float, the concatenated
    tensors are quantized as one matrix."""
    from mlx_vlm.speculative.drafters.glm5_next_mtp.split import Glm5NextMTPSplitter
    src = dirs["plain"]
    with mx.stream(mx.cpu):
        ref = Glm5NextMTPSplitter().split(str(src), str(tmp_path / "ref"), **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu"]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, src, tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    assert got["mtp_block.mlp.gate.weight"].dtype == mx.bfloat16
    assert "mtp_block.self_attn.qkv_a_proj.scales" in got


def load_trunk(folder):
    """mlx-vlm's glm5_next model of the fixture (mlx_vlm_loop.load_trunk)."""
    model = load_mlx_vlm_trunk(folder)
    assert len(model.language_model.layers) == 4
    return model


@pytest.fixture(scope="module")
def rigged_trunk(dirs):
    model = load_trunk(dirs["rigged"])
    return model, run(model)


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4"])
def test_mlx_vlm_drafts_with_rigged_head(mtpconv, dirs, rigged_trunk, tmp_path, prec):
    """mlx-vlm's own MTP loop drafts with our drafter next to its trunk: the
    greedy tokens equal the no-draft ones and nearly every draft is accepted."""
    model, want = rigged_trunk
    ours = export(mtpconv, dirs["rigged"], tmp_path / "ours", "--target", "mlx", "--head-precision", prec)
    drafter = load_ours(ours)
    got = run(model, drafter)
    drafted, accepted = acceptance(drafter)
    print(f"glm5_next rigged {prec}: drafted {drafted}, accepted {accepted}, acceptance {accepted / max(drafted, 1):.3f}")
    assert got == want
    assert drafted >= NEW_TOKENS // 2 and accepted >= 0.95 * drafted, (drafted, accepted)
    # mlx-vlm seeds the first draft from the prompt's last token alone, at
    # drafter position 0, whose embedding its drafter zeroes: that one draft
    # fails for any head; every later one is accepted.
    assert drafter.accept_lens[1:] == drafter.draft_lens[1:], (drafter.draft_lens, drafter.accept_lens)


def test_unrigged_head_is_rejected(mtpconv, dirs, tmp_path):
    """The rigged acceptance above can fail: on the plain fixture (random
    weights) mlx-vlm accepts few of the same drafter's drafts."""
    model = load_trunk(dirs["plain"])
    drafter = load_ours(export(mtpconv, dirs["plain"], tmp_path / "ours", "--target", "mlx"))
    assert run(model, drafter) == run(model)
    assert sum(drafter.accept_lens) < 0.5 * sum(drafter.draft_lens), (drafter.accept_lens, drafter.draft_lens)


def test_fp8_source(mtpconv, dirs, tmp_path):
    from mlx_vlm.speculative.drafters.glm5_next_mtp.split import split_glm5_next_mtp
    got = assert_same_drafter(*fp8_drafters(mtpconv, dirs["fp8"], dirs["fp8-dequant"], tmp_path, split_glm5_next_mtp))
    assert got["mtp_block.self_attn.qkv_a_proj.weight"].dtype == mx.uint32


@pytest.mark.parametrize("prec", ["bf16", "int8"])
def test_drafter_forward_matches_reference(mtpconv, dirs, tmp_path, prec):
    """The numpy reference of the NextN layer (interop/reference_nextn.py:
    nope-only MLA with the DSA indexer, sigmoid MoE with the SwiGLU clamp),
    fed mlx-vlm's own trunk hidden states of the plain fixture, agrees with
    mlx-vlm's drafter running our folder: the same argmax at every position,
    logits within 1 % (bf16) / 4 % (int8) of the largest."""
    import numpy as np
    from mlx_vlm.speculative.drafters import load_drafter
    from reference_nextn import Glm5NextReference
    model = load_trunk(dirs["plain"])
    out = model.language_model(mx.array([PROMPT]), return_hidden=True)
    hidden = out.hidden_states[-1]
    tokens = mx.array([PROMPT[1:] + [out.logits[0, -1].argmax().item()]])
    ours = export(mtpconv, dirs["plain"], tmp_path / "ours", "--target", "mlx", "--head-precision", prec)
    drafter, _ = load_drafter(str(ours))
    drafter.set_dtype(mx.float32)
    drafter.bind(model)
    drafter._next_position = 1  # past the drafter's position 0, whose embedding it zeroes
    h, _ = drafter._forward_hidden(drafter._input_embed(tokens), hidden, tokens, None)
    got = np.array(model.language_model.lm_head(h)[0])
    ref = Glm5NextReference(dirs["plain"])
    want = ref.nextn_logits(np.array(tokens[0]), np.array(hidden[0]).astype(np.float64), np.arange(1, len(PROMPT) + 1))
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"glm5_next {prec}: max logit error {err:.2e} of the largest")
    assert (got.argmax(-1) == want.argmax(-1)).all()
    assert err < (0.01 if prec == "bf16" else 0.04), err
