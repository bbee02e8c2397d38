"""An independent numpy reference of DeepSeek-V4's DSpark stages (DeepSeek-V4-Flash-0731: mtp.{s}.*), written
from the layout and math in docs/deepseek-v4-dspark.md, not from mtpconv's Go code nor any runtime's. Weights come
straight from the raw release checkpoint: FP8 e4m3 codes times their ue8m0 scale per 128 x 128 block, FP4 e2m1 pairs
(element 2i in the low nibble) times their ue8m0 scale per 32 inputs. Computation is float64.

One draft step: the target's hidden states at dspark_target_layer_ids [S, n·H] (the mean over the trunk's
hyper-connection streams, concatenated) are projected by stage 0 (main_norm(main_proj(·))) into the attention
context; a block of tokens (the anchor, then the noise token) enters as the target's embedding copied to hc_mult
streams; each stage is a DeepSeek-V4 block (hyper-connection pre/post with a Sinkhorn-normalised mix, multi-head
latent attention whose single key-value head attends over the context then the block, non-causally, with per-head
sinks and an inverse rotation of its output, o_groups grouped low-rank output; a sqrtsoftplus MoE with clamped
SwiGLU experts plus a shared expert); the last stage collapses the streams (hc_head), norms, and the target's head
gives the block's base logits. The Markov head adds markov_w2 · markov_w1[previous token] to each position's logits,
the previous token being the anchor, then each position's greedy pick; the confidence head scores
sigmoid(proj · [collapsed hidden; markov_w1[previous]])."""
import json
from pathlib import Path

import numpy as np
import safetensors

from reference import E4M3

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def load_release(folder):
    """Every tensor of a DeepSeek-V4 release checkpoint as float64, FP8 and FP4 weights dequantized with their
    ue8m0 scales (the scales consumed)."""
    folder = Path(folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    raw = {}
    for shard in sorted(set(index["weight_map"].values())):
        for name, t in safetensors.deserialize((folder / shard).read_bytes()):
            raw[name] = (t["dtype"], t["shape"], bytes(t["data"]))
    out = {}
    for name, (dtype, shape, data) in raw.items():
        if name.endswith(".scale") and name[: -len(".scale")] + ".weight" in raw:
            continue
        scale = raw.get(name[: -len(".weight")] + ".scale") if name.endswith(".weight") else None
        if dtype == "F8_E4M3":
            codes = E4M3[np.frombuffer(data, dtype=np.uint8)].reshape(shape)
            s = 2.0 ** (np.frombuffer(scale[2], dtype=np.uint8).astype(np.float64) - 127).reshape(scale[1])
            full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[: shape[0], : shape[1]]
            out[name] = codes * full
        elif dtype == "I8":
            packed = np.frombuffer(data, dtype=np.uint8).reshape(shape)
            vals = np.stack([E2M1[packed & 0xF], E2M1[packed >> 4]], axis=-1).reshape(shape[0], 2 * shape[1])
            s = 2.0 ** (np.frombuffer(scale[2], dtype=np.uint8).astype(np.float64) - 127).reshape(scale[1])
            out[name] = vals * np.repeat(s, 32, axis=1)
        elif dtype == "BF16":
            out[name] = (np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64).reshape(shape)
        elif dtype == "F32":
            out[name] = np.frombuffer(data, dtype=np.float32).astype(np.float64).reshape(shape)
        else:
            raise ValueError(f"{name}: dtype {dtype}")
    return out


def rms(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rope_interleaved(x, positions, rope_dims, theta, inverse=False):
    """Rotates the last rope_dims of x [..., L, D] in consecutive pairs (2i, 2i+1) by position · theta^(-2i/rope_dims)."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, rope_dims, 2, dtype=np.float64) / rope_dims)
    ang = positions[:, None].astype(np.float64) * inv[None, :] * (-1.0 if inverse else 1.0)  # [L, rope/2]
    cos, sin = np.cos(ang), np.sin(ang)
    head, rot = x[..., : d - rope_dims], x[..., d - rope_dims :]
    a, b = rot[..., 0::2], rot[..., 1::2]
    out = np.empty_like(rot)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return np.concatenate([head, out], axis=-1)


class DSparkReference:
    """The DSpark stages of a DeepSeek-V4 release folder (0731's layout), with the target's embedding and head."""

    def __init__(self, folder):
        self.cfg = json.loads((Path(folder) / "config.json").read_text())
        self.w = load_release(folder)
        c = self.cfg
        self.stages = 1 + max(int(n.split(".")[1]) for n in self.w if n.startswith("mtp."))
        self.eps, self.hc, self.hc_eps = c["rms_norm_eps"], c["hc_mult"], c["hc_eps"]
        self.iters, self.heads, self.head_dim = c["hc_sinkhorn_iters"], c["num_attention_heads"], c["head_dim"]
        self.limit = c.get("swiglu_limit", 0.0)

    def hc_pre(self, p, which, h):
        """Collapses the streams h [L, hc, H] for a branch: the collapsed input and the post and comb mixes."""
        hc = self.hc
        z = rms(h.reshape(h.shape[0], -1), None, self.eps)
        mixes = z @ self.w[f"{p}hc_{which}_fn"].T
        base, scale = self.w[f"{p}hc_{which}_base"], self.w[f"{p}hc_{which}_scale"]
        pre = 1 / (1 + np.exp(-(mixes[:, :hc] * scale[0] + base[:hc]))) + self.hc_eps
        post = 2 / (1 + np.exp(-(mixes[:, hc : 2 * hc] * scale[1] + base[hc : 2 * hc])))
        comb = mixes[:, 2 * hc :].reshape(-1, hc, hc) * scale[2] + base[2 * hc :].reshape(hc, hc)
        comb = softmax(comb, -1) + self.hc_eps
        comb = comb / (comb.sum(-2, keepdims=True) + self.hc_eps)
        for _ in range(self.iters - 1):
            comb = comb / (comb.sum(-1, keepdims=True) + self.hc_eps)
            comb = comb / (comb.sum(-2, keepdims=True) + self.hc_eps)
        return (pre[:, :, None] * h).sum(1), post, comb

    @staticmethod
    def hc_post(x, residual, post, comb):
        """Expands a branch's output back into the streams: post_i · x + Σ_j comb_ji · residual_j."""
        return post[:, :, None] * x[:, None, :] + np.einsum("lji,ljd->lid", comb, residual)

    def attention(self, p, x, ctx):
        """The stage's MLA over the context ctx [S, H] then the block x [L, H], non-causal, with sinks."""
        c, w, nh, hd = self.cfg, self.w, self.heads, self.head_dim
        S, L = ctx.shape[0], x.shape[0]
        q = rms(x @ w[p + "attn.wq_a.weight"].T, w[p + "attn.q_norm.weight"], self.eps) @ w[p + "attn.wq_b.weight"].T
        q = rms(q.reshape(L, nh, hd), None, self.eps).transpose(1, 0, 2)  # [nh, L, hd]
        pos_q = np.arange(S, S + L)
        q = rope_interleaved(q, pos_q, c["qk_rope_head_dim"], c["rope_theta"])
        kv = lambda t: rms(t @ w[p + "attn.wkv.weight"].T, w[p + "attn.kv_norm.weight"], self.eps)
        keys = np.concatenate([rope_interleaved(kv(ctx), np.arange(S), c["qk_rope_head_dim"], c["rope_theta"]),
                               rope_interleaved(kv(x), pos_q, c["qk_rope_head_dim"], c["rope_theta"])])  # [S+L, hd]
        scores = q @ keys.T * hd ** -0.5  # [nh, L, S+L]
        sink = w[p + "attn.attn_sink"][:, None, None] * np.ones((nh, L, 1))
        probs = softmax(np.concatenate([scores, sink], -1), -1)[..., :-1]
        out = rope_interleaved(probs @ keys, pos_q, c["qk_rope_head_dim"], c["rope_theta"], inverse=True)  # [nh, L, hd]
        g, rank = c["o_groups"], c["o_lora_rank"]
        out = out.reshape(g, nh // g, L, hd).transpose(0, 2, 1, 3).reshape(g, L, -1)
        wo_a = w[p + "attn.wo_a.weight"].reshape(g, rank, -1)
        low = np.einsum("gli,gri->lgr", out, wo_a).reshape(L, g * rank)
        return low @ w[p + "attn.wo_b.weight"].T

    def swiglu(self, x, w1, w2, w3):
        g, u = x @ w1.T, x @ w3.T
        if self.limit:
            g, u = np.minimum(g, self.limit), np.clip(u, -self.limit, self.limit)
        return (g / (1 + np.exp(-g)) * u) @ w2.T

    def moe(self, p, x):
        c, w = self.cfg, self.w
        logits = x @ w[p + "ffn.gate.weight"].T
        scores = np.sqrt(np.log1p(np.exp(logits)))
        out = self.swiglu(x, w[p + "ffn.shared_experts.w1.weight"], w[p + "ffn.shared_experts.w2.weight"],
                          w[p + "ffn.shared_experts.w3.weight"])
        for t in range(x.shape[0]):
            top = np.argsort(-(scores[t] + w[p + "ffn.gate.bias"]), kind="stable")[: c["num_experts_per_tok"]]
            weights = scores[t, top]
            if c.get("norm_topk_prob", True):
                weights = weights / (weights.sum() + 1e-20)
            for e, wt in zip(top, weights * c["routed_scaling_factor"]):
                ep = f"{p}ffn.experts.{e}."
                out[t] += wt * self.swiglu(x[t], w[ep + "w1.weight"], w[ep + "w2.weight"], w[ep + "w3.weight"])
        return out

    def hidden(self, tokens, target_hidden):
        """The collapsed, pre-norm hidden state [L, H] of the block tokens given the target's hidden states [S, n·H]."""
        w = self.w
        ctx = rms(target_hidden @ w["mtp.0.main_proj.weight"].T, w["mtp.0.main_norm.weight"], self.eps)
        h = np.repeat(w["embed.weight"][tokens][:, None, :], self.hc, axis=1)
        for s in range(self.stages):
            p = f"mtp.{s}."
            x, post, comb = self.hc_pre(p, "attn", h)
            h = self.hc_post(self.attention(p, rms(x, w[p + "attn_norm.weight"], self.eps), ctx), h, post, comb)
            x, post, comb = self.hc_pre(p, "ffn", h)
            h = self.hc_post(self.moe(p, rms(x, w[p + "ffn_norm.weight"], self.eps)), h, post, comb)
        last = f"mtp.{self.stages - 1}."
        z = rms(h.reshape(h.shape[0], -1), None, self.eps)
        pre = 1 / (1 + np.exp(-(z @ w[last + "hc_head_fn"].T * w[last + "hc_head_scale"][0] + w[last + "hc_head_base"]))) + self.hc_eps
        return (pre[:, :, None] * h).sum(1)

    def base_logits(self, tokens, target_hidden):
        """The block's logits before the Markov head: the last stage's norm, then the target's head."""
        last = f"mtp.{self.stages - 1}."
        return rms(self.hidden(tokens, target_hidden), self.w[last + "norm.weight"], self.eps) @ self.w["head.weight"].T

    def draft(self, anchor, target_hidden, proposal):
        """Greedy DSpark proposal of `proposal` tokens after anchor: the base logits of [anchor, noise...], each
        position's biased by the Markov head keyed on the token before it; returns the tokens and biased logits."""
        last = f"mtp.{self.stages - 1}."
        tokens = [anchor] + [self.cfg["dspark_noise_token_id"]] * (proposal - 1)
        base = self.base_logits(np.array(tokens), target_hidden)
        prev, out, logits = anchor, [], []
        for i in range(proposal):
            step = base[i] + self.w[last + "markov_head.markov_w2.weight"] @ self.w[last + "markov_head.markov_w1.weight"][prev]
            prev = int(np.argmax(step))
            out.append(prev)
            logits.append(step)
        return out, np.array(logits)
