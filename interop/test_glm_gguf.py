"""--target gguf for the GLM-4.x families (llama.cpp's glm4moe for GLM-4.5/4.6/4.7,
deepseek2 for GLM-4.7-Flash) against llama.cpp itself and gguf-py:

- our bf16/f16 sidecars hold exactly the tensors and metadata of the reference
  converter's `convert_hf_to_gguf.py --mtp` (recorded by interop/reference_gguf.py);
- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's NextN logits for our sidecar (interop/mtp_logits.cpp) agree with the
  numpy reference (interop/reference_nextn.py) fed llama.cpp's own h_nextn;
- llama.cpp drafts with our sidecar (--spec-type draft-mtp): greedy text equal to
  the no-draft text; on the rigged twins it accepts >= 95% of the drafts at bf16,
  Q8_0 and Q4_K_M;
- llama.cpp drafts alike with the head grafted into the trunk (--graft, one file,
  no -md), every trunk tensor kept. No reference --no-mtp trunk is recorded for
  these families, so the graft is not compared with a reference bundled file.
"""
import json
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest

from conftest import ROOT, export
from reference_nextn import GLMReference
from test_glm import glm_dirs  # noqa: F401  (session fixtures)
from test_gguf_graft import assert_trunk_kept, graft, speculative_alone
from test_gguf import PROVENANCE, REFERENCE, describe, ggtrunk, greedy, llama_bin, run_llama, sidecar, speculative  # noqa: F401

PLAIN = {"glm": "glm4.5-moe-tiny", "flash": "glm4.7-flash-tiny"}
TOKENS = [3, 17, 200, 33, 4, 99, 250, 11]


@pytest.fixture(scope="session")
def mtp_logits(llama_bin, tmp_path_factory):
    """interop/mtp_logits.cpp built against the pinned libllama."""
    d = tmp_path_factory.mktemp("mtp_logits")
    src = next(llama_bin.parent.glob("src/llama_cpp_python-*/vendor/llama.cpp"))
    subprocess.run(["c++", "-O1", "-std=c++17", "-o", str(d / "mtp_logits"), str(ROOT / "interop" / "mtp_logits.cpp"),
                    f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}", f"-I{src / 'src'}", f"-L{llama_bin}",
                    "-lllama", "-lggml-base", "-lggml", f"-Wl,-rpath,{llama_bin}"], check=True)
    return d / "mtp_logits"


# llama.cpp routes GLM-4.7-Flash (deepseek2) by sigmoid only at its real size
# (47/48 layers and 154,880 tokens, src/models/deepseek2.cpp), by softmax
# otherwise: the tiny twin is told what the real model implies.
SIGMOID = {"flash": "deepseek2.expert_gating_func=2", "flash-rigged": "deepseek2.expert_gating_func=2"}


def trunk_of(ggtrunk, src, dst, key):
    """internal/ggtrunk's trunk GGUF of src; for GLM-4.7-Flash with the key SIGMOID names."""
    subprocess.run([str(ggtrunk), str(src), str(dst)], check=True)
    if key not in SIGMOID:
        return dst
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata
    name, value = SIGMOID[key].split("=")
    out = dst.with_name("sigmoid-" + dst.name)
    reader = gguf.GGUFReader(str(dst))
    writer = gguf.GGUFWriter(str(out), arch=reader.get_field("general.architecture").contents())
    copy_with_new_metadata(reader, writer, {name: MetadataDetails(gguf.GGUFValueType.UINT32, int(value))}, [])
    return out


def overrides(key):
    return ("--override-kv", SIGMOID[key].replace("=", "=int:")) if key in SIGMOID else ()


@pytest.mark.parametrize("key", list(PLAIN))
@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_sidecar_equals_reference(mtpconv, glm_dirs, tmp_path, key, precision):
    name = PLAIN[key]
    ref = json.loads((REFERENCE / f"{name}-{precision}.json").read_text())
    ours = describe(sidecar(mtpconv, glm_dirs[key], tmp_path / "out", precision))
    assert {t["name"]: t for t in ours["tensors"]} == {t["name"]: t for t in ref["tensors"]}
    strip = lambda m: {k: v for k, v in m.items() if k not in PROVENANCE}
    assert strip(ours["metadata"]) == strip(ref["metadata"])


@pytest.mark.parametrize("key", list(PLAIN))
@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, glm_dirs, llama_bin, tmp_path, key, args):
    flag, value, ftype = args
    bf16 = sidecar(mtpconv, glm_dirs[key], tmp_path / "bf16", "bf16")
    export(mtpconv, glm_dirs[key], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("key", list(PLAIN))
def test_llama_nextn_logits_equal_reference(mtpconv, glm_dirs, ggtrunk, mtp_logits, tmp_path, key):
    src = glm_dirs[key]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf", key)
    draft = sidecar(mtpconv, src, tmp_path / "out", "bf16")
    over = ["--override", SIGMOID[key]] if key in SIGMOID else []
    res = subprocess.run([str(mtp_logits), str(trunk), str(draft), *over, *map(str, TOKENS)], capture_output=True, text=True,
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


def drafted(mtpconv, llama_bin, src, trunk, out, key, how, precision):
    """llama.cpp's greedy drafting with the head at precision: a sidecar next to
    the trunk (-md), or grafted into it (one file, every trunk tensor kept)."""
    if how == "sidecar":
        return speculative(llama_bin, trunk, sidecar(mtpconv, src, out, precision), extra=overrides(key))
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return speculative_alone(llama_bin, bundled, extra=overrides(key))


@pytest.mark.parametrize("key", list(PLAIN))
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_llama_drafts(mtpconv, glm_dirs, llama_bin, ggtrunk, tmp_path, key, how):
    src = glm_dirs[key]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf", key)
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", key, how, "bf16")
    assert stats["n_drafted"] > 0
    assert len(got) > 20
    assert got == want or (len(got) > 52 and want.startswith(got))


@pytest.mark.parametrize("key", ["glm-rigged", "flash-rigged"])
@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("how", ["sidecar", "graft"])
def test_rigged_acceptance(mtpconv, glm_dirs, llama_bin, ggtrunk, tmp_path, key, precision, how):
    src = glm_dirs[key]
    trunk = trunk_of(ggtrunk, src, tmp_path / "trunk.gguf", key)
    want = greedy(llama_bin, trunk, 64)
    got, stats = drafted(mtpconv, llama_bin, src, trunk, tmp_path / "out", key, how, precision)
    print(f"rigged {how} {key} {precision}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95
