"""The GLM-4.x fixtures and the numpy reference of their NextN heads
(interop/reference_nextn.py), against independent implementations:

- stock mlx-lm loads each raw fixture strictly (its own glm4_moe /
  glm4_moe_lite model and sanitize: the real key set, per-expert weights,
  e_score_correction_bias, the NextN layer dropped) and its trunk logits equal
  the numpy reference's: the reference's attention (GQA with biases, q/k norms,
  partial rotary; MLA with interleaved rotary), routing and norms are the
  models' own;
- on the rigged twins, the reference's NextN layer predicts exactly the
  trunk's next token (the rigging and the head's wiring agree);
- mlx-vlm's own splitter (glm4_moe_lite_mtp) takes the GLM-4.7-Flash
  fixture's NextN layer, and its drafter folder holds exactly the layer's
  tensors in its layout (kv_b_proj absorbed, experts stacked), the drafter
  model mlx-vlm 0.7.10 cannot load yet (no Model class);
- our GLM-4.7-Flash drafter folder equals the splitter's, float and at every
  quantization the splitter offers, tensor for tensor and key for key.
"""
import json

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten
from mlx_lm.utils import load_model

from reference import load_raw
from reference_nextn import GLMReference

GLM = {"glm": "glm4.5-moe-tiny", "glm-rigged": "glm4.5-moe-tiny-rigged",
       "flash": "glm4.7-flash-tiny", "flash-rigged": "glm4.7-flash-tiny-rigged"}
TOKENS = [3, 17, 200, 33, 4, 99, 250, 11]


@pytest.fixture(scope="session")
def glm_dirs():
    import subprocess
    from conftest import ROOT
    from pathlib import Path
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *GLM.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(GLM, [Path(p) for p in res.stdout.split()]))


@pytest.mark.parametrize("key", ["glm", "flash"])
def test_mlx_lm_trunk_equals_reference(glm_dirs, key):
    folder = glm_dirs[key]
    model, config = load_model(folder, strict=True)
    params = dict(tree_flatten(model.parameters()))
    n_layer = config["num_hidden_layers"]
    assert not [k for k in params if f"layers.{n_layer}." in k]  # the NextN layer is not part of mlx-lm's model
    assert len([k for k in params if k.endswith("switch_mlp.gate_proj.weight")]) == n_layer - config["first_k_dense_replace"]
    model.set_dtype(mx.float32)  # MLX's CPU gather-matmul runs in float32 only
    got = np.array(model(mx.array([TOKENS]))[0].astype(mx.float32))
    ref = GLMReference(folder)
    _, want = ref.trunk(TOKENS, np.arange(len(TOKENS)))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-3 * np.abs(want).max())
    assert (got.argmax(-1) == want.argmax(-1)).all()


@pytest.mark.parametrize("key", ["glm-rigged", "flash-rigged"])
def test_rigged_head_predicts_trunk(glm_dirs, key):
    ref = GLMReference(glm_dirs[key])
    pos = np.arange(len(TOKENS))
    h, trunk = ref.trunk(TOKENS, pos)
    mtp = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    # The head at position p+1 (token t_{p+1}, hidden h_p) predicts what the trunk predicts after t_{p+1}.
    assert (mtp.argmax(-1) == trunk[1:].argmax(-1)).all()
    # and with a margin quantization keeps
    top2 = np.sort(mtp, axis=-1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0] > 1.0).all()


def test_unrigged_head_is_not_trivial(glm_dirs):
    """The plain fixture's head does not just copy the trunk (so the rigged test above can fail)."""
    ref = GLMReference(glm_dirs["glm"])
    pos = np.arange(len(TOKENS))
    h, trunk = ref.trunk(TOKENS, pos)
    mtp = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    assert (mtp.argmax(-1) != trunk[1:].argmax(-1)).any()


def test_mlx_vlm_splitter_layout(glm_dirs, tmp_path):
    from mlx_vlm.speculative.drafters.glm4_moe_lite_mtp.split import split_glm4_moe_lite_mtp
    src = glm_dirs["flash"]
    out = split_glm4_moe_lite_mtp(str(src), str(tmp_path / "drafter"))
    cfg = json.loads((out / "config.json").read_text())
    src_cfg = json.loads((src / "config.json").read_text())
    assert cfg["model_type"] == "glm4_moe_lite_mtp" and cfg["block_size"] == 2
    assert cfg["text_config"]["kv_lora_rank"] == src_cfg["kv_lora_rank"]
    got = mx.load(str(out / "model.safetensors"))
    n = src_cfg["num_hidden_layers"]
    raw = load_raw(src, f"model.layers.{n}.")
    p = f"model.layers.{n}."
    heads, nope, v = src_cfg["num_attention_heads"], src_cfg["qk_nope_head_dim"], src_cfg["v_head_dim"]
    kv_b = raw.pop(p + "self_attn.kv_b_proj.weight").reshape(heads, nope + v, -1)
    want = {
        "model.mtp_block.self_attn.embed_q.weight": kv_b[:, :nope, :].transpose(0, 2, 1),
        "model.mtp_block.self_attn.unembed_out.weight": kv_b[:, nope:, :],
    }
    for proj in ("gate_proj", "up_proj", "down_proj"):
        want[f"model.mtp_block.mlp.switch_mlp.{proj}.weight"] = np.stack(
            [raw.pop(f"{p}mlp.experts.{e}.{proj}.weight") for e in range(src_cfg["n_routed_experts"])])
    flat = {"embed_tokens.weight": "model.embed_tokens.weight", "enorm.weight": "model.enorm.weight",
            "hnorm.weight": "model.hnorm.weight", "eh_proj.weight": "model.eh_proj.weight",
            "shared_head.norm.weight": "model.shared_head_norm.weight", "shared_head.head.weight": "lm_head.weight"}
    for k, t in raw.items():
        rest = k[len(p):]
        want[flat.get(rest, "model.mtp_block." + rest)] = t
    assert set(got) == set(want)
    for k, t in want.items():
        g = got[k]
        assert g.dtype == (mx.float32 if k.endswith("e_score_correction_bias") else mx.bfloat16), k
        np.testing.assert_array_equal(np.array(g.astype(mx.float32)), t.astype(np.float32), err_msg=k)
    # mlx-vlm 0.7.10 ships the splitter but not the drafter model for it.
    from mlx_vlm.speculative.drafters import glm4_moe_lite_mtp
    assert not hasattr(glm4_moe_lite_mtp, "Model")


def assert_same_tensors(ours, ref):
    """Two folders' model.safetensors hold the same tensors, byte for byte and
    dtype for dtype; ours, loaded."""
    a, b = mx.load(str(ours / "model.safetensors")), mx.load(str(ref / "model.safetensors"))
    assert set(a) == set(b), set(a) ^ set(b)
    for k in b:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (k, a[k].dtype, b[k].dtype, a[k].shape, b[k].shape)
        assert bytes(memoryview(a[k].view(mx.uint8) if a[k].dtype != mx.float32 else a[k])) == \
            bytes(memoryview(b[k].view(mx.uint8) if b[k].dtype != mx.float32 else b[k])), k
    return a


def assert_same_drafter(ours, ref):
    """Two drafter folders hold the same tensors, byte for byte and dtype for
    dtype, the same config.json (every key and value) and tokenizer files
    (the chat template where either folder has one)."""
    a = assert_same_tensors(ours, ref)
    assert json.loads((ours / "config.json").read_text()) == json.loads((ref / "config.json").read_text())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        assert (ours / f).read_bytes() == (ref / f).read_bytes()
    assert (ours / "chat_template.jinja").exists() == (ref / "chat_template.jinja").exists()
    if (ref / "chat_template.jinja").exists():
        assert (ours / "chat_template.jinja").read_bytes() == (ref / "chat_template.jinja").read_bytes()
    return a


def test_drafter_equals_mlx_vlm_splitter(mtpconv, glm_dirs, tmp_path):
    """Our GLM-4.7-Flash drafter folder (--target mlx, bf16) holds exactly what
    mlx-vlm's own splitter writes: every tensor byte for byte, every config.json
    key; mlx-vlm 0.7.10's load_drafter fails on both for the same reason (its
    glm4_moe_lite_mtp package has no Model yet)."""
    from conftest import export
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.glm4_moe_lite_mtp.split import split_glm4_moe_lite_mtp
    src = glm_dirs["flash"]
    ref = split_glm4_moe_lite_mtp(str(src), str(tmp_path / "ref"))
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    assert_same_drafter(ours, ref)
    for folder in (ours, ref):
        with pytest.raises(AttributeError, match="Model"):
            load_drafter(str(folder))


def test_drafter_config_bytes_equal_splitter(mtpconv, glm_dirs, tmp_path):
    """On a config.json as transformers writes it (sorted, indent 2, floats as
    floats: "attention_dropout": 0.0, "partial_rotary_factor": 1.0), our
    drafter's config.json is the splitter's byte for byte: every value taken
    from the source keeps its literal (a Python consumer reads a float)."""
    import shutil
    from conftest import export
    from mlx_vlm.speculative.drafters.glm4_moe_lite_mtp.split import split_glm4_moe_lite_mtp
    src = tmp_path / "src"
    shutil.copytree(glm_dirs["flash"], src)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(attention_dropout=0.0, partial_rotary_factor=1.0, rope_theta=1000000.0, rms_norm_eps=1e-05)
    (src / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = split_glm4_moe_lite_mtp(str(src), str(tmp_path / "ref"))
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    want = (ref / "config.json").read_bytes()
    assert b'"attention_dropout": 0.0,' in want and b'"partial_rotary_factor": 1.0,' in want
    assert (ours / "config.json").read_bytes() == want


# What mlx-vlm's glm4_moe_lite_mtp splitter offers when asked to quantize
# (split_glm4_moe_lite_mtp's q_bits / q_group_size, mlx_vlm.split_mtp's
# --q-mode): MLX affine at any bits and group mx.quantize takes, and the
# microscaling modes at their own group; ours is the same precision.
QUANTIZED = [
    ("int4", None, dict(q_bits=4, q_group_size=64)),
    ("int4", 32, dict(q_bits=4, q_group_size=32)),
    ("int8", None, dict(q_bits=8, q_group_size=64)),
    ("int3", 128, dict(q_bits=3, q_group_size=128)),
    ("mxfp4", None, dict(q_mode="mxfp4")),
    ("nvfp4", None, dict(q_mode="nvfp4")),
    ("mxfp8", None, dict(q_mode="mxfp8")),
]
# 1 bit, for a drafter mlx-vlm loads at 1 bit (Linear and Embedding modules
# only: no stacked experts or heads; test_mlx_one_bit.py has the others).
QUANTIZED_1BIT = [("int1", None, dict(q_bits=1, q_group_size=64))]


def one_bit(prec):
    """What a 1-bit export needs besides the precision: MLX's CPU kernel (the
    one whose 1-bit rule is reproduced) and --allow-lossy-head."""
    return ["--mlx-rounding", "cpu", "--allow-lossy-head"] if prec == "int1" else []


def lossy(prec):
    """The flag a 1-bit head needs: mtpconv refuses a head whose concat
    projection's halves are lost (int1 loses them), unless told to write it."""
    return ["--allow-lossy-head"] if prec == "int1" else []


@pytest.mark.parametrize("prec,group,opts", QUANTIZED, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, glm_dirs, tmp_path, prec, group, opts):
    """Quantized, our GLM-4.7-Flash drafter folder is what mlx-vlm's splitter
    writes when asked to quantize (mx.quantize on the CPU stream, so
    --mlx-rounding cpu): every tensor byte for byte (routers float, the
    absorbed embed_q quantized along its stored last dimension when the group
    divides it), and config.json key for key, its quantization block
    included; mlx-vlm 0.7.10's load_drafter fails on both for the same reason."""
    from conftest import export
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.glm4_moe_lite_mtp.split import Glm4MoeLiteMTPSplitter
    src = glm_dirs["flash"]
    with mx.stream(mx.cpu):
        ref = Glm4MoeLiteMTPSplitter().split(str(src), str(tmp_path / "ref"), **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu"]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, src, tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    cfg = json.loads((ours / "config.json").read_text())
    q = cfg["quantization"]
    assert list(q) == ["group_size", "bits", "mode"] and cfg["quantization_config"] == q, q
    # The splitter's rule, seen in its output: the router float, embed_q
    # ([heads, kv_lora, nope], nope 32) quantized exactly when the group divides 32.
    assert got["model.mtp_block.mlp.gate.weight"].dtype == mx.bfloat16
    assert ("model.mtp_block.self_attn.embed_q.scales" in got) == (32 % q["group_size"] == 0)
    assert "lm_head.scales" in got and "model.embed_tokens.scales" in got
    for folder in (ours, ref):
        with pytest.raises(AttributeError, match="Model"):
            load_drafter(str(folder))
