"""Writes the HF repos a user serves with vLLM, from a text-only Qwen3.5
fixture (internal/fixtures: Qwen3_5MoeForCausalLM, or the dense
Qwen3_5ForCausalLM) or a GLM-4.x one (its NextN layer at
model.layers.{num_hidden_layers}, shared_experts), the way quantizers leave
them: the trunk alone, no head tensor, the config still declaring
mtp_num_hidden_layers (num_nextn_predict_layers). The forms:

- bf16: the trunk's tensors as they are;
- w8a8: compressed-tensors int-quantized, int8 weights with one bf16 scale per
  output channel, int8 activations quantized per token at run time;
- w4a16: compressed-tensors pack-quantized, symmetric int4 in groups of 128
  along the input (8 values per int32, lowest nibble first, offset by 8), the
  dense layers only: the routed experts stay bf16 and are listed in `ignore`
  (vLLM's CPU backend has no WNA16 MoE kernel);
- gptq: GPTQ v1 4-bit, symmetric, groups of 128, desc_act false, experts
  included (qweight packed along the input, qzeros storing zero - 1, f16
  scales, g_idx);
- w8a8-bf16-experts: w8a8 with the routed experts left bf16 and ignored (the
  CPU int8 MoE kernel needs AMX, vllm fused_moe/experts/cpu_moe.py);
- gptq-moe: gptq on the MoE fixture with the routed experts left bf16 and a
  `dynamic` key saying so (vLLM's CPU backend has no GPTQ MoE kernel): the
  repo a vLLM user with a GPTQ MoE model has, which SGLang cannot serve a
  bf16 head in (it builds every FusedMoE GPTQ).

Quantized: the full-attention projections, the dense MLPs, the shared experts
and (w8a8, gptq) the routed experts, every layer vLLM builds with the quant config except the
linear-attention ones, which the recipes leave bf16 like the routers and
lm_head; the ignore list / GPTQ dynamic rules say so as llm-compressor and
GPTQModel write them. Everything is numpy over the fixture's bytes: the same
input gives the same bytes.
"""
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

FORMS = ("bf16", "w8a8", "w4a16", "gptq", "gptq-moe", "w8a8-bf16-experts")
GROUP = 128
QUANTIZED = re.compile(r"^model\.layers\.\d+\.mlp\.((experts\.\d+|shared_experts?)\.)?(gate|up|down)_proj$"
                       r"|^model\.layers\.\d+\.self_attn\.([qkvo]|q_a|q_b|kv_a)_proj(_with_mqa)?$")
# Multi-head latent attention (DeepSeek-V3, GLM-4.7-Flash): kv_b_proj, which
# vLLM's MLA absorbs into the attention, stays bf16 and ignored.
MLA_IGNORE = ["re:.*kv_b_proj$"]
EXPERT = re.compile(r"\.mlp\.experts\.\d+\.")
# The layers the recipes keep bf16 (llm-compressor's ignore for Qwen3-Next-like models).
CT_IGNORE = ["lm_head", "re:.*mlp.gate$", "re:.*mlp.shared_expert_gate$", "re:.*linear_attn.*"]
GPTQ_SKIP = {"-:.*linear_attn.*": {}}
GPTQ_SKIP_EXPERTS = {"-:.*mlp\\.experts.*": {}}  # vLLM asks for the FusedMoE by its prefix, ending at "experts"


def read_shards(src):
    """{name: (dtype, shape, bytes)} of every tensor of a safetensors folder."""
    out = {}
    for f in sorted(Path(src).glob("*.safetensors")):
        out.update(read_shards_file(f))
    return out


def read_shards_file(f):
    """{name: (dtype, shape, bytes)} of one safetensors file."""
    out = {}
    raw = Path(f).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    for k, v in json.loads(raw[8:8 + n]).items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            out[k] = (v["dtype"], v["shape"], raw[8 + n + b:8 + n + e])
    return out


def write_safetensors(path, tensors):
    """One shard of {name: (dtype, shape, bytes)}, names sorted, header padded to 8."""
    header, off, body = {"__metadata__": {"format": "pt"}}, 0, []
    for k in sorted(tensors):
        dt, shape, data = tensors[k]
        header[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        body.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for d in body:
            f.write(d)


def bf16_to_f32(data, shape):
    return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)


def f32_to_bf16(x):
    """Round to nearest even, as torch does."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")


def symmetric(w, bits, group):
    """int codes and scales of w [out, in], symmetric, per output row (group None) or per group of inputs."""
    qmax = (1 << (bits - 1)) - 1
    g = w.reshape(w.shape[0], -1, group if group else w.shape[1])
    amax = np.abs(g).max(axis=2, keepdims=True)
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    scale = bf16_to_f32(f32_to_bf16(scale).tobytes(), scale.shape)  # the stored scale is the one codes are made with
    q = np.clip(np.round(g / scale), -qmax - 1, qmax).astype(np.int32)
    return q.reshape(w.shape), scale[:, :, 0]


def pack_rows(u4):
    """Eight 4-bit values per int32 along the last axis, the first in the lowest nibble."""
    u = u4.astype(np.uint32).reshape(*u4.shape[:-1], -1, 8)
    return (u << (4 * np.arange(8, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32).view("<i4")


def quantize(name, w, form):
    """The tensors that replace layer `name`'s bf16 weight w [out, in] in the given form."""
    out, inp = w.shape
    if form in ("w8a8", "w8a8-bf16-experts"):
        q, s = symmetric(w, 8, None)
        return {name + ".weight": ("I8", w.shape, q.astype(np.int8).tobytes()),
                name + ".weight_scale": ("BF16", [out, 1], f32_to_bf16(s).tobytes())}
    if form == "w4a16":
        q, s = symmetric(w, 4, GROUP)
        return {name + ".weight_packed": ("I32", [out, inp // 8], pack_rows(q + 8).tobytes()),
                name + ".weight_scale": ("BF16", [out, inp // GROUP], f32_to_bf16(s).tobytes()),
                name + ".weight_shape": ("I64", [2], np.array([out, inp], dtype="<i8").tobytes())}
    if form in ("gptq", "gptq-moe"):
        q, s = symmetric(w, 4, GROUP)
        qweight = gptq_qweight(q + 8)
        zeros = np.full((inp // GROUP, out), 8 - 1, dtype=np.uint32)  # v1 stores zero - 1
        return {name + ".qweight": ("I32", [inp // 8, out], qweight.tobytes()),
                name + ".qzeros": ("I32", [inp // GROUP, out // 8], pack_rows(zeros).tobytes()),
                name + ".scales": ("F16", [inp // GROUP, out], s.T.astype("<f2").tobytes()),
                name + ".g_idx": ("I32", [inp], (np.arange(inp) // GROUP).astype("<i4").tobytes())}
    raise ValueError(form)


def gptq_qweight(u4):
    """GPTQ's qweight [in / 8, out]: eight input rows per int32, input row 8i + k in nibble k."""
    t = u4.T.astype(np.uint32).reshape(-1, 8, u4.shape[0])  # [in / 8, 8, out]
    return (t << (4 * np.arange(8, dtype=np.uint32))[None, :, None]).sum(axis=1, dtype=np.uint32).view("<i4")


def quant_config(form):
    if form in ("gptq", "gptq-moe"):
        dynamic = dict(GPTQ_SKIP, **(GPTQ_SKIP_EXPERTS if form == "gptq-moe" else {}))
        return {"bits": 4, "group_size": GROUP, "desc_act": False, "sym": True, "lm_head": False,
                "quant_method": "gptq", "checkpoint_format": "gptq", "damp_percent": 0.01,
                "true_sequential": True, "static_groups": False, "dynamic": dynamic}
    int8 = form in ("w8a8", "w8a8-bf16-experts")
    bits = 8 if int8 else 4
    weights = {"num_bits": bits, "type": "int", "symmetric": True, "dynamic": False, "observer": "minmax",
               "strategy": "channel" if int8 else "group", "group_size": None if int8 else GROUP,
               "actorder": None, "block_structure": None}
    group = {"targets": ["Linear"], "weights": weights, "output_activations": None,
             "input_activations": None if form == "w4a16" else
             {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": True, "strategy": "token",
              "group_size": None, "observer": None, "actorder": None, "block_structure": None},
             "format": "int-quantized" if int8 else "pack-quantized"}
    ignore = CT_IGNORE + (["re:.*mlp.experts.*"] if form in ("w4a16", "w8a8-bf16-experts") else [])
    return {"quant_method": "compressed-tensors", "format": group["format"], "config_groups": {"group_0": group},
            "ignore": ignore, "kv_cache_scheme": None, "quantization_status": "compressed",
            "global_compression_ratio": None, "sparsity_config": {}, "version": "0.17.0"}


def head_prefix(cfg, names):
    """Where the fixture's MTP head lives: under mtp.* (Qwen, Nemotron-H),
    model.mtp.* (MiMo-V2, Inkling), model.mtp_layers.* (Hy4), or the DeepSeek-style NextN layers from
    model.layers.{num_hidden_layers} (GLM-4.x, DeepSeek-V3, Hy3, Step-3.5,
    Ling-3.0; model.language_model.layers under a nested text config)."""
    for p in ("mtp.", "model.mtp.", "model.mtp_layers."):
        if any(n.startswith(p) for n in names):
            return p
    text = cfg.get("text_config", cfg)  # a nested text config (GLM-5.3-Flash) keeps its layers under model.language_model.
    n, base = text["num_hidden_layers"], "model.layers."
    if any(k.startswith("model.language_model.layers.") for k in names):
        base = "model.language_model.layers."
    return tuple(f"{base}{n + j}." for j in range(text.get("num_nextn_predict_layers", 1)))


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def tokenizer_of(src, dst):
    """A folder dst of the fixture src's tokenizer files."""
    dst = Path(dst)
    dst.mkdir()
    for f in TOKENIZER_FILES:
        if (Path(src) / f).exists():
            shutil.copyfile(Path(src) / f, dst / f)
    return dst


def mend(mtpconv, src, repo, dst):
    """A copy dst of the head-less repo with the head of src added by mtpconv export --target hf --into."""
    shutil.copytree(repo, dst)
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(dst), "--quiet"], check=True)
    return Path(dst)


def write_repo(src, dst, form, tokenizer, keep_extra=()):
    """The head-less repo of the fixture src in the given form, with the tokenizer's files;
    keep_extra: patterns (Python re) of the family's modules the recipe leaves bf16 beyond
    QUANTIZED's (Step-3.5's g_proj, share_expert and stacked experts), said as a
    compressed-tensors "re:" ignore entry or a GPTQ "-:" dynamic key."""
    dst = Path(dst)
    dst.mkdir(parents=True)
    cfg = json.loads((Path(src) / "config.json").read_text())
    tensors = read_shards(src)
    head = head_prefix(cfg, tensors)
    tensors = {k: v for k, v in tensors.items() if not k.startswith(head)}
    if form != "bf16":
        for k in [k for k in tensors if k.endswith(".weight") and QUANTIZED.match(k[:-len(".weight")])]:
            name = k[:-len(".weight")]
            if form in ("w4a16", "gptq-moe", "w8a8-bf16-experts") and EXPERT.search(k):
                continue
            dt, shape, data = tensors.pop(k)
            assert dt == "BF16", (k, dt)
            tensors.update(quantize(name, bf16_to_f32(data, shape), form))
        cfg["quantization_config"] = quant_config(form)
        qc = cfg["quantization_config"]
        for p in keep_extra:
            if "ignore" in qc:
                qc["ignore"].append("re:" + p)
            else:
                qc["dynamic"]["-:" + p] = {}
        if "kv_lora_rank" in cfg:
            cfg["quantization_config"]["ignore"] += MLA_IGNORE
    # Two shards, split where the fixture's layers 0-1 end, and their index.
    first = {k: v for k, v in tensors.items() if re.match(r"model\.(embed_tokens|layers\.[01]\.)", k)}
    parts = [first, {k: v for k, v in tensors.items() if k not in first}]
    weight_map, total = {}, 0
    for i, part in enumerate(parts):
        name = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
        write_safetensors(dst / name, part)
        weight_map.update({k: name for k in part})
        total += sum(len(v[2]) for v in part.values())
    (dst / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, indent=2) + "\n")
    (dst / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for f in sorted(Path(tokenizer).iterdir()):
        shutil.copyfile(f, dst / f.name)
    return dst


def widen_mla(src, dst, kv_lora=512, rope=64, seed=0):
    """The DeepSeek-style MLA fixture src (every layer's attention output
    projection zeroed by the rig) at the one latent size vLLM's CPU MLA
    backends take (kv_lora_rank 512, qk_rope_head_dim 64): the latent
    projections and q_b_proj redrawn at those sizes (seeded; the attention
    they feed is multiplied by a zero o_proj, so the rig holds), the
    kv_a_layernorm ones, every other tensor as it is; one safetensors file,
    the config's two keys changed, the fixture's other files copied."""
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True)
    cfg = json.loads((src / "config.json").read_text())
    heads, nope, v = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
    h, ql = cfg["hidden_size"], cfg["q_lora_rank"]
    shapes = {"self_attn.q_b_proj.weight": (heads * (nope + rope), ql),
              "self_attn.kv_a_proj_with_mqa.weight": (kv_lora + rope, h),
              "self_attn.kv_b_proj.weight": (heads * (nope + v), kv_lora)}
    rng = np.random.default_rng(seed)
    tensors = read_shards(src)
    for k in sorted(tensors):
        leaf = k.split(".", 3)[-1] if k.startswith("model.layers.") else ""
        if leaf in shapes:
            _, o_shape, o_data = tensors[k.replace(leaf, "self_attn.o_proj.weight")]
            assert not np.any(bf16_to_f32(o_data, o_shape)), k  # the rig zeroes the attention's output
            tensors[k] = ("BF16", list(shapes[leaf]), f32_to_bf16(rng.normal(0, 0.02, shapes[leaf])).tobytes())
        elif leaf == "self_attn.kv_a_layernorm.weight":
            tensors[k] = ("BF16", [kv_lora], f32_to_bf16(np.ones(kv_lora)).tobytes())
    write_safetensors(dst / "model.safetensors", tensors)
    cfg.update(kv_lora_rank=kv_lora, qk_rope_head_dim=rope)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for f in sorted(src.iterdir()):
        if f.name != "config.json" and not f.name.startswith("model"):
            shutil.copyfile(f, dst / f.name)
    return dst
