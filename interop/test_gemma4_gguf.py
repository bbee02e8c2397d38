"""The Gemma-4 assistant in llama.cpp 0.3.36 (gemma4-assistant, -md next to a
Gemma-4 trunk, --spec-type draft-mtp), on the reference converter's files of
our fixtures (committed by interop/reference_gguf.py: mtpconv does not write
the gemma4-assistant GGUF yet, and the CI venv has no torch to run the
converter). What this proves, for the writer that comes next:

- the fixtures are a pair llama.cpp drafts with: the assistant shares the
  trunk's KV (its last sliding and full layers) and reads its embedding;
- the rig works: on the rigged trunk (its next token is the token itself)
  the rigged assistant's drafts are >= 95 % accepted and the greedy text is
  the no-draft text; the unrigged assistant drafts and is rejected.
"""
import pytest

from test_gguf import REFERENCE, greedy, speculative
from test_gguf import llama_bin  # noqa: F401  (session fixture)

TRUNK = {"rigged": "gemma4-trunk-tiny-rigged", "plain": "gemma4-trunk-tiny"}
ASSISTANT = {"rigged": "gemma4-assistant-tiny-rigged", "plain": "gemma4-assistant-tiny"}


def converted(name):
    return REFERENCE / f"{name}-bf16.gguf"


@pytest.mark.parametrize("assistant", ["rigged", "plain"])
def test_llama_drafts_with_the_assistant(llama_bin, assistant):  # noqa: F811
    trunk = converted(TRUNK["rigged"])
    want = greedy(llama_bin, trunk, 64)
    got, stats = speculative(llama_bin, trunk, converted(ASSISTANT[assistant]))
    print(f"{ASSISTANT[assistant]} on {TRUNK['rigged']}: n_draft {stats['n_draft']:.0f}, predicted {stats['n_predict']:.0f}, "
          f"drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > 52 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    if assistant == "rigged":
        assert stats["n_accept"] / stats["n_drafted"] >= 0.95
    else:
        assert stats["n_accept"] / stats["n_drafted"] < 0.2


def test_llama_drafts_next_to_the_plain_trunk(llama_bin):  # noqa: F811
    trunk = converted(TRUNK["plain"])
    want = greedy(llama_bin, trunk, 64)
    got, stats = speculative(llama_bin, trunk, converted(ASSISTANT["plain"]))
    assert stats["n_drafted"] > 0
    assert len(got) > 52 and want.startswith(got)
