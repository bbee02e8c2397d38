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
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import GLMReference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf_graft import assert_trunk_kept, graft, speculative_alone
from test_gguf import describe, ggtrunk, greedy, llama_bin, run_llama, sidecar, speculative  # noqa: F401

DS = {"v3": "deepseek-v3-tiny", "v3-rigged": "deepseek-v3-tiny-rigged",
      "v32": "deepseek-v3.2-tiny", "v32-rigged": "deepseek-v3.2-tiny-rigged"}
FAMILIES = ["v3", "v32"]


@pytest.fixture(scope="session")
def ds_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *DS.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(DS, [Path(p) for p in res.stdout.split()]))


def trunk_of(ggtrunk, src, dst):
    """internal/ggtrunk's trunk GGUF of src (the --no-mtp layout)."""
    subprocess.run([str(ggtrunk), str(src), str(dst)], check=True)
    return dst


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, ds_dirs, llama_bin, tmp_path, fam, args):
    flag, value, ftype = args
    bf16 = sidecar(mtpconv, ds_dirs[fam], tmp_path / "bf16", "bf16")
    export(mtpconv, ds_dirs[fam], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("fam", FAMILIES)
def test_llama_nextn_logits_equal_reference(mtpconv, ds_dirs, ggtrunk, mtp_logits, tmp_path, fam):
    src = ds_dirs[fam]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    draft = sidecar(mtpconv, src, tmp_path / "out", "bf16")
    res = subprocess.run([str(mtp_logits), str(trunk), str(draft), *map(str, TOKENS)], capture_output=True, text=True,
                         env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    ref = GLMReference(src)
    pos = np.arange(len(TOKENS))
    want_h, want_trunk = ref.trunk(TOKENS, pos)
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    want = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()


def drafted(mtpconv, llama_bin, src, trunk, out, how, precision):
    """llama.cpp's greedy drafting with the head at precision: a sidecar next to
    the trunk (-md), or grafted into it (one file, every trunk tensor kept)."""
    if how == "sidecar":
        return speculative(llama_bin, trunk, sidecar(mtpconv, src, out, precision))
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return speculative_alone(llama_bin, bundled)


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, ds_dirs, llama_bin, ggtrunk, tmp_path, fam, how):
    src = ds_dirs[fam]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, "bf16")
    assert stats["n_drafted"] > 0
    assert len(got) > 20
    assert got == want or (len(got) > 52 and want.startswith(got))


@pytest.mark.parametrize("fam", FAMILIES)
@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance(mtpconv, ds_dirs, llama_bin, ggtrunk, tmp_path, fam, precision, how):
    src = ds_dirs[fam + "-rigged"]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, precision)
    print(f"rigged {how} {DS[fam]} {precision}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
