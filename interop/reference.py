"""An independent numpy reference of the Qwen3.5/3.6/Next MTP forward, written
from the spec's math (qwen-mtp-checkpoint.md section 6), not from mtpconv's Go
code. Weights come straight from the raw Hugging Face checkpoint, with
zero-centred norms applied as (1 + w). Computation is float64."""
import json
from pathlib import Path

import numpy as np
import safetensors


def load_raw(folder, prefix=""):
    """Every tensor of a raw checkpoint whose name starts with prefix, as
    float64; an FP8 release's weights dequantized with their block scales."""
    folder = Path(folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    cfg = json.loads((folder / "config.json").read_text())
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        for name, t in safetensors.deserialize((folder / shard).read_bytes()):
            if name.startswith(prefix):
                out[name] = to_f64(bytes(t["data"]), t["dtype"], t["shape"])
    block = (cfg.get("quantization_config") or {}).get("weight_block_size")
    for name in [n for n in out if n.endswith("_scale_inv")]:
        w, s = out[name[: -len("_scale_inv")]], out.pop(name)
        b0, b1 = block
        full = np.repeat(np.repeat(s, b0, axis=0), b1, axis=1)[: w.shape[0], : w.shape[1]]
        # Each product is exact in float64; the export computes it in float32.
        out[name[: -len("_scale_inv")]] = (w * full).astype(np.float32).astype(np.float64)
    return out


def e4m3(code):
    """The float8 e4m3fn value of a code, from the format's definition."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return np.nan
    if e == 0:
        return sign * m / 8 * 2.0 ** -6
    return sign * (1 + m / 8) * 2.0 ** (e - 7)


E4M3 = np.array([e4m3(c) for c in range(256)])


def to_f64(data, dtype, shape):
    dtype = dtype.upper()
    if dtype in ("BF16", "BFLOAT16"):
        bits = np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16
        arr = bits.view(np.float32)
    elif dtype in ("F16", "FLOAT16"):
        arr = np.frombuffer(data, dtype=np.float16)
    elif dtype in ("F32", "FLOAT32"):
        arr = np.frombuffer(data, dtype=np.float32)
    elif dtype in ("F8_E4M3", "FLOAT8_E4M3FN"):
        arr = E4M3[np.frombuffer(data, dtype=np.uint8)]
    else:
        raise ValueError(dtype)
    return arr.astype(np.float64).reshape(shape)


def text_config(folder):
    cfg = json.loads((Path(folder) / "config.json").read_text())
    return cfg.get("text_config", cfg)


def rms_norm(x, w, eps):
    """Zero-centred RMSNorm: w is the stored weight, the effective one is 1 + w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def rope(x, positions, rot, theta):
    """Partial rotary, rotate-half (neox) style, on the first rot dims of x [S, H, D]."""
    half = rot // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / rot)
    ang = positions[:, None].astype(np.float64) * inv[None, :]  # [S, half]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)


def gated_qkv(a, w, p, x, positions):
    """Qwen's gated attention projections of x [S, H] under prefix p: the
    queries (q_proj gives each head its query and its output gate), keys and
    values, q/k zero-centred-normed and rotated (a: heads, kv_heads, hd, eps,
    rot, theta). Returns q [S, heads, hd], gate [S, heads * hd], k, v [S, kv_heads, hd]."""
    S, hd = x.shape[0], a.hd
    qg = (x @ w[p + "q_proj.weight"].T).reshape(S, a.heads, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(S, a.heads * hd)
    k = (x @ w[p + "k_proj.weight"].T).reshape(S, a.kv_heads, hd)
    v = (x @ w[p + "v_proj.weight"].T).reshape(S, a.kv_heads, hd)
    q = rope(rms_norm(q, w[p + "q_norm.weight"], a.eps), positions, a.rot, a.theta)
    k = rope(rms_norm(k, w[p + "k_norm.weight"], a.eps), positions, a.rot, a.theta)
    return q, gate, k, v


def attend(q, keys, values, visible):
    """Softmax attention, scaled by 1/sqrt(head_dim), of q [S, H, D] over
    keys and values [T, H_kv, D] (query heads sharing a key-value head in
    groups), each query seeing the keys visible [S, T] marks."""
    S, heads, hd = q.shape
    group = heads // keys.shape[1]
    out = np.zeros((S, heads, values.shape[2]))
    for hh in range(heads):
        scores = np.where(visible, q[:, hh] @ keys[:, hh // group].T / np.sqrt(hd), -np.inf)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, hh] = (scores / scores.sum(axis=-1, keepdims=True)) @ values[:, hh // group]
    return out


class MTPReference:
    """The MTP head of a raw checkpoint, with its own KV cache."""

    def __init__(self, folder, weights=None):
        self.cfg = text_config(folder)
        self.w = weights if weights is not None else load_raw(folder, "mtp.")
        raw_cfg = json.loads((Path(folder) / "config.json").read_text())
        self.embed = None
        self.folder = folder
        self.eps = self.cfg.get("rms_norm_eps", 1e-6)
        rp = self.cfg.get("rope_parameters") or {}
        self.theta = rp.get("rope_theta", self.cfg.get("rope_theta"))
        prf = rp.get("partial_rotary_factor", self.cfg.get("partial_rotary_factor", 0.25))
        self.hd = self.cfg["head_dim"]
        self.rot = int(self.hd * prf)
        self.heads = self.cfg["num_attention_heads"]
        self.kv_heads = self.cfg["num_key_value_heads"]
        self.top_k = self.cfg.get("num_experts_per_tok", 0)
        self.n_experts = self.cfg.get("num_experts", 0)  # 0: a dense MLP
        # Qwen3.5 configs carry no norm_topk_prob; the top-k weights are renormalised.
        self.norm_topk = self.cfg.get("norm_topk_prob", True) if "text_config" in raw_cfg else self.cfg.get("norm_topk_prob", False)
        self.k_cache = None
        self.v_cache = None

    def expert(self, e, proj):
        stacked = f"mtp.layers.0.mlp.switch_mlp.{proj}.weight"
        if stacked in self.w:  # weights supplied in the MLX layout
            return self.w[stacked][e]
        p = "mtp.layers.0.mlp.experts."
        if p + "gate_up_proj" in self.w:
            i = self.cfg["moe_intermediate_size"]
            if proj == "gate_proj":
                return self.w[p + "gate_up_proj"][e, :i]
            if proj == "up_proj":
                return self.w[p + "gate_up_proj"][e, i:]
            return self.w[p + "down_proj"][e]
        return self.w[f"{p}{e}.{proj}.weight"]

    def step(self, emb, hidden, positions):
        """emb, hidden: [S, H] (one sequence); positions: [S]. Returns the post-mtp.norm output."""
        w, eps = self.w, self.eps
        e = rms_norm(emb, w["mtp.pre_fc_norm_embedding.weight"], eps)
        h = rms_norm(hidden, w["mtp.pre_fc_norm_hidden.weight"], eps)
        u = np.concatenate([e, h], axis=-1) @ w["mtp.fc.weight"].T
        u = u + self.attention(rms_norm(u, w["mtp.layers.0.input_layernorm.weight"], eps), positions)
        mlp = self.moe if self.n_experts else self.dense
        u = u + mlp(rms_norm(u, w["mtp.layers.0.post_attention_layernorm.weight"], eps))
        return rms_norm(u, w["mtp.norm.weight"], eps)

    def attention(self, x, positions):
        w, p, hd, S = self.w, "mtp.layers.0.self_attn.", self.hd, x.shape[0]
        q, gate, k, v = gated_qkv(self, w, p, x, positions)
        self.k_cache = k if self.k_cache is None else np.concatenate([self.k_cache, k])
        self.v_cache = v if self.v_cache is None else np.concatenate([self.v_cache, v])
        T = self.k_cache.shape[0]
        causal = np.arange(T)[None, :] <= (T - S + np.arange(S))[:, None]
        out = attend(q, self.k_cache, self.v_cache, causal).reshape(S, self.heads * hd) * sigmoid(gate)
        return out @ w[p + "o_proj.weight"].T

    def dense(self, x):
        w, p = self.w, "mtp.layers.0.mlp."
        return (silu(x @ w[p + "gate_proj.weight"].T) * (x @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T

    def moe(self, x):
        w, p = self.w, "mtp.layers.0.mlp."
        logits = x @ w[p + "gate.weight"].T
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.zeros_like(x)
        for s in range(x.shape[0]):
            top = np.argsort(-probs[s], kind="stable")[: self.top_k]
            weights = probs[s, top]
            if self.norm_topk:
                weights = weights / weights.sum()
            for e, g in zip(top, weights):
                y = silu(self.expert(e, "gate_proj") @ x[s]) * (self.expert(e, "up_proj") @ x[s])
                out[s] += g * (self.expert(e, "down_proj") @ y)
        sh = silu(x @ w[p + "shared_expert.gate_proj.weight"].T) * (x @ w[p + "shared_expert.up_proj.weight"].T)
        sh = sh @ w[p + "shared_expert.down_proj.weight"].T
        return out + sigmoid(x @ w[p + "shared_expert_gate.weight"].T) * sh
