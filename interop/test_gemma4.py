"""The Gemma-4 assistant (gemma4_assistant) with mlx-vlm 0.7.10, the pinned
consumer that loads the assistant folder itself and what mlx_vlm.convert
writes from it:

- mlx-vlm's drafter (load_drafter, strict) loads our plain and centroid
  fixtures, and its draft step's logits and next hidden state agree with the
  numpy reference (interop/reference_gemma4.py), for the tied head and the
  E2B/E4B centroid head alike: the fixtures are the real layout and the
  reference is the assistant's math;
- our --target mlx folder is what `mlx_vlm.convert --hf-path <assistant>`
  writes: every tensor byte for byte (token_ordering int32), config.json and
  model.safetensors.index.json byte for byte, the tokenizer encoding alike,
  at bf16, f16 and every quantization mlx_vlm.convert offers (-q with q_bits
  1..8 and group sizes 32/64/128, q_mode mxfp4/nvfp4/mxfp8), quantized
  also from a config that declares float16 or float32 (the scales and
  float tensors in that dtype, as mlx_vlm.convert casts before quantizing);
- mlx-vlm's own MTP loop (generate_step, draft_kind "mtp") drafts with our
  folder next to mlx-vlm's Gemma-4 trunk (its `gemma4` model, which returns
  the hidden state and shared KV the assistant reads): on the rigged
  fixtures nearly every draft is accepted and the greedy text equals the
  no-draft text, at bf16, int8 and int4; the unrigged assistant's drafts are
  rejected.
"""
import json
import shutil
import subprocess
import sys

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_vlm.speculative.drafters import load_drafter
from mlx_vlm.utils import load_model

from conftest import export
from mlx_vlm_loop import assert_rejected, assert_rigged_accepted, greedy, load_drafter as load_ours
from nextn_gguf import make_fixtures
from reference_gemma4 import Gemma4AssistantReference
from test_glm import assert_same_tensors

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


def python_config_copy(src, dst):
    """src copied to dst with config.json as transformers writes it (Python's
    float literals: 1e-06), which mlx_vlm.convert's json.load/json.dump keeps:
    our config.json then compares byte for byte."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return dst


def mlx_vlm_convert(src, dst, *args):
    """mlx_vlm.convert's folder of src (on the CPU, as MLX runs here)."""
    subprocess.run([sys.executable, "-m", "mlx_vlm", "convert", "--hf-path", str(src), "--mlx-path", str(dst), *args],
                   check=True, capture_output=True)
    return dst


# mlx_vlm.convert's precisions (its flags) and ours for the same folder.
CONVERT = [
    ("bf16", [], []),
    ("f16", ["--dtype", "float16"], ["--head-precision", "f16"]),
    *[(f"{p}-g{g or 'default'}", ["-q", *opts], ["--head-precision", p, *(["--group-size", str(g)] if g else [])])
      for p, g, opts in [
          ("int4", None, ["--q-bits", "4"]), ("int4", 32, ["--q-bits", "4", "--q-group-size", "32"]),
          ("int8", None, ["--q-bits", "8"]), ("int3", 128, ["--q-bits", "3", "--q-group-size", "128"]),
          ("int2", None, ["--q-bits", "2"]), ("int5", None, ["--q-bits", "5"]), ("int6", None, ["--q-bits", "6"]),
          ("int1", None, ["--q-bits", "1"]), ("int1", 32, ["--q-bits", "1", "--q-group-size", "32"]),
          ("int1", 128, ["--q-bits", "1", "--q-group-size", "128"]),
          ("mxfp4", None, ["--q-mode", "mxfp4"]), ("nvfp4", None, ["--q-mode", "nvfp4"]), ("mxfp8", None, ["--q-mode", "mxfp8"])]],
]


@pytest.mark.parametrize("key", ["plain", "centroid"])
@pytest.mark.parametrize("label,theirs,ours", CONVERT, ids=[c[0] for c in CONVERT])
def test_folder_equals_mlx_vlm_convert(srcs, mtpconv, tmp_path, key, label, theirs, ours):
    """Our folder is mlx_vlm.convert's (mx.quantize on the CPU stream:
    --mlx-rounding cpu): the tensors byte for byte, config.json and the index
    byte for byte; the tokenizer (ours the source's files, theirs
    transformers' save_pretrained of them) encodes alike; load_drafter
    takes ours."""
    from transformers import AutoTokenizer
    src = python_config_copy(srcs[key], tmp_path / "src")
    ref = mlx_vlm_convert(src, tmp_path / "ref", *theirs)
    lossy = ["--allow-lossy-head"] if label.startswith("int1") else []  # 1 bit loses pre_projection's halves
    got = export(mtpconv, src, tmp_path / "ours", "--target", "mlx", "--mlx-rounding", "cpu", *ours, *lossy)
    weights = assert_same_tensors(got, ref)
    for f in ("config.json", "model.safetensors.index.json"):
        assert (got / f).read_bytes() == (ref / f).read_bytes(), f
    assert weights["model.layers.3.self_attn.q_norm.weight"].dtype == (mx.float16 if label == "f16" else mx.bfloat16)
    if key == "centroid":
        assert weights["masked_embedding.token_ordering"].dtype == mx.int32
    if "-q" in theirs:  # (at group 128 the 64-wide rows stay float: mlx_vlm.convert's rule too)
        assert "pre_projection.scales" in weights
        assert ("model.embed_tokens.scales" in weights) == ("128" not in theirs)
    text = "The capital of France is Paris <|channel> 1e-06"
    assert AutoTokenizer.from_pretrained(str(got))(text)["input_ids"] == AutoTokenizer.from_pretrained(str(ref))(text)["input_ids"]
    model, kind = load_drafter(str(got))
    assert kind == "mtp" and type(model).__name__ == "Gemma4AssistantDraftModel"
    if "-q" in theirs:  # (mlx-vlm loads a 1-bit matrix as its OneBitLinear)
        assert type(model.pre_projection).__name__ == ("OneBitLinear" if label.startswith("int1") else "QuantizedLinear")


# An assistant whose config declares another dtype: mlx_vlm.convert casts
# the floats to it (torch_dtype, else text_config.dtype) before it
# quantizes, so the scales and unquantized tensors are in it; ours too.
CONFIG_DTYPES = [("text-float16", {}, {"dtype": "float16"}, "int4", ["--q-bits", "4"]),
                 ("torch_dtype-float32", {"torch_dtype": "float32"}, {}, "int8", ["--q-bits", "8"]),
                 ("text-float32", {}, {"dtype": "float32"}, "mxfp8", ["--q-mode", "mxfp8"]),
                 ("text-float16-nvfp4", {}, {"dtype": "float16"}, "nvfp4", ["--q-mode", "nvfp4"])]


@pytest.mark.parametrize("key", ["plain", "centroid"])
@pytest.mark.parametrize("label,top,text,ours,theirs", CONFIG_DTYPES, ids=[c[0] for c in CONFIG_DTYPES])
def test_quantized_folder_in_config_dtype_equals_mlx_vlm_convert(srcs, mtpconv, tmp_path, key, label, top, text, ours, theirs):
    """mlx_vlm.convert -q of an assistant whose config declares float16 or
    float32 writes its scales and float tensors in that dtype; our folder is
    the same, byte for byte."""
    src = python_config_copy(srcs[key], tmp_path / "src")
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(top)
    cfg["text_config"].update(text)
    (src / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = mlx_vlm_convert(src, tmp_path / "ref", "-q", *theirs)
    got = export(mtpconv, src, tmp_path / "ours", "--target", "mlx", "--mlx-rounding", "cpu", "--head-precision", ours)
    weights = assert_same_tensors(got, ref)
    for f in ("config.json", "model.safetensors.index.json"):
        assert (got / f).read_bytes() == (ref / f).read_bytes(), f
    want = mx.float32 if "float32" in label else mx.float16
    assert weights["model.norm.weight"].dtype == want
    model, kind = load_drafter(str(got))
    assert kind == "mtp" and type(model.pre_projection).__name__ == "QuantizedLinear"


def gemma4_trunk(src, dst):
    """The Gemma-4 trunk fixture (Gemma4ForCausalLM, gemma4_text) in the
    release's Gemma4ForConditionalGeneration layout (model_type gemma4,
    model.language_model.*): mlx-vlm's gemma4 model returns the hidden state
    and shared KV its MTP loop gives the assistant (its gemma4_text model
    does not); it drops the vision tower the checkpoint has no weights for."""
    dst.mkdir(parents=True)
    text = json.loads((src / "config.json").read_text())
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
           "vocab_size": text["vocab_size"], "hidden_size": text["hidden_size"], "audio_config": None,
           "tie_word_embeddings": text.get("tie_word_embeddings", True)}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    w = mx.load(str(src / "model.safetensors"))
    mx.save_safetensors(str(dst / "model.safetensors"), {"model.language_model." + k.removeprefix("model."): v for k, v in w.items()})
    model = load_model(dst, strict=True)
    assert type(model).__module__.endswith("gemma4.gemma4") and model.vision_tower is None
    model.set_dtype(mx.float32)
    return model


@pytest.fixture(scope="module")
def loop_srcs():
    return make_fixtures({"rigged": "gemma4-assistant-tiny-rigged", "trunk-rigged": "gemma4-trunk-tiny-rigged",
                          "plain": "gemma4-assistant-tiny", "trunk": "gemma4-trunk-tiny"})


@pytest.mark.parametrize("prec", ["bf16", "int8", "int4", "int1"])
def test_mlx_vlm_drafts_with_rigged_assistant(loop_srcs, mtpconv, tmp_path, prec):
    """mlx-vlm's own MTP loop drafts with our folder next to its Gemma-4 trunk:
    the greedy tokens equal the no-draft ones and nearly every draft is
    accepted (1 bit too, mlx-vlm's OneBitLinear: the rig's matrices survive it)."""
    model = gemma4_trunk(loop_srcs["trunk-rigged"], tmp_path / "trunk")
    one_bit = ["--mlx-rounding", "cpu", "--allow-lossy-head"] if prec == "int1" else []
    drafter = load_ours(export(mtpconv, loop_srcs["rigged"], tmp_path / "ours", "--target", "mlx", "--head-precision", prec, *one_bit))
    assert_rigged_accepted(model, greedy(model), drafter, f"gemma4 assistant rigged {prec}")


def test_mlx_vlm_drafts_with_rigged_assistant_in_float16(loop_srcs, mtpconv, tmp_path):
    """The rigged assistant declared float16 and quantized int4 (f16 scales,
    as mlx_vlm.convert writes it from that config) drafts as the bf16 one."""
    model = gemma4_trunk(loop_srcs["trunk-rigged"], tmp_path / "trunk")
    src = shutil.copytree(loop_srcs["rigged"], tmp_path / "src")
    cfg = json.loads((src / "config.json").read_text())
    cfg["text_config"]["dtype"] = "float16"
    (src / "config.json").write_text(json.dumps(cfg, indent=2))
    got = export(mtpconv, src, tmp_path / "ours", "--target", "mlx", "--head-precision", "int4")
    assert mx.load(str(got / "model.safetensors"))["pre_projection.scales"].dtype == mx.float16
    assert_rigged_accepted(model, greedy(model), load_ours(got), "gemma4 assistant rigged int4, float16 config")


def test_unrigged_assistant_is_rejected(loop_srcs, mtpconv, tmp_path):
    """The rigged acceptance above can fail: next to the plain trunk the plain
    assistant's drafts are rejected, the text unchanged."""
    model = gemma4_trunk(loop_srcs["trunk"], tmp_path / "trunk")
    drafter = load_ours(export(mtpconv, loop_srcs["plain"], tmp_path / "ours", "--target", "mlx"))
    assert_rejected(model, drafter, "gemma4 assistant plain bf16")
