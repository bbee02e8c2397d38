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
  (with a sliding window wider than the context: see the wide fixture);
  on the rigged twin it accepts >= 95% of the drafts at bf16, Q8_0 and
  Q4_K_M, three drafts per step (every depth drafts).

Step-3.7-Flash (the "37" fixtures: the same text model nested as text_config,
llama3 RoPE scaling in the full-attention layers, the MTP layers full
attention so the heads read rope_freqs too) runs the same checks: its logits
agree with the reference scaling its RoPE as llama3 says (and miss without
it), and llama.cpp drafts with it.
"""
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import Step35Reference
from test_glm_gguf import mtp_logits  # noqa: F401  (session fixture)
from test_gguf_graft import assert_trunk_kept, graft
from test_gguf import PROMPT, describe, ggtrunk, greedy, llama_bin, run_llama, sidecar  # noqa: F401

FX = {"plain": "step3.5-flash-tiny", "rigged": "step3.5-flash-tiny-rigged",
      "plain37": "step3.7-flash-tiny", "rigged37": "step3.7-flash-tiny-rigged"}
# Longer than the fixture's sliding window (8): the masks matter in trunk and heads.
TOKENS = [3, 17, 200, 33, 4, 99, 250, 11, 42, 7, 130, 64, 5, 301, 18, 90, 77, 2, 150, 260]
HEADS = 3


@pytest.fixture(scope="session")
def step_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FX.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(FX, [Path(p) for p in res.stdout.split()]))


@pytest.fixture(scope="session")
def trunks(step_dirs, ggtrunk, tmp_path_factory):
    """The --no-mtp trunk of each fixture: the reference converter's (committed)
    for the plain one, internal/ggtrunk's (its tensors and keys are the
    reference's, checked below) for the rigged one."""
    d = tmp_path_factory.mktemp("trunks")
    out = {}
    for v in ("", "37"):
        out["plain" + v] = ROOT / "testdata" / "gguf_reference" / f"{FX['plain' + v]}-nomtp-bf16.gguf"
        out["rigged" + v] = d / f"rigged{v}-BF16.gguf"
        subprocess.run([str(ggtrunk), str(step_dirs["rigged" + v]), str(out["rigged" + v])], check=True)
    return out


@pytest.mark.parametrize("fx", ["plain", "plain37"])
def test_test_trunk_is_the_reference_layout(step_dirs, ggtrunk, trunks, tmp_path, fx):
    ours = tmp_path / "trunk.gguf"
    subprocess.run([str(ggtrunk), str(step_dirs[fx]), str(ours)], check=True)
    got, want = describe(ours), describe(trunks[fx])
    by_name = lambda ts: sorted(ts, key=lambda t: t["name"])  # noqa: E731 (its order is ggtrunk's own)
    assert by_name(got["tensors"]) == by_name(want["tensors"])
    skip = {"general.name", "general.size_label", "general.basename", "general.finetune"}
    assert {k: v for k, v in got["metadata"].items() if k not in skip} == {k: v for k, v in want["metadata"].items() if k not in skip}


@pytest.mark.parametrize("fx,args", [("plain", ("--head-precision", "int8", "Q8_0")), ("plain", ("--head-precision", "int4", "Q4_K_M"))] +
                         [("plain", ("--gguf-type", t, t)) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]] +
                         [("plain37", ("--gguf-type", t, t)) for t in ["F16", "Q8_0", "Q4_K_M"]])
def test_quantized_equals_llama_quantize(mtpconv, step_dirs, llama_bin, tmp_path, fx, args):
    flag, value, ftype = args
    bf16 = sidecar(mtpconv, step_dirs[fx], tmp_path / "bf16", "bf16")
    export(mtpconv, step_dirs[fx], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


@pytest.fixture(scope="module")
def reference():
    return {fx: Step35Reference(ROOT / "testdata" / "fixtures" / FX[fx]) for fx in ("plain", "plain37")}


@pytest.mark.parametrize("fx", ["plain", "plain37"])
def test_llama_logits_equal_reference(mtpconv, step_dirs, trunks, mtp_logits, reference, tmp_path, fx):
    reference = reference[fx]
    draft = sidecar(mtpconv, step_dirs[fx], tmp_path / "out", "bf16")
    res = subprocess.run([str(mtp_logits), str(trunks[fx]), str(draft), "--depth", str(HEADS), *map(str, TOKENS)],
                         capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
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


def speculative(llama_bin, model, draft=None, n=48):
    """llama-speculative-simple's greedy text and statistics (n_predict among
    them), with the sidecar draft (-md) or the model's own heads. A run whose
    statistics the log lost (llama.cpp issue 22142) is run again."""
    md = ["-md", draft] if draft else []
    for _ in range(6):
        out, err = run_llama(llama_bin, "llama-speculative-simple", "-m", model, *md, "--spec-type", "draft-mtp",
                             "-p", PROMPT, "-n", n, "--temp", "0", "-c", "512", "-t", "2")
        stats = {k: float(v) for k, v in re.findall(r"\b(n_predict|n_drafted|n_accept|accept)\s*=\s*([0-9.]+)", err)}
        if {"n_predict", "n_drafted", "n_accept", "accept"} <= stats.keys():
            return out.strip(), stats
    raise AssertionError("llama-speculative-simple never printed its statistics:\n" + err[-3000:])


def drafted(mtpconv, llama_bin, src, trunk, out, how, precision):
    """llama.cpp's greedy drafting with the heads at precision: a sidecar next to
    the trunk, or grafted into it (one file, every trunk tensor kept)."""
    if how == "sidecar":
        return speculative(llama_bin, trunk, sidecar(mtpconv, src, out, precision))
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return speculative(llama_bin, bundled)


@pytest.fixture(scope="session")
def wide(step_dirs, ggtrunk, tmp_path_factory):
    """The plain fixture with a sliding window wider than the context (4096 >
    -c 512), and its trunk. llama-speculative-simple's verification batches
    over llama.cpp's sliding-window cache decode the trunk otherwise than
    single tokens once the context passes the window: with the fixture's
    window of 8 even the reference converter's trunk, drafting with no draft
    accepted, generates other text than llama-simple, whose text is the numpy
    reference's greedy one (docs/step.md). The heads' sliding-window math is
    checked by test_llama_logits_equal_reference at window 8."""
    out = {}
    for fx in ("plain", "plain37"):
        d = tmp_path_factory.mktemp("wide") / FX[fx]
        d.mkdir()
        for f in step_dirs[fx].iterdir():
            if f.name != "config.json":
                (d / f.name).symlink_to(f)
        cfg = json.loads((step_dirs[fx] / "config.json").read_text())
        cfg.get("text_config", cfg)["sliding_window"] = 4096
        (d / "config.json").write_text(json.dumps(cfg, indent=2))
        trunk = d.parent / "wide-BF16.gguf"
        subprocess.run([str(ggtrunk), str(d), str(trunk)], check=True)
        out[fx] = d, trunk
    return out


@pytest.mark.parametrize("fx,how", [("plain", "sidecar"), ("plain", "graft"), ("plain37", "sidecar"), ("plain37", "graft")])
def test_llama_drafts(mtpconv, wide, llama_bin, tmp_path, fx, how):
    src, trunk = wide[fx]
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, "bf16")
    assert stats["n_drafted"] > 0
    assert len(got) > len(PROMPT)
    assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
@pytest.mark.parametrize("fx", ["rigged", "rigged37"])
def test_rigged_acceptance(mtpconv, step_dirs, trunks, llama_bin, tmp_path, precision, how, fx):
    trunk = trunks[fx]
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, step_dirs[fx], trunk, tmp_path / "out", how, precision)
    steps = stats["n_predict"] - stats["n_accept"]  # each verification step samples one token of its own
    print(f"{FX[fx]} {how} {precision}: predicted {stats['n_predict']:.0f} in {steps:.0f} steps, "
          f"drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > len(PROMPT) + 32 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
    # Chained heads: every step drafts with all three (depth 1, 2 and 3).
    assert stats["n_drafted"] >= HEADS * (steps - 1)
