"""--target gguf for Step-3.5-Flash (llama.cpp's step35): three chained MTP
heads, blocks n_layer + 0..2, each its own decoder layer (sliding-window
attention with a head-wise gate) and shared head, which llama.cpp's draft-mtp
driver runs one per draft step (common/speculative.cpp's chain_heads). The
sidecar, --graft onto the reference converter's --no-mtp trunk and the split
of that bundled file are compared with the reference converter's files in Go
(convert/targets/gguf/step35_test.go). Here, against llama.cpp itself:

- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's logits of the three heads chained as its draft-mtp driver
  chains them (interop/mtp_logits.cpp --depth 3: head j fed head j-1's
  h_nextn) for our sidecar agree with the numpy reference
  (interop/reference_nextn.py Step35Reference: sliding-window masks, half
  RoPE in full-attention layers, head-wise gates, stacked sigmoid-routed
  experts) fed llama.cpp's own h_nextn, and the trunk's logits with its own,
  over a prompt longer than the sliding window;
- llama.cpp drafts with our sidecar and with the heads grafted into the trunk
  (one file, every trunk tensor kept): greedy text equal to the no-draft text
  (with a sliding window wider than the context: see wide);
  on the rigged twin it accepts >= 95% of the drafts at bf16, Q8_0 and
  Q4_K_M, three drafts per step (every depth drafts).

Step-3.7-Flash (the "37" fixtures: the same text model nested as text_config,
llama3 RoPE scaling in the full-attention layers, the MTP layers full
attention so the heads read rope_freqs too) runs the same checks: its logits
agree with the reference scaling its RoPE as llama3 says (and miss without
it), and llama.cpp drafts with it.
"""
import json

import numpy as np
import pytest

import nextn_gguf
from conftest import ROOT
from nextn_gguf import REFERENCE, every_type, ggtrunk_of, run_mtp_logits
from reference_nextn import Step35Reference
from test_glm_gguf import mtp_logits  # noqa: F401  (session fixture)
from test_gguf import describe, ggtrunk, llama_bin  # noqa: F401  (session fixtures)

FX = {"plain": "step3.5-flash-tiny", "rigged": "step3.5-flash-tiny-rigged",
      "plain37": "step3.7-flash-tiny", "rigged37": "step3.7-flash-tiny-rigged"}
# Longer than the fixture's sliding window (8): the masks matter in trunk and heads.
TOKENS = [3, 17, 200, 33, 4, 99, 250, 11, 42, 7, 130, 64, 5, 301, 18, 90, 77, 2, 150, 260]
HEADS = 3


def wide(folders, tmp):
    """The plain fixtures with a sliding window wider than the context (4096 >
    -c 512), as "wide" and "wide37". llama-speculative-simple's verification
    batches over llama.cpp's sliding-window cache decode the trunk otherwise
    than single tokens once the context passes the window: with the fixture's
    window of 8 even the reference converter's trunk, drafting with no draft
    accepted, generates other text than llama-simple, whose text is the numpy
    reference's greedy one (docs/step.md). The heads' sliding-window math is
    checked by test_llama_logits_equal_reference at window 8."""
    out = {}
    for v in ("", "37"):
        plain = folders["plain" + v]
        d = tmp / "wide" / FX["plain" + v]
        d.mkdir(parents=True)
        for f in plain.iterdir():
            if f.name != "config.json":
                (d / f.name).symlink_to(f)
        cfg = json.loads((plain / "config.json").read_text())
        cfg.get("text_config", cfg)["sliding_window"] = 4096
        (d / "config.json").write_text(json.dumps(cfg, indent=2))
        out["wide" + v] = d
    return out


def trunk(ggtrunk, key, src, d):
    """The --no-mtp trunk of each fixture: the reference converter's (committed)
    for the plain ones, internal/ggtrunk's (its tensors and keys are the
    reference's, checked below) for the rigged and wide ones."""
    if key.startswith("plain"):
        return REFERENCE / f"{FX[key]}-nomtp-bf16.gguf"
    return ggtrunk_of(ggtrunk, src, d / f"{key}-BF16.gguf")


family = nextn_gguf.family_fixture(FX, trunk, srcs=wide)
test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    {**FX, "wide": FX["plain"], "wide37": FX["plain37"]},
    quantized=every_type("plain") + [("plain37", ("--gguf-type", t, t)) for t in ["F16", "Q8_0", "Q4_K_M"]],
    drafts=["wide", "wide37"], rigged=["rigged", "rigged37"], depth=HEADS)


@pytest.mark.parametrize("fx", ["plain", "plain37"])
def test_test_trunk_is_the_reference_layout(family, ggtrunk, tmp_path, fx):
    ours = ggtrunk_of(ggtrunk, family.src(fx), tmp_path / "trunk.gguf")
    got, want = describe(ours), describe(family.trunk(fx))
    by_name = lambda ts: sorted(ts, key=lambda t: t["name"])  # noqa: E731 (its order is ggtrunk's own)
    assert by_name(got["tensors"]) == by_name(want["tensors"])
    skip = {"general.name", "general.size_label", "general.basename", "general.finetune"}
    assert {k: v for k, v in got["metadata"].items() if k not in skip} == {k: v for k, v in want["metadata"].items() if k not in skip}


@pytest.fixture(scope="module")
def reference():
    return {fx: Step35Reference(ROOT / "testdata" / "fixtures" / FX[fx]) for fx in ("plain", "plain37")}


@pytest.mark.parametrize("fx", ["plain", "plain37"])
def test_llama_logits_equal_reference(family, mtp_logits, reference, fx):
    reference = reference[fx]
    got = run_mtp_logits(mtp_logits, family.trunk(fx), family.bf16(fx), TOKENS, depth=HEADS)
    h = np.array(got["h"])
    pos = np.arange(len(TOKENS))
    reference.reset()
    want_h, want_trunk = reference.trunk(TOKENS, pos)
    np.testing.assert_allclose(h, want_h, rtol=0, atol=2e-2 * np.abs(want_h).max())
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    assert len(got["mtp"]) == HEADS
    for j, want in enumerate(reference.chained_logits(TOKENS, h, HEADS)):
        mtp = np.array(got["mtp"][j]["rows"])
        rel = np.abs(mtp - want).max() / np.abs(want).max()
        print(f"{FX[fx]} head {j}: {len(mtp)} rows, max |llama.cpp - numpy| / max |numpy| = {rel:.2e}")
        np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
        assert (mtp.argmax(-1) == want.argmax(-1)).all()
    if fx == "plain37":
        # Without llama3 scaling the reference misses llama.cpp's trunk and
        # heads: the rope_freqs llama.cpp read are what it computes.
        unscaled = Step35Reference(ROOT / "testdata" / "fixtures" / FX[fx], weights=reference.w, scaling=False)
        _, off_trunk = unscaled.trunk(TOKENS, pos)
        trunk_rel = np.abs(np.array(got["trunk"]) - off_trunk).max() / np.abs(off_trunk).max()
        head_rel = [np.abs(np.array(got["mtp"][j]["rows"]) - want).max() / np.abs(want).max()
                    for j, want in enumerate(unscaled.chained_logits(TOKENS, h, HEADS))]
        print(f"{FX[fx]} without llama3 scaling: trunk {trunk_rel:.2e}, heads " + ", ".join(f"{r:.2e}" for r in head_rel))
        assert trunk_rel > 5e-2 and min(head_rel) > 5e-2
