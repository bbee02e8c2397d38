"""The Gemma-4 assistant (gemma4_assistant) with mlx-vlm 0.7.10, the pinned
consumer that loads the assistant folder itself:

- mlx-vlm's drafter (load_drafter, strict) loads our plain and centroid
  fixtures, and its draft step's logits and next hidden state agree with the
  numpy reference (interop/reference_gemma4.py), for the tied head and the
  E2B/E4B centroid head alike: the fixtures are the real layout and the
  reference is the assistant's math;
- mlx-vlm also loads the quantized folder its own mlx_vlm.convert -q writes
  from the assistant folder, which is why mtpconv's --target mlx refuses the
  family pointing there (and every other target refuses in one sentence).
"""
import subprocess
import sys

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_vlm.speculative.drafters import load_drafter

from nextn_gguf import make_fixtures
from reference_gemma4 import Gemma4AssistantReference

NAMES = {"plain": "gemma4-assistant-tiny", "centroid": "gemma4-assistant-centroid-tiny"}
S = 8  # shared KV length: below the fixtures' sliding window (16), every key visible


@pytest.fixture(scope="module")
def srcs():
    return make_fixtures(NAMES)


class _Target:
    """The smallest target bind() accepts: an embedding the drafter scales and reads."""

    def __init__(self, vocab, width):
        self.embed_tokens = nn.Embedding(vocab, width)
        self.embed_scale = width ** 0.5


def draft_step(model, x, kv):
    """mlx-vlm's draft forward at position S: (logits, next hidden) as float64."""
    states = {k: (mx.array(a[None].astype(np.float32)), mx.array(b[None].astype(np.float32))) for k, (a, b) in kv.items()}
    model.set_shared_kv(states, kv_offset=S)
    hidden, logits = model(mx.array(x[None, None].astype(np.float32)), states, mx.array([[S]]))
    return np.array(logits.astype(mx.float32))[0, 0].astype(np.float64), np.array(hidden.astype(mx.float32))[0, 0].astype(np.float64)


@pytest.mark.parametrize("key", ["plain", "centroid"])
def test_mlx_vlm_draft_step_equals_reference(srcs, key):
    model, kind = load_drafter(str(srcs[key]))
    assert kind == "mtp"
    model.set_dtype(mx.float32)
    ref = Gemma4AssistantReference(srcs[key])
    cfg, text = ref.cfg, ref.text
    model.bind(_Target(text["vocab_size"], cfg["backbone_hidden_size"]))
    rng = np.random.default_rng(7)
    kv = {t: (rng.standard_normal((text["num_key_value_heads"], S, ref.head_dim(t))),
              rng.standard_normal((text["num_key_value_heads"], S, ref.head_dim(t)))) for t in ("sliding_attention", "full_attention")}
    x = rng.standard_normal(2 * cfg["backbone_hidden_size"])
    logits, hidden = draft_step(model, x, kv)
    want_logits, want_hidden = ref.step(x, S, kv)
    np.testing.assert_allclose(hidden, want_hidden, rtol=0, atol=1e-4 * np.abs(want_hidden).max())
    np.testing.assert_allclose(logits, want_logits, rtol=0, atol=1e-4 * np.abs(want_logits).max())
    assert logits.argmax() == want_logits.argmax()
    if key == "centroid":  # only the top clusters' tokens are scored
        kept = int((want_logits > want_logits.min()).sum())
        assert kept == cfg["centroid_intermediate_top_k"] * text["vocab_size"] // cfg["num_centroids"]


def test_mlx_vlm_loads_its_own_quantized_assistant(srcs, mtpconv, tmp_path):
    q = tmp_path / "q4"  # (mlx_vlm.convert needs a processor: the fixture carries its tokenizer)
    subprocess.run([sys.executable, "-m", "mlx_vlm", "convert", "--hf-path", str(srcs["centroid"]), "--mlx-path", str(q),
                    "-q", "--q-bits", "4", "--q-group-size", "32"], check=True, capture_output=True)
    model, kind = load_drafter(str(q))
    assert kind == "mtp"
    assert type(model.pre_projection).__name__ == "QuantizedLinear"
    assert type(model.model.layers[3].self_attn.q_proj).__name__ == "QuantizedLinear"
    # mtpconv writes none of it: --target mlx says where to point mlx-vlm instead.
    res = subprocess.run([str(mtpconv), "export", "--src", str(srcs["centroid"]), "--out", str(tmp_path / "ours"), "--target", "mlx"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "mlx_vlm.convert --hf-path <assistant> -q" in res.stderr
    assert not (tmp_path / "ours").exists()
