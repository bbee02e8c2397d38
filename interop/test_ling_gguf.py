"""--target gguf for Ling-3.0 (llama.cpp's bailingmoe3): a KDA linear-attention
trunk whose one MTP layer is full attention, head-wise gated multi-head latent
attention with a MoE. The trunks here are the reference converter's own --no-mtp
files (testdata/gguf_reference/FIXTURE-nomtp-bf16.gguf: a KDA layer and a gated
MLA layer, which llama.cpp runs), so the head is drafted next to, and grafted
into, what a user of the converter has. The sidecar and the graft are compared
with the converter's files in Go (convert/targets/gguf/bailing_moe_v3_test.go). Here:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's NextN logits for our sidecar (interop/mtp_logits.cpp) agree with the
  numpy reference (interop/reference_nextn.py LingReference: gated MLA, sigmoid
  group routing with the expert bias) fed llama.cpp's own h_nextn;
- llama.cpp drafts with our sidecar and with the head grafted into the trunk:
  greedy text equal to the no-draft text; on the rigged twin it accepts >= 95% of
  the drafts at bf16, Q8_0 and Q4_K_M.
"""
import numpy as np

import nextn_gguf
from nextn_gguf import every_type, reference_trunk, run_mtp_logits
from reference_nextn import LingReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import ggtrunk, llama_bin  # noqa: F401  (session fixtures)

LING = {"plain": "ling3-tiny", "rigged": "ling3-tiny-rigged"}

# The reference converter's --no-mtp trunk of each fixture, under the converter's name.
family = nextn_gguf.family_fixture(LING, lambda ggtrunk, key, src, d: reference_trunk(LING[key], d / "Ling3-Tiny-BF16.gguf"))
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    LING, quantized=every_type("plain"), drafts=["plain"], rigged=["rigged"])


def test_llama_nextn_logits_equal_reference(family, mtp_logits):
    got = run_mtp_logits(mtp_logits, family.trunk("plain"), family.bf16("plain"), TOKENS)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    want = LingReference(family.src("plain")).nextn_logits(TOKENS[1:], h[:-1], np.arange(1, len(TOKENS)))
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
