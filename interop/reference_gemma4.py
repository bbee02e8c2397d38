"""An independent numpy reference of the Gemma-4 assistant's draft step
(Gemma4AssistantForCausalLM), written from transformers' gemma4 /
gemma4_assistant modelling code and the checkpoint's layout, not from
mtpconv's Go code. Computation is float64; the weights come straight from the
assistant's Hugging Face folder.

One draft step, for one query position p and the target's shared KV (the
keys, already rotated, and values of the target's last sliding and last full
attention layer, [kv_heads, S, head_dim] each):

- h = pre_projection(x), x = concat(the target's embedding of the token
  scaled by sqrt(backbone_hidden_size), the target's last hidden state);
- each block: h += post_attention_layernorm(o_proj(attention(q))) with
  q = rope(q_norm(q_proj(input_layernorm(h)))) per head, scale 1, GQA over the
  shared keys and values of the block's layer type (every key visible: the
  test keeps S below the sliding window); then h += post_feedforward_layernorm(
  down(gelu_tanh(gate(y)) * up(y))), y = pre_feedforward_layernorm(h); then
  h *= layer_scalar. Every RMSNorm applies its weight as stored (Gemma 4);
- RoPE rotate-half: sliding layers rope_parameters.sliding_attention (theta,
  every dimension), full layers "proportional": frequency i of the
  global_head_dim / 2 is theta^(-2i / global_head_dim) for the first
  partial_rotary_factor share of them, 0 for the rest;
- out = norm(h): logits = embed_tokens · out (tied), or for the centroid
  head the tokens of the top centroid_intermediate_top_k centroids
  (centroids · out) scored so and every other token min(those) - 1; the next
  hidden state post_projection(out).
"""
import json
from pathlib import Path

import numpy as np
import safetensors

from reference import to_f64


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def rms_norm(x, w, eps):
    """Gemma 4's RMSNorm: the weight applied as stored."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_freqs(head_dim, theta, rotated_share):
    """Inverse frequencies of the head_dim / 2 rotate-half pairs; 0 past the rotated share."""
    half = head_dim // 2
    rot = int(rotated_share * head_dim) // 2
    inv = np.zeros(half)
    inv[:rot] = theta ** (-np.arange(rot, dtype=np.float64) * 2.0 / head_dim)
    return inv


def rope(x, position, inv):
    """Rotate-half RoPE of x [..., head_dim] at one position."""
    half = x.shape[-1] // 2
    cos, sin = np.cos(position * inv), np.sin(position * inv)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class Gemma4AssistantReference:
    def __init__(self, folder):
        folder = Path(folder)
        self.cfg = json.loads((folder / "config.json").read_text())
        self.text = self.cfg["text_config"]
        self.w, self.ordering = {}, None
        for name, t in safetensors.deserialize((folder / "model.safetensors").read_bytes()):
            if t["dtype"].upper() in ("I64", "INT64"):
                self.ordering = np.frombuffer(bytes(t["data"]), dtype="<i8").reshape(t["shape"])
            else:
                self.w[name] = to_f64(bytes(t["data"]), t["dtype"], t["shape"])

    def head_dim(self, layer_type):
        if layer_type == "full_attention":
            return self.text["global_head_dim"]
        return self.text["head_dim"]

    def inv_freq(self, layer_type):
        p = self.text["rope_parameters"][layer_type]
        share = p.get("partial_rotary_factor", 1.0) if p.get("rope_type") == "proportional" else 1.0
        return rope_freqs(self.head_dim(layer_type), p["rope_theta"], share)

    def step(self, x, position, shared_kv):
        """One draft step: x [2 * backbone] in, (logits [vocab], next hidden [backbone]) out;
        shared_kv maps a layer type to (keys, values) [kv_heads, S, head_dim]."""
        w, t = self.w, self.text
        eps, heads = t["rms_norm_eps"], t["num_attention_heads"]
        h = w["pre_projection.weight"] @ x
        for j, layer_type in enumerate(t["layer_types"]):
            p = f"model.layers.{j}."
            hd = self.head_dim(layer_type)
            y = rms_norm(h, w[p + "input_layernorm.weight"], eps)
            q = (w[p + "self_attn.q_proj.weight"] @ y).reshape(heads, hd)
            q = rope(rms_norm(q, w[p + "self_attn.q_norm.weight"], eps), position, self.inv_freq(layer_type))
            keys, values = shared_kv[layer_type]
            group = heads // keys.shape[0]
            out = np.empty((heads, hd))
            for i in range(heads):
                s = keys[i // group] @ q[i]  # scale 1
                a = np.exp(s - s.max())
                out[i] = (a / a.sum()) @ values[i // group]
            h = h + rms_norm(w[p + "self_attn.o_proj.weight"] @ out.reshape(-1), w[p + "post_attention_layernorm.weight"], eps)
            y = rms_norm(h, w[p + "pre_feedforward_layernorm.weight"], eps)
            m = w[p + "mlp.down_proj.weight"] @ (gelu_tanh(w[p + "mlp.gate_proj.weight"] @ y) * (w[p + "mlp.up_proj.weight"] @ y))
            h = (h + rms_norm(m, w[p + "post_feedforward_layernorm.weight"], eps)) * w[p + "layer_scalar"][0]
        out = rms_norm(h, w["model.norm.weight"], eps)
        logits = w["model.embed_tokens.weight"] @ out
        if self.cfg.get("use_ordered_embeddings"):
            logits = self.centroid_logits(out, logits)
        return logits, w["post_projection.weight"] @ out

    def centroid_logits(self, out, full):
        """The centroid head: only the top clusters' tokens keep their logits."""
        n, k = self.cfg["num_centroids"], self.cfg["centroid_intermediate_top_k"]
        top = np.argsort(-(self.w["masked_embedding.centroids.weight"] @ out), kind="stable")[:k]
        chosen = self.ordering.reshape(n, -1)[top].reshape(-1)
        logits = np.full_like(full, full[chosen].min() - 1.0)
        logits[chosen] = full[chosen]
        return logits
