"""--target mlx: the MTP head as an mlx-vlm qwen3_5_mtp drafter. Checked with
the real mlx-vlm (its splitter and its drafter) and real MLX quantization."""
import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_vlm.speculative.drafters import load_drafter
from mlx_vlm.speculative.drafters.qwen3_5_mtp import ModelConfig
from mlx_vlm.speculative.drafters.qwen3_5_mtp.split import Qwen3_5MTPSplitter, Qwen3NextMTPSplitter

from conftest import export
from reference import MTPReference, load_raw

SPLITTERS = {"a": Qwen3_5MTPSplitter, "b": Qwen3_5MTPSplitter, "c": Qwen3NextMTPSplitter}


def bits_of(arr):
    return np.array(arr.view(mx.uint16) if arr.dtype in (mx.bfloat16, mx.float16) else arr)


@pytest.mark.parametrize("key", ["a", "b", "c"])
def test_bf16_matches_mlx_vlm_splitter(key, mtpconv, fixture_dirs, tmp_path):
    ours = export(mtpconv, fixture_dirs[key], tmp_path / "ours", "--target", "mlx", "--head-precision", "bf16")
    theirs = SPLITTERS[key]().split(str(fixture_dirs[key]), str(tmp_path / "theirs"))
    a = mx.load(str(ours / "model.safetensors"))
    b = mx.load(str(theirs / "model.safetensors"))
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype, k
        assert np.array_equal(bits_of(a[k]), bits_of(b[k])), k
    # The drafter reads both configs the same way.
    ca = ModelConfig.from_dict(json.loads((ours / "config.json").read_text()))
    cb = ModelConfig.from_dict(json.loads((theirs / "config.json").read_text()))
    assert ca.block_size == cb.block_size and ca.tie_word_embeddings == cb.tie_word_embeddings
    ta, tb = vars(ca.text_config), vars(cb.text_config)
    # Deliberate difference: when config.json does not declare the MTP depth
    # (Qwen3-Next), we write the depth counted from the mtp.layers.* tensors;
    # mlx-vlm's drafter would assume 1.
    if "mtp_num_hidden_layers" not in tb:
        assert ta.pop("mtp_num_hidden_layers") == 1
    assert ta == tb


class Target(nn.Module):
    """The parts of a target model a drafter binds to: the trunk's embedding and lm_head."""

    def __init__(self, folder):
        super().__init__()
        prefix = "model.language_model." if (folder / "config.json").read_text().find("text_config") >= 0 else "model."
        raw = load_raw(folder, prefix + "embed_tokens")
        raw.update(load_raw(folder, "lm_head"))
        emb = raw[prefix + "embed_tokens.weight"]
        self.embed_tokens = nn.Embedding(*emb.shape)
        self.embed_tokens.weight = mx.array(emb.astype(np.float32))
        self.lm_head = nn.Linear(emb.shape[1], raw["lm_head.weight"].shape[0], bias=False)
        self.lm_head.weight = mx.array(raw["lm_head.weight"].astype(np.float32))
        self.emb = emb


def drive(drafter, target, tokens, hidden):
    """Three stateful calls: a prefill of several tokens, then two single-token steps."""
    drafter.reset(target)
    outs = [drafter._forward_tokens(mx.array([tokens[:5]]), mx.array(hidden[None].astype(np.float32)), mx.int32)]
    for t in tokens[5:7]:
        outs.append(drafter._forward_tokens(mx.array([[t]]), outs[-1][:, -1:, :], mx.int32))
    return [np.array(o[0].astype(mx.float32)).astype(np.float64) for o in outs]


def drive_reference(ref, target, tokens, hidden):
    outs = [ref.step(target.emb[tokens[:5]], hidden, np.arange(5))]
    for i, t in enumerate(tokens[5:7]):
        outs.append(ref.step(target.emb[[t]], outs[-1][-1:], np.array([5 + i])))
    return outs


def dequantize(w, scales, biases, bits, group):
    """MLX affine dequantization, from the format description: each row is a
    little-endian bit stream of codes; value = scale * code + bias."""
    w = np.array(w).view(np.uint8)
    rows = w.reshape(-1, w.shape[-1])
    n = rows.shape[1] * 8 // bits
    bitpos = np.arange(n) * bits
    lo = rows[:, bitpos // 8].astype(np.uint32)
    hi = rows[:, np.minimum(bitpos // 8 + 1, rows.shape[1] - 1)].astype(np.uint32)
    codes = ((lo | (hi << 8)) >> (bitpos % 8)) & ((1 << bits) - 1)
    s = np.array(scales.astype(mx.float32)).reshape(-1, n // group).repeat(group, axis=1)
    b = np.array(biases.astype(mx.float32)).reshape(-1, n // group).repeat(group, axis=1)
    return (codes * s + b).reshape(*scales.shape[:-1], n)


def drafter_weights(folder):
    """A drafter folder's tensors under their own names in float64, each
    quantized matrix dequantized with the format's formula (dequantize; its
    config.json's quantization block, per module where it names one)."""
    tensors = mx.load(str(folder / "model.safetensors"))
    quant = json.loads((folder / "config.json").read_text()).get("quantization", {})
    out = {}
    for k, v in tensors.items():
        if k.endswith((".scales", ".biases")):
            continue
        base = k[: -len(".weight")]
        if k.endswith(".weight") and base + ".scales" in tensors:
            q = quant.get(base, quant)
            v = dequantize(v, tensors[base + ".scales"], tensors[base + ".biases"], q["bits"], q["group_size"])
        else:
            v = np.array(v.astype(mx.float32))
        out[k] = np.asarray(v, dtype=np.float64)
    return out


def effective_weights(folder):
    """Reference weights in the checkpoint's names (mtp.*), linear layers dequantized."""
    out = {"mtp." + k: v for k, v in drafter_weights(folder).items()}
    # Norms in the file already carry the +1; the reference adds it itself.
    for k in list(out):
        if k.endswith(("norm.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")):
            out[k] = out[k] - 1.0
    return out


@pytest.mark.parametrize("key", ["a", "b"])
@pytest.mark.parametrize("precision", ["bf16", "f16", "int8", "int4"])
def test_drafter_forward_matches_reference(key, precision, mtpconv, fixture_dirs, tmp_path):
    src = fixture_dirs[key]
    out = export(mtpconv, src, tmp_path / precision, "--target", "mlx", "--head-precision", precision)
    drafter, kind = load_drafter(str(out))
    assert kind == "mtp" and type(drafter).__name__ == "Qwen3_5MTPDraftModel"
    drafter.set_dtype(mx.float32)  # MLX's CPU gather kernels run in float32
    target = Target(src)
    rng = np.random.default_rng(7)
    tokens = [int(t) for t in rng.integers(0, target.emb.shape[0], 7)]
    hidden = rng.standard_normal((5, target.emb.shape[1]))
    got = drive(drafter, target, tokens, hidden)
    # 1. The drafter computes what our file says: a reference built from the
    #    file's own weights (dequantized with the format's formula) agrees tightly.
    want = drive_reference(MTPReference(src, weights=effective_weights(out)), target, tokens, hidden)
    for step, (g, w) in enumerate(zip(got, want)):
        rel = np.abs(g - w).max() / np.abs(w).max()
        print(f"{key} {precision} call {step}: vs file weights {rel:.2e} (bound 1e-4)")
        assert rel < 1e-4, (step, rel)
    # 2. What the file says is the source's MTP head: against the reference
    #    from the raw bf16 tensors, within what the precision allows (bf16/f16:
    #    the rounding of 1+w in five norms; int8/int4: quantization error).
    raw = drive_reference(MTPReference(src), target, tokens, hidden)
    rel = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, raw))
    bound = {"bf16": 1e-2, "f16": 1e-2, "int8": 5e-2, "int4": 0.5}[precision]
    print(f"{key} {precision}: vs raw source {rel:.2e} (bound {bound})")
    assert rel < bound
