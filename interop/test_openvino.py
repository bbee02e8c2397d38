"""--target openvino: the MTP layer and lm_head IRs, checked with the real
OpenVINO runtime (read, compile, stateful numerics against the independent
numpy reference, runtime fusion) and real NNCF (bit-identical compression)."""
import json
import subprocess
import sys
from collections import Counter

import nncf
import numpy as np
import openvino as ov
import pytest
from safetensors.numpy import load_file

from conftest import ROOT, export
from reference import MTPReference, load_raw, text_config

CONFIGS = {
    "f16": ["--head-precision", "f16", "--lm-head-precision", "f16"],
    "int8": ["--head-precision", "int8"],
    "int8-sym": ["--head-precision", "int8", "--sym", "--lm-head-precision", "int8"],
    "int4-g64": ["--head-precision", "int4", "--group-size", "64"],
    "int4-g128": ["--head-precision", "int4", "--group-size", "128", "--lm-head-precision", "int4"],
    "int4-sym-g64": ["--head-precision", "int4", "--sym", "--group-size", "64"],
    "int4-sym-g128": ["--head-precision", "int4", "--sym", "--group-size", "128"],
}
# Numerics: f32 inference, f32 KV cache, no dynamic activation quantization,
# so the comparison measures our weights and graph, not the plugin's shortcuts.
EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
CORE = ov.Core()


def ir(mtpconv, fixture_dirs, tmp_path_factory, key, config):
    out = tmp_path_factory.mktemp(f"ov-{key}-{config}")
    return export(mtpconv, fixture_dirs[key], out / "o", "--target", "openvino", *CONFIGS[config])


@pytest.mark.parametrize("key", ["a", "b", "c"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_reads_and_compiles(key, config, mtpconv, fixture_dirs, tmp_path_factory):
    out = ir(mtpconv, fixture_dirs, tmp_path_factory, key, config)
    layer = CORE.read_model(out / "openvino_mtp_model.xml")
    head = CORE.read_model(out / "openvino_mtp_lm_head.xml")
    assert [i.get_any_name() for i in layer.inputs] == ["inputs_embeds", "hidden_states", "attention_mask", "position_ids", "beam_idx"]
    assert [o.get_any_name() for o in layer.outputs] == ["last_hidden_state"]
    assert [o.get_any_name() for o in head.outputs] == ["logits"]
    # The IR says of its norms what the manifest (and so the card) says: Qwen's shifted to 1+w.
    norms = json.loads((out / "mtpconv-manifest.json").read_text())["model"]["norm_convention"]
    assert layer.get_rt_info("mtpconv_norm_convention").astype(str) == norms
    assert norms.startswith("zero-centred RMSNorm weights stored shifted: 1+w")
    assert layer.get_rt_info("mtp_mode").astype(str) == "true"  # what marks an MTP head for OpenVINO GenAI
    CORE.compile_model(layer, "CPU")
    CORE.compile_model(head, "CPU")


def embedding(folder):
    prefix = "model.language_model." if "text_config" in (folder / "config.json").read_text() else "model."
    raw = load_raw(folder, prefix + "embed_tokens")
    raw.update(load_raw(folder, "lm_head"))
    return raw[prefix + "embed_tokens.weight"], raw["lm_head.weight"]


def run_three_calls(layer, head, emb, tokens, hidden):
    """A prefill of five tokens, then two single-token steps feeding the output back."""
    req = layer.create_infer_request()
    req.reset_state()
    outs, logits = [], []

    def call(toks, hid, start):
        t = start + len(toks)
        r = req.infer({"inputs_embeds": emb[toks][None].astype(np.float32), "hidden_states": hid[None].astype(np.float32),
                       "attention_mask": np.ones((1, t), np.int64), "position_ids": np.arange(start, t, dtype=np.int64)[None],
                       "beam_idx": np.zeros(1, np.int32)})
        h = r["last_hidden_state"]
        outs.append(h[0].astype(np.float64))
        logits.append(head(h)["logits"][0].astype(np.float64))

    call(tokens[:5], hidden, 0)
    for i, t in enumerate(tokens[5:7]):
        call([t], outs[-1][-1:], 5 + i)
    return outs, logits


def reference_calls(ref, emb, lm_head, tokens, hidden):
    outs = [ref.step(emb[tokens[:5]], hidden, np.arange(5))]
    for i, t in enumerate(tokens[5:7]):
        outs.append(ref.step(emb[[t]], outs[-1][-1:], np.array([5 + i])))
    return outs, [o @ lm_head.T for o in outs]


def const_map(model):
    return {op.get_friendly_name(): op for op in model.get_ops() if op.get_type_name() == "Constant"}


def const_array(c):
    """A Const's values; u4/i4 unpacked (element 2k in the low nibble)."""
    et, shape = c.get_element_type(), list(c.get_output_shape(0))
    raw = np.asarray(c.get_data())
    if et in (ov.Type.u4, ov.Type.i4):
        b = raw.view(np.uint8).reshape(-1)
        v = np.empty(b.size * 2, np.int16)
        v[0::2], v[1::2] = b & 0xF, b >> 4
        v = v[: int(np.prod(shape))]
        if et == ov.Type.i4:
            v[v >= 8] -= 16
        return v.reshape(shape)
    return raw.reshape(shape)


def dequantized(model, name, shape):
    """A weight as the IR defines it, from its Consts, by NNCF's formula: (q - zp) * scale."""
    c = const_map(model)
    q = const_array(c[name]).astype(np.float64)
    if name + "/scale" not in c:
        return q.reshape(shape)
    s = const_array(c[name + "/scale"]).astype(np.float64)
    zp = const_array(c[name + "/zero_point"]).astype(np.float64) if name + "/zero_point" in c else 0.0
    return ((q - zp) * s).reshape(shape)


@pytest.mark.parametrize("key", ["a", "b", "c"])
@pytest.mark.parametrize("config", ["f16", "int8", "int8-sym", "int4-g64", "int4-sym-g128"])
def test_numerics_match_reference(key, config, mtpconv, fixture_dirs, tmp_path_factory):
    src = fixture_dirs[key]
    out = ir(mtpconv, fixture_dirs, tmp_path_factory, key, config)
    layer_model = CORE.read_model(out / "openvino_mtp_model.xml")
    head_model = CORE.read_model(out / "openvino_mtp_lm_head.xml")
    layer = CORE.compile_model(layer_model, "CPU", EXACT)
    head = CORE.compile_model(head_model, "CPU", EXACT)
    emb, lm_head = embedding(src)
    rng = np.random.default_rng(11)
    tokens = [int(t) for t in rng.integers(0, emb.shape[0], 7)]
    hidden = rng.standard_normal((5, emb.shape[1]))
    got, got_logits = run_three_calls(layer, head, emb, tokens, hidden)

    # 1. The runtime computes what the IR's weights say: a reference built from
    #    the dequantized Consts agrees tightly.
    raw = load_raw(src, "mtp.")
    cfg = text_config(src)
    weights = {}
    c = const_map(layer_model)
    for name, v in raw.items():
        if name in c:
            weights[name] = dequantized(layer_model, name, v.shape) - (1.0 if v.ndim == 1 else 0.0)
    E, I, H = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["hidden_size"]
    for proj, shape in (("gate_proj", (E, I, H)), ("up_proj", (E, I, H)), ("down_proj", (E, H, I))):
        n = f"mtp.layers.0.mlp.switch_mlp.{proj}.weight"
        weights[n] = dequantized(layer_model, n, shape)
    lm = dequantized(head_model, "lm_head.weight", lm_head.shape)
    want, want_logits = reference_calls(MTPReference(src, weights=weights), emb, lm, tokens, hidden)
    for step, (g, w, gl, wl) in enumerate(zip(got, want, got_logits, want_logits)):
        rel = np.abs(g - w).max() / np.abs(w).max()
        rel_l = np.abs(gl - wl).max() / np.abs(wl).max()
        print(f"{key} {config} call {step}: vs IR weights hidden {rel:.1e} logits {rel_l:.1e} (bound 1e-4)")
        assert rel < 1e-4 and rel_l < 1e-4

    # 2. Against the raw bf16 source: f16 within 1e-2; quantized modes within a
    #    bound derived from the weights' own quantization error (the worst
    #    relative RMS error of any weight, times a propagation factor of 15).
    rel_w = 0.0
    for name, v in raw.items():
        if name in weights and v.ndim >= 2:
            rel_w = max(rel_w, np.sqrt(np.mean((weights[name] - v) ** 2)) / np.sqrt(np.mean(v ** 2)))
    bound = 1e-2 if config == "f16" else 15 * rel_w
    ref_raw, ref_raw_logits = reference_calls(MTPReference(src), emb, lm_head, tokens, hidden)
    rel = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, ref_raw))
    rel_l = max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got_logits, ref_raw_logits))
    print(f"{key} {config}: vs raw source hidden {rel:.2e} logits {rel_l:.2e}; weight error {rel_w:.2e}, derived bound {bound:.2e}")
    assert rel < bound and rel_l < bound


MODES = [("int8", "INT8_ASYM", None), ("int8-sym", "INT8_SYM", None), ("int4-g64", "INT4_ASYM", 64),
         ("int4-g128", "INT4_ASYM", 128), ("int4-sym-g64", "INT4_SYM", 64), ("int4-sym-g128", "INT4_SYM", 128)]


@pytest.mark.parametrize("config,mode,group", MODES)
def test_nncf_compression_is_identical(config, mode, group, mtpconv, fixture_dirs, tmp_path_factory):
    """nncf.compress_weights on our f16 IR, with the same mode, group size and
    ratio 1.0, gives the constants our quantized IR holds, bit for bit. The
    router and shared-expert gate stay f16 in ours (a deliberate floor), so
    NNCF is told to ignore those two MatMuls."""
    f16 = ir(mtpconv, fixture_dirs, tmp_path_factory, "b", "f16")
    ours = ir(mtpconv, fixture_dirs, tmp_path_factory, "b", config)
    kw = {"mode": getattr(nncf.CompressWeightsMode, mode), "ratio": 1.0}
    if group:
        kw.update(group_size=group, all_layers=True)
    ignored = nncf.IgnoredScope(names=["mtp.layers.0.mlp.experts/router", "mtp.layers.0.mlp.shared_expert_gate"])
    theirs = nncf.compress_weights(CORE.read_model(f16 / "openvino_mtp_model.xml"), ignored_scope=ignored, **kw)
    a, b = const_map(CORE.read_model(ours / "openvino_mtp_model.xml")), const_map(theirs)
    compared = set()
    for name, c in b.items():
        if not name.endswith(("/scale", "/zero_point")):
            continue
        base = name.rsplit("/", 1)[0]
        for n in (base, name):
            assert n in a, f"{n}: NNCF compressed it, we did not"
            x, y = a[n], b[n]
            assert x.get_element_type() == y.get_element_type() and list(x.get_output_shape(0)) == list(y.get_output_shape(0)), n
            assert np.array_equal(np.asarray(x.get_data()).view(np.uint8), np.asarray(y.get_data()).view(np.uint8)), n
            compared.add(base)
    # fc, q/k/v/o_proj, the shared expert's three projections, the three expert stacks.
    assert len(compared) == 11, sorted(compared)
    # The lm_head IR at its precision: INT8_ASYM, NNCF's mode for a last layer.
    if config == "int8":
        th = nncf.compress_weights(CORE.read_model(f16 / "openvino_mtp_lm_head.xml"), mode=nncf.CompressWeightsMode.INT8_ASYM)
        oh = const_map(CORE.read_model(ours / "openvino_mtp_lm_head.xml"))
        for n in ("lm_head.weight", "lm_head.weight/scale", "lm_head.weight/zero_point"):
            assert np.array_equal(np.asarray(oh[n].get_data()).view(np.uint8), np.asarray(const_map(th)[n].get_data()).view(np.uint8)), n


def runtime_types(compiled):
    return Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops())


@pytest.mark.parametrize("config", ["f16", "int8", "int4-g64", "int4-g128"])
def test_cpu_fuses_moe_attention_norms_and_rope(config, mtpconv, fixture_dirs, tmp_path_factory):
    out = ir(mtpconv, fixture_dirs, tmp_path_factory, "a", config)
    compiled = CORE.compile_model(CORE.read_model(out / "openvino_mtp_model.xml"), "CPU")
    types = runtime_types(compiled)
    print(f"{config}: MoE GatherMatmul={types['GatherMatmul']} Tile={types['Tile']} "
          f"attention SDPA={types['ScaledDotProductAttention']} MemoryInput={types['MemoryInput']} MemoryOutput={types['MemoryOutput']} "
          f"RMS={types['RMS']} RoPE={types['RoPE']} FullyConnected={types['FullyConnected']}")
    # Only the top-k experts run: gate, up and down as gather-matmuls, no Tile of the tokens.
    assert types["GatherMatmul"] == 3 and types["Tile"] == 0
    # Attention fused with its KV cache: the state is read and written by the attention node.
    assert types["ScaledDotProductAttention"] == 1 and types["MemoryInput"] == 2 and types["MemoryOutput"] == 2
    sdpa = [op for op in compiled.get_runtime_model().get_ordered_ops() if op.get_rt_info()["layerType"].astype(str) == "ScaledDotProductAttention"][0]
    feeds = {i.get_source_output().get_node().get_rt_info()["layerType"].astype(str) for i in sdpa.inputs()}
    print(f"{config}: the attention node reads from {sorted(feeds)}")
    assert "MemoryInput" in feeds  # the cache is read by attention itself, not concatenated outside
    assert types["RMS"] == 7 and types["RoPE"] == 2
    # And the states answer to the documented ids.
    req = compiled.create_infer_request()
    assert sorted(s.name for s in req.query_state()) == ["mtp.layers.0.self_attn.key_cache", "mtp.layers.0.self_attn.value_cache"]


COMPRESSED = {"int8": "u8", "int8-sym": "i8", "int4-g64": "u4", "int4-g128": "u4", "int4-sym-g64": "i4", "int4-sym-g128": "i4"}
F16_FLOOR = ("mtp.layers.0.mlp.experts/router", "mtp.layers.0.mlp.shared_expert_gate")


def weight_precisions(compiled):
    """Each FullyConnected / GatherMatmul of the compiled model and the precision of its weight input."""
    out = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        if op.get_rt_info()["layerType"].astype(str) in ("FullyConnected", "GatherMatmul"):
            w = op.input(1).get_source_output().get_node()
            out[op.get_friendly_name()] = w.get_rt_info()["outputPrecisions"].astype(str)
    return out


@pytest.mark.parametrize("config", list(COMPRESSED))
def test_compiled_model_keeps_compressed_weights(config, mtpconv, fixture_dirs, tmp_path_factory):
    """With the default CPU compile, int8/int4 weights stay u8/i8/u4/i4 inside the
    FullyConnected and GatherMatmul nodes (not folded to f32 at compile time),
    in the layer and in the lm_head; the f16 router and shared-expert gate stay f16."""
    out = ir(mtpconv, fixture_dirs, tmp_path_factory, "a", config)
    layer = weight_precisions(CORE.compile_model(CORE.read_model(out / "openvino_mtp_model.xml"), "CPU"))
    print(config, layer)
    want = COMPRESSED[config]
    assert len(layer) == 13, layer  # fc, q/k/v/o, router, shared gate + 3 shared expert, 3 expert stacks
    for name, prec in layer.items():
        assert prec == ("f16" if name.startswith(F16_FLOOR) else want), (name, prec)
    # The lm_head: int8 unless the config asks int4 for it, symmetric with --sym like the layer.
    lm_want = ("i" if "sym" in config else "u") + ("4" if "--lm-head-precision" in CONFIGS[config] and CONFIGS[config][-1] == "int4" else "8")
    head = weight_precisions(CORE.compile_model(CORE.read_model(out / "openvino_mtp_lm_head.xml"), "CPU"))
    assert list(head.values()) == [lm_want], head


def test_golden_nncf_vectors_are_current(tmp_path):
    fresh = tmp_path / "g.safetensors"
    subprocess.run([sys.executable, str(ROOT / "interop" / "golden_nncf.py"), str(fresh)], check=True, capture_output=True)
    a, b = load_file(str(fresh)), load_file(str(ROOT / "testdata" / "golden" / "nncf_int.safetensors"))
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k


def test_documented_draft_step_runs(mtpconv, fixture_dirs, tmp_path_factory):
    """The documented Python example drives the two IRs for one draft step."""
    text = (ROOT / "docs" / "openvino.md").read_text()
    block = text.split("### One draft step in Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    out = ir(mtpconv, fixture_dirs, tmp_path_factory, "a", "int4-g64")
    emb, _ = embedding(fixture_dirs["a"])
    rng = np.random.default_rng(3)
    scope = {"out": str(out), "embed_tokens": emb.astype(np.float32), "tokens": [5, 17, 99, 3],
             "next_token": 42, "trunk_hidden": rng.standard_normal((4, emb.shape[1])).astype(np.float32)}
    exec(block, scope)
    assert 0 <= scope["draft"] < emb.shape[0]
    assert scope["last"].shape == (1, 4, emb.shape[1])
