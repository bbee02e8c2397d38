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

import gguf
import numpy as np
import pytest

import nextn_gguf
from conftest import ROOT
from nextn_gguf import every_type, run_mtp_logits
from reference_nextn import GLMReference
from test_glm import glm_dirs  # noqa: F401  (session fixtures)
from test_gguf import PROVENANCE, REFERENCE, describe, ggtrunk, llama_bin, sidecar  # noqa: F401

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


@pytest.fixture(scope="module")
def family(mtpconv, glm_dirs, ggtrunk, tmp_path_factory):
    return nextn_gguf.Family(mtpconv, glm_dirs, tmp_path_factory.mktemp("glm"),
                             lambda key, src, d: trunk_of(ggtrunk, src, d / "trunk.gguf", key))


test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    {k: k for k in ["glm-rigged", "flash-rigged"]}, quantized=[case for key in PLAIN for case in every_type(key)],
    drafts=list(PLAIN), rigged=["glm-rigged", "flash-rigged"], flags=overrides)


@pytest.mark.parametrize("key", list(PLAIN))
def test_llama_nextn_logits_equal_reference(family, mtp_logits, key):
    src = family.src(key)
    over = ["--override", SIGMOID[key]] if key in SIGMOID else []
    got = run_mtp_logits(mtp_logits, family.trunk(key), family.bf16(key), TOKENS, extra=over)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    ref = GLMReference(src)
    pos = np.arange(len(TOKENS))
    want_h, want_trunk = ref.trunk(TOKENS, pos)
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    want = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
