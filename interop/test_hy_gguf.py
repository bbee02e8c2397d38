"""--target gguf for Hy3 (llama.cpp's hy_v3): three chained MTP layers on the
fixture (the release has one), which llama.cpp's draft-mtp driver runs one per
draft step (llama_set_nextn_layer_offset), each fed the hidden state the layer
before it computed. The sidecar and the graft are compared with the reference
converter's files in Go (convert/targets/gguf/hy_v3_test.go). Here:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's logits at every depth (interop/mtp_logits.cpp --depth 3) agree
  with the numpy reference (interop/reference_nextn.py HY3Reference: q/k norms,
  sigmoid routing with the expert bias over all experts, the shared_mlp, each
  layer's final_layernorm) chained from llama.cpp's own h_nextn;
- llama.cpp drafts with our sidecar and with the head grafted into the trunk:
  greedy text equal to the no-draft text; on the rigged twin its drafts are 3
  tokens long (n_draft 3: every depth drafts, n_drafted at least 0.7 of the
  tokens predicted where one head would give 0.5) and >= 95% are accepted at
  bf16, Q8_0 and Q4_K_M.
"""
import numpy as np

import nextn_gguf
from nextn_gguf import every_type, ggtrunk_of, run_mtp_logits
from reference_nextn import HY3Reference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import ggtrunk, llama_bin  # noqa: F401  (session fixtures)

HY = {"plain": "hy3-tiny", "rigged": "hy3-tiny-rigged"}
DEPTH = 3

family = nextn_gguf.family_fixture(HY, lambda ggtrunk, key, src, d: ggtrunk_of(ggtrunk, src, d / "trunk.gguf"))
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance_every_depth = nextn_gguf.llama_tests(
    HY, quantized=every_type("plain"), drafts=["plain"], rigged=["rigged"], depth=DEPTH)


def test_llama_logits_every_depth_equal_reference(family, mtp_logits):
    got = run_mtp_logits(mtp_logits, family.trunk("plain"), family.bf16("plain"), TOKENS, depth=DEPTH)
    ref = HY3Reference(family.src("plain"))
    pos = np.arange(len(TOKENS))
    want_h, want_trunk = ref.trunk(TOKENS, pos)
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    assert len(got["mtp"]) == DEPTH
    hidden = np.array(got["h"])[:-1]
    for j, depth in enumerate(got["mtp"]):
        mtp = np.array(depth["rows"])
        hidden = ref.nextn_hidden(TOKENS[1 + j:], hidden[:len(TOKENS) - 1 - j], pos[1 + j:], j)
        want = hidden @ ref.w["lm_head.weight"].T
        np.testing.assert_allclose(mtp, want, rtol=0, atol=1.5e-2 * np.abs(want).max(), err_msg=f"depth {j}")
        assert (mtp.argmax(-1) == want.argmax(-1)).all(), f"depth {j}"
