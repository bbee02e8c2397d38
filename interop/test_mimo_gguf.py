"""--target gguf for MiMo-V2.5 (llama.cpp's mimo2): 3 chained MTP heads
(model.mtp.layers.{j} as blocks n_layer + j, each drafting from the hidden state
the one before computed), sliding-window attention with learned softmax sinks, a
fused qkv_proj. The sidecar, the official FP8 release's (qkv_proj as tensor-parallel
shards) and --graft onto the reference --no-mtp trunk are compared with the
reference converter's files in Go (convert/targets/gguf/mimo_v2_test.go). Here:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's logits of the 3 heads chained for our sidecar (interop/mtp_logits.cpp
  --depth 3: head j on the hidden state head j-1 computed) agree with the numpy
  reference (interop/reference_nextn.py MiMoReference: sliding window of 4
  positions over 8 tokens, sinks, value scale) chained alike from llama.cpp's
  own trunk h_nextn, and so do the trunk's logits and hidden states;
- llama.cpp drafts with our sidecar and with the heads grafted into the trunk (one
  file, every trunk tensor kept): greedy text equal to the no-draft text (with
  flash attention off in the drafting run: the random fixture's trunk has near
  ties that llama.cpp's flash-attention path breaks one way verifying 3 drafts in
  a batch and the other decoding one token at a time); on the rigged twin every one of the 3 depths drafts
  (n_draft 3, 3 drafts a round) and >= 95% are accepted at bf16, Q8_0 and Q4_K_M.
"""
import numpy as np

import nextn_gguf
from nextn_gguf import every_type, ggtrunk_of, run_mtp_logits
from reference_nextn import MiMoReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import ggtrunk, llama_bin  # noqa: F401  (session fixtures)

FX = {"plain": "mimo-v2.5-tiny", "rigged": "mimo-v2.5-tiny-rigged"}
DEPTH = 3

family = nextn_gguf.family_fixture(FX, lambda ggtrunk, key, src, d: ggtrunk_of(ggtrunk, src, d / f"{key}-trunk.gguf"))
# -fa off for the text comparison: see the module docstring (flash attention's near ties).
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    FX, quantized=every_type("plain"), drafts=["plain"], rigged=["rigged"], depth=DEPTH, draft_flags=("-fa", "off"))


def test_llama_logits_equal_reference(family, mtp_logits):
    src = family.src("plain")
    got = run_mtp_logits(mtp_logits, family.trunk("plain"), family.bf16("plain"), TOKENS, depth=DEPTH)
    h = np.array(got["h"])
    ref = MiMoReference(src)
    want_h, want_trunk = ref.trunk(TOKENS, np.arange(len(TOKENS)))
    np.testing.assert_allclose(h, want_h, rtol=0, atol=1e-2 * np.abs(want_h).max())
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=1e-2 * np.abs(want_trunk).max())
    wants = ref.chained_logits(TOKENS, h, DEPTH)
    assert len(got["mtp"]) == DEPTH
    for j, (depth, want) in enumerate(zip(got["mtp"], wants)):
        mtp = np.array(depth["rows"])
        assert mtp.shape == want.shape == (len(TOKENS) - 1 - j, want.shape[1])
        np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max(), err_msg=f"depth {j}")
        assert (mtp.argmax(-1) == want.argmax(-1)).all(), j
