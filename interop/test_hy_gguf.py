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
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import HY3Reference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_deepseek_gguf import drafted, trunk_of
from test_gguf import describe, ggtrunk, greedy, llama_bin, run_llama, sidecar  # noqa: F401

HY = {"plain": "hy3-tiny", "rigged": "hy3-tiny-rigged"}
DEPTH = 3


@pytest.fixture(scope="session")
def hy_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *HY.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(HY, [Path(p) for p in res.stdout.split()]))


@pytest.fixture(scope="module")
def hy_bf16(mtpconv, hy_dirs, tmp_path_factory):
    """Our bf16 sidecar of the plain fixture, shared by the quantization tests."""
    return sidecar(mtpconv, hy_dirs["plain"], tmp_path_factory.mktemp("hy-bf16") / "out", "bf16")


@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, hy_dirs, hy_bf16, llama_bin, tmp_path, args):
    flag, value, ftype = args
    export(mtpconv, hy_dirs["plain"], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", hy_bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


def test_llama_logits_every_depth_equal_reference(mtpconv, hy_dirs, hy_bf16, ggtrunk, mtp_logits, tmp_path):
    src = hy_dirs["plain"]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    res = subprocess.run([str(mtp_logits), str(trunk), str(hy_bf16), "--depth", str(DEPTH), *map(str, TOKENS)],
                         capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    ref = HY3Reference(src)
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


@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, hy_dirs, llama_bin, ggtrunk, tmp_path, how):
    src = hy_dirs["plain"]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, "bf16")
    assert stats["n_draft"] == DEPTH
    assert stats["n_drafted"] > 0
    assert len(got) > 20
    assert got == want or (len(got) > 52 and want.startswith(got))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance_every_depth(mtpconv, hy_dirs, llama_bin, ggtrunk, tmp_path, precision, how):
    src = hy_dirs["rigged"]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf")
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", how, precision)
    print(f"rigged {how} {HY['rigged']} {precision}: n_draft {stats['n_draft']:.0f}, predicted {stats['n_predict']:.0f}, "
          f"drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_draft"] == DEPTH
    assert stats["n_drafted"] >= 0.7 * stats["n_predict"]  # every depth drafts: one head would draft half the tokens
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
