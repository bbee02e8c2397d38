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
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import LingReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_deepseek_gguf import drafted
from test_gguf import describe, greedy, llama_bin, run_llama, sidecar  # noqa: F401

LING = {"plain": "ling3-tiny", "rigged": "ling3-tiny-rigged"}
REF = ROOT / "testdata" / "gguf_reference"


@pytest.fixture(scope="session")
def ling_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *LING.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(LING, [Path(p) for p in res.stdout.split()]))


def trunk(kind, tmp_path):
    """The reference converter's --no-mtp trunk of the fixture, copied (a graft writes next to it)."""
    dst = tmp_path / "trunk" / "Ling3-Tiny-BF16.gguf"
    dst.parent.mkdir()
    shutil.copyfile(REF / f"{LING[kind]}-nomtp-bf16.gguf", dst)
    return dst


@pytest.fixture(scope="module")
def ling_bf16(mtpconv, ling_dirs, tmp_path_factory):
    """Our bf16 sidecar of the plain fixture, shared by the quantization tests."""
    return sidecar(mtpconv, ling_dirs["plain"], tmp_path_factory.mktemp("ling-bf16") / "out", "bf16")


@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, ling_dirs, ling_bf16, llama_bin, tmp_path, args):
    flag, value, ftype = args
    export(mtpconv, ling_dirs["plain"], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", ling_bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


def test_llama_nextn_logits_equal_reference(ling_dirs, ling_bf16, mtp_logits, tmp_path):
    res = subprocess.run([str(mtp_logits), str(trunk("plain", tmp_path)), str(ling_bf16), *map(str, TOKENS)], capture_output=True,
                         text=True, env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    want = LingReference(ling_dirs["plain"]).nextn_logits(TOKENS[1:], h[:-1], np.arange(1, len(TOKENS)))
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()


@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, ling_dirs, llama_bin, tmp_path, how):
    t = trunk("plain", tmp_path)
    want = greedy(llama_bin, t, 64)
    got, stats = drafted(mtpconv, llama_bin, ling_dirs["plain"], t, tmp_path / "out", how, "bf16")
    assert stats["n_drafted"] > 0
    assert len(got) > 20
    assert got == want or (len(got) > 52 and want.startswith(got))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance(mtpconv, ling_dirs, llama_bin, tmp_path, precision, how):
    t = trunk("rigged", tmp_path)
    want = greedy(llama_bin, t, 64)
    got, stats = drafted(mtpconv, llama_bin, ling_dirs["rigged"], t, tmp_path / "out", how, precision)
    print(f"rigged {how} {LING['rigged']} {precision}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
