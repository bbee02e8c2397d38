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
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import NemotronHReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf_graft import assert_trunk_kept, graft, speculative_alone
from test_gguf import PROVENANCE, describe, greedy, llama_bin, run_llama, sidecar, speculative  # noqa: F401
from test_gguf_graft import split, verify

FX = {"plain": "nemotron-h-moe-tiny", "rigged": "nemotron-h-moe-tiny-rigged"}
REFERENCE = ROOT / "testdata" / "gguf_reference"


@pytest.fixture(scope="session")
def nemo_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FX.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(FX, [Path(p) for p in res.stdout.split()]))


def trunk_of(key, dst):
    """The reference converter's --no-mtp trunk of the fixture, under the name it gave it."""
    rec = json.loads((REFERENCE / f"{FX[key]}-bundled-bf16.json").read_text())
    dst.mkdir(parents=True, exist_ok=True)
    path = dst / rec["file_name"]
    shutil.copyfile(REFERENCE / f"{FX[key]}-nomtp-bf16.gguf", path)
    return path


@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, nemo_dirs, llama_bin, tmp_path, args):
    flag, value, ftype = args
    bf16 = sidecar(mtpconv, nemo_dirs["plain"], tmp_path / "bf16", "bf16")
    export(mtpconv, nemo_dirs["plain"], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


def test_llama_nextn_logits_equal_reference(mtpconv, nemo_dirs, mtp_logits, tmp_path):
    src = nemo_dirs["plain"]
    trunk = trunk_of("plain", tmp_path / "trunk")
    draft = sidecar(mtpconv, src, tmp_path / "out", "bf16")
    res = subprocess.run([str(mtp_logits), str(trunk), str(draft), *map(str, TOKENS)], capture_output=True, text=True,
                         env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    pos = np.arange(1, len(TOKENS))
    want = NemotronHReference(src, final_norm="layer").nextn_logits(TOKENS[1:], h[:-1], pos)
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
    modelling = NemotronHReference(src).nextn_logits(TOKENS[1:], h[:-1], pos)
    assert np.abs(modelling - want).max() > 1e-2 * np.abs(want).max()


@pytest.mark.parametrize("key", ["plain", "rigged"])
def test_graft_and_split_equal_reference(mtpconv, nemo_dirs, tmp_path, key):
    trunk = trunk_of(key, tmp_path / "trunk")
    bundled = graft(mtpconv, nemo_dirs[key], trunk, tmp_path / "out")
    ref_bundled = json.loads((REFERENCE / f"{FX[key]}-bundled-bf16.json").read_text())
    assert hashlib.sha256(bundled.read_bytes()).hexdigest() == ref_bundled["file_sha256"]
    side = split(mtpconv, bundled, tmp_path / "split")
    ref = json.loads((REFERENCE / f"{FX[key]}-bf16.json").read_text())
    ours = describe(side)
    assert ours["tensors"] == ref["tensors"]
    strip = lambda m: [(k, v) for k, v in m.items() if k not in PROVENANCE]
    assert strip(ours["metadata"]) == strip(ref["metadata"])
    verify(mtpconv, tmp_path / "split")


def drafted(mtpconv, llama_bin, src, trunk, out, how, precision):
    """llama.cpp's greedy drafting with the head at precision: a sidecar next to
    the trunk (-md), or grafted into it (one file, every trunk tensor kept)."""
    if how == "sidecar":
        return speculative(llama_bin, trunk, sidecar(mtpconv, src, out, precision))
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return speculative_alone(llama_bin, bundled)


@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, nemo_dirs, llama_bin, tmp_path, how):
    trunk = trunk_of("plain", tmp_path / "trunk")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, nemo_dirs["plain"], trunk, tmp_path / "out", how, "bf16")
    assert stats["n_drafted"] > 0
    assert len(got) > 20
    assert got == want or (len(got) > 52 and want.startswith(got))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance(mtpconv, nemo_dirs, llama_bin, tmp_path, precision, how):
    trunk = trunk_of("rigged", tmp_path / "trunk")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, nemo_dirs["rigged"], trunk, tmp_path / "out", how, precision)
    print(f"rigged {how} {FX['rigged']} {precision}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
