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
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import MiMoReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf_graft import assert_trunk_kept, graft
from test_gguf import PROMPT, describe, ggtrunk, greedy, llama_bin, run_llama, sidecar  # noqa: F401

FX = {"plain": "mimo-v2.5-tiny", "rigged": "mimo-v2.5-tiny-rigged"}


@pytest.fixture(scope="session")
def mimo(ggtrunk, tmp_path_factory):
    """The fixtures and their bf16 trunks (internal/ggtrunk: the --no-mtp layout)."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FX.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    d = tmp_path_factory.mktemp("mimo")
    out = {}
    for key, src in zip(FX, res.stdout.split()):
        trunk = d / f"{key}-trunk.gguf"
        subprocess.run([str(ggtrunk), src, str(trunk)], check=True)
        out[key] = (Path(src), trunk)
    return out


@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, mimo, llama_bin, tmp_path, args):
    flag, value, ftype = args
    src, _ = mimo["plain"]
    bf16 = sidecar(mtpconv, src, tmp_path / "bf16", "bf16")
    export(mtpconv, src, tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


def test_llama_logits_equal_reference(mtpconv, mimo, mtp_logits, tmp_path):
    src, trunk = mimo["plain"]
    draft = sidecar(mtpconv, src, tmp_path / "out", "bf16")
    res = subprocess.run([str(mtp_logits), str(trunk), str(draft), "--depth", "3", *map(str, TOKENS)], capture_output=True,
                         text=True, env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    h = np.array(got["h"])
    ref = MiMoReference(src)
    want_h, want_trunk = ref.trunk(TOKENS, np.arange(len(TOKENS)))
    np.testing.assert_allclose(h, want_h, rtol=0, atol=1e-2 * np.abs(want_h).max())
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=1e-2 * np.abs(want_trunk).max())
    wants = ref.chained_logits(TOKENS, h, 3)
    assert len(got["mtp"]) == 3
    for j, (depth, want) in enumerate(zip(got["mtp"], wants)):
        mtp = np.array(depth["rows"])
        assert mtp.shape == want.shape == (len(TOKENS) - 1 - j, want.shape[1])
        np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max(), err_msg=f"depth {j}")
        assert (mtp.argmax(-1) == want.argmax(-1)).all(), j


STATS = r"\b(n_draft|n_predict|n_drafted|n_accept|accept)\s*=\s*([0-9.]+)"


def drafting(llama_bin, model, draft=None, n=48, extra=()):
    """llama-speculative-simple with the MTP heads of a sidecar (-md) or of the
    model itself; its text and statistics (run again when llama.cpp's log
    thread lost them, llama.cpp issue 22142)."""
    md = ["-md", draft] if draft else []
    for _ in range(6):
        out, err = run_llama(llama_bin, "llama-speculative-simple", "-m", model, *md, "--spec-type", "draft-mtp",
                             "-p", PROMPT, "-n", n, "--temp", "0", "-c", "512", "-t", "2", *extra)
        stats = {k: float(v) for k, v in re.findall(STATS, err)}
        if {"n_draft", "n_predict", "n_drafted", "n_accept", "accept"} <= stats.keys():
            return out.strip(), stats
    raise AssertionError("llama-speculative-simple never printed its statistics:\n" + err[-3000:])


def drafted(mtpconv, llama_bin, src, trunk, out, how, precision, extra=()):
    if how == "sidecar":
        return drafting(llama_bin, trunk, sidecar(mtpconv, src, out, precision), extra=extra)
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return drafting(llama_bin, bundled, extra=extra)


@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, mimo, llama_bin, tmp_path, how):
    src, trunk = mimo["plain"]
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, "bf16", extra=("-fa", "off"))
    assert stats["n_draft"] == 3 and stats["n_drafted"] > 0
    assert len(got) > len(PROMPT)
    assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance(mtpconv, mimo, llama_bin, tmp_path, precision, how):
    src, trunk = mimo["rigged"]
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, precision)
    rounds = stats["n_predict"] - stats["n_accept"]  # each round samples one token and keeps the accepted drafts
    print(f"rigged {how} {FX['rigged']} {precision}: n_draft {stats['n_draft']:.0f}, {rounds:.0f} rounds, "
          f"drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_draft"] == 3
    assert stats["n_drafted"] >= 3 * rounds - 3  # every round drafts at every depth (the last may stop short)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
