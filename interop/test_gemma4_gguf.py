"""--target gguf for the Gemma-4 assistant (llama.cpp's gemma4-assistant: a
separate drafter loaded with -md next to a Gemma-4 trunk, --spec-type
draft-mtp, sharing the trunk's KV). Its equality with the reference
converter's file, tensor for tensor and key for key at bf16 and f16, is
checked in Go (convert/targets/gguf/reference_test.go). Here, with the
pinned llama.cpp, next to the converter's Gemma-4 trunks (committed by
interop/reference_gguf.py; the CI venv has no torch to run the converter):

- every quantization of ours is byte for byte what llama-quantize makes of
  our bf16 file;
- on the rigged trunk (its next token is the token itself) our rigged
  assistant's drafts are >= 95 % accepted at bf16, Q8_0 and Q4_K_M, with the
  greedy text equal to the no-draft text; the unrigged assistant drafts and
  is rejected (text unchanged);
- the E2B/E4B centroid assistant (its centroid head dropped, as the
  converter does) drafts next to the plain trunk, text unchanged.
"""
import pytest

from conftest import export
from nextn_gguf import GGUF_TYPES, make_fixtures
from test_gguf import REFERENCE, describe, greedy, run_llama, sidecar, speculative
from test_gguf import llama_bin  # noqa: F401  (session fixture)

NAMES = {"plain": "gemma4-assistant-tiny", "rigged": "gemma4-assistant-tiny-rigged", "centroid": "gemma4-assistant-centroid-tiny"}


@pytest.fixture(scope="module")
def srcs():
    return make_fixtures(NAMES)


def trunk(name):
    """The reference converter's bf16 file of a Gemma-4 trunk fixture."""
    return REFERENCE / f"{name}-bf16.gguf"


@pytest.mark.parametrize("flag,value,ftype", GGUF_TYPES)
def test_quantized_equals_llama_quantize(mtpconv, srcs, llama_bin, tmp_path, flag, value, ftype):  # noqa: F811
    export(mtpconv, srcs["plain"], tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", sidecar(mtpconv, srcs["plain"], tmp_path / "bf16", "bf16"), ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    assert describe(ours) == describe(ref)
    assert ours.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
def test_rigged_acceptance(mtpconv, srcs, llama_bin, tmp_path, precision):  # noqa: F811
    t = trunk("gemma4-trunk-tiny-rigged")
    want = greedy(llama_bin, t, 64)
    got, stats = speculative(llama_bin, t, sidecar(mtpconv, srcs["rigged"], tmp_path / "out", precision))
    print(f"rigged {NAMES['rigged']} {precision}: n_draft {stats['n_draft']:.0f}, predicted {stats['n_predict']:.0f}, "
          f"drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95


@pytest.mark.parametrize("key,trunk_name", [("plain", "gemma4-trunk-tiny-rigged"), ("centroid", "gemma4-trunk-tiny")])
def test_unrigged_drafts_and_is_rejected(mtpconv, srcs, llama_bin, tmp_path, key, trunk_name):  # noqa: F811
    t = trunk(trunk_name)
    want = greedy(llama_bin, t, 64)
    got, stats = speculative(llama_bin, t, sidecar(mtpconv, srcs[key], tmp_path / "out", "bf16"))
    print(f"{NAMES[key]} on {trunk_name}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] < 0.2
