"""--target gguf for DeepSeek-V3/V3.1/R1 (llama.cpp's deepseek2), whose NextN
layer (model.layers.61) the reference converter drops (DeepseekV2Model.skip_mtp):
mtpconv is the only producer of this head. deepseek2's MTP draft graph
(src/models/deepseek2.cpp graph_mtp, written for GLM-4.7-Flash) is generic MLA +
MoE with q_lora, and llama.cpp drafts with it. And for DeepSeek-V3.2
(deepseek32: the same head with the DSA indexer's tensors, unused by the MTP
graph; the trunk's sparse attention is dense at the fixture's index_topk). For both:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's NextN logits for our sidecar (interop/mtp_logits.cpp) agree with the
  numpy reference (interop/reference_nextn.py: MLA, sigmoid scores over 2 expert
  groups of which 1 is used) fed llama.cpp's own h_nextn;
- llama.cpp drafts with our sidecar and with the head grafted into the trunk
  (one file, every trunk tensor kept): greedy text equal to the no-draft text; on
  the rigged twin it accepts >= 95% of the drafts at bf16, Q8_0 and Q4_K_M.

No reference sidecar or bundled file exists for DeepSeek-V3 (the converter writes
none); DeepSeek-V3.2's are compared in Go (convert/targets/gguf/deepseek_v3_test.go).
"""
import numpy as np
import pytest

import nextn_gguf
from nextn_gguf import every_type, ggtrunk_of, run_mtp_logits
from reference_nextn import GLMReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import ggtrunk, llama_bin  # noqa: F401  (session fixtures)

DS = {"v3": "deepseek-v3-tiny", "v3-rigged": "deepseek-v3-tiny-rigged",
      "v32": "deepseek-v3.2-tiny", "v32-rigged": "deepseek-v3.2-tiny-rigged"}
FAMILIES = ["v3", "v32"]

family = nextn_gguf.family_fixture(DS, lambda ggtrunk, key, src, d: ggtrunk_of(ggtrunk, src, d / "trunk.gguf"))
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    DS, quantized=every_type("v3") + every_type("v32"), drafts=FAMILIES, rigged=[f + "-rigged" for f in FAMILIES])


@pytest.mark.parametrize("fam", FAMILIES)
def test_llama_nextn_logits_equal_reference(family, mtp_logits, fam):
    src = family.src(fam)
    got = run_mtp_logits(mtp_logits, family.trunk(fam), family.bf16(fam), TOKENS)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    ref = GLMReference(src)
    pos = np.arange(len(TOKENS))
    want_h, want_trunk = ref.trunk(TOKENS, pos)
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    want = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
