"""--target gguf for Nemotron-H MoE (llama.cpp's nemotron_h_moe): the head apart,
mtp.layers.0 (NextN fusion and attention without positions) and mtp.layers.1
(latent MoE of ReLU² experts, final_layernorm), folded into block n_layer as the
reference converter folds them. The trunk llama.cpp runs is the reference
converter's --no-mtp output of each fixture (Mamba-2, attention and MoE layers),
committed in testdata/gguf_reference by interop/reference_gguf.py:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's NextN logits for our sidecar (interop/mtp_logits.cpp) agree with the
  numpy reference (interop/reference_nextn.py NemotronHReference, with llama.cpp's
  LayerNorm as the final norm) fed llama.cpp's own h_nextn, and differ from the
  modelling code's RMSNorm there (a difference of llama.cpp's graph, not of the file);
- llama.cpp drafts with our sidecar and with the head grafted into the trunk
  (one file, every trunk tensor kept): greedy text equal to the no-draft text; on
  the rigged twin it accepts >= 95% of the drafts at bf16, Q8_0 and Q4_K_M.

- the head grafted onto the reference trunk is the reference bundled file byte for
  byte, and our split of it is the reference sidecar, tensor for tensor and key for
  key in order.

The bf16/f16 sidecars' equality with the reference files is checked in Go
(convert/targets/gguf/nemotron_h_test.go), the graft's too.
"""
import hashlib
import json

import numpy as np
import pytest

import nextn_gguf
from nextn_gguf import REFERENCE, every_type, reference_trunk, run_mtp_logits
from reference_nextn import NemotronHReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import PROVENANCE, describe, ggtrunk, llama_bin  # noqa: F401  (session fixtures)
from test_gguf_graft import graft, split, verify

FX = {"plain": "nemotron-h-moe-tiny", "rigged": "nemotron-h-moe-tiny-rigged"}


def trunk_of(key, dst):
    """The reference converter's --no-mtp trunk of the fixture, under the name it gave it."""
    rec = json.loads((REFERENCE / f"{FX[key]}-bundled-bf16.json").read_text())
    return reference_trunk(FX[key], dst / rec["file_name"])


family = nextn_gguf.family_fixture(FX, lambda ggtrunk, key, src, d: trunk_of(key, d))
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    FX, quantized=every_type("plain"), drafts=["plain"], rigged=["rigged"])


def test_llama_nextn_logits_equal_reference(family, mtp_logits):
    src = family.src("plain")
    got = run_mtp_logits(mtp_logits, family.trunk("plain"), family.bf16("plain"), TOKENS)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    pos = np.arange(1, len(TOKENS))
    want = NemotronHReference(src, final_norm="layer").nextn_logits(TOKENS[1:], h[:-1], pos)
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
    modelling = NemotronHReference(src).nextn_logits(TOKENS[1:], h[:-1], pos)
    assert np.abs(modelling - want).max() > 1e-2 * np.abs(want).max()


@pytest.mark.parametrize("key", ["plain", "rigged"])
def test_graft_and_split_equal_reference(mtpconv, family, tmp_path, key):
    bundled = graft(mtpconv, family.src(key), family.trunk(key), tmp_path / "out")
    ref_bundled = json.loads((REFERENCE / f"{FX[key]}-bundled-bf16.json").read_text())
    assert hashlib.sha256(bundled.read_bytes()).hexdigest() == ref_bundled["file_sha256"]
    side = split(mtpconv, bundled, tmp_path / "split")
    ref = json.loads((REFERENCE / f"{FX[key]}-bf16.json").read_text())
    ours = describe(side)
    assert ours["tensors"] == ref["tensors"]
    strip = lambda m: [(k, v) for k, v in m.items() if k not in PROVENANCE]  # noqa: E731
    assert strip(ours["metadata"]) == strip(ref["metadata"])
    verify(mtpconv, tmp_path / "split")
