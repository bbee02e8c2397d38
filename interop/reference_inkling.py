"""An independent numpy reference of Inkling's MTP depths (inkling, the
release's model.mtp.layers.{j}), written from the architecture's math (the
layout in docs/inkling.md; the operations as the Inkling modelling code
defines them), not from mtpconv's Go code nor by calling mlx-vlm:

- depth j: h = block_j(input_proj_j([hidden_norm_j(h_prev), embed_norm_j(e)])),
  hidden first; logits = lm_head(norm(h) / logits_mup_width_multiplier), norm
  the trunk's final RMSNorm; every RMSNorm plain (the weight as stored);
- a block: r = attn(input_layernorm(x)); h = x + r + conv_attn(r);
  r' = mlp(post_attention_layernorm(h)); out = h + r' + conv_mlp(r'), with
  conv a depthwise causal convolution over the last K positions (the weight
  [C, K]: out[t] = sum_k w[:, k] * in[t - K + 1 + k], zeros before the first
  token) that each depth runs over its own history;
- the attention: no rotary embedding; q, k, v and a relative-position query
  r (d_rel per head) from one projection; k = k + conv_k(k), v = v + conv_v(v)
  (the same causal convolution), q and k RMS-normed per head; the logit of
  query position p and key position s is q.k / head_dim plus, for
  d = p - s < rel_extent, r_p . rel_proj[:, d] (0 beyond), -inf for s > p
  and, in a sliding-window depth, for d >= the window (a sliding depth's
  extent is its window); a global depth with log_scaling_n_floor scales q and
  the relative bias by 1 + alpha * log(max((p + 1) / floor, 1)); heads share
  the key-value heads in groups;
- the MLP: down(silu(gate(x)) * up(x)) * global_scale.

Weights are in the MLX drafter's names (blocks.{j}.transformer_block.*,
qkvr_proj stacked q, k, v, r; norm.weight the trunk's final norm).
Computation is float64."""
import numpy as np

from reference_nextn import rms_norm
from reference import silu


class InklingMTPReference:
    """The MTP depths of an Inkling drafter folder, each with its own caches."""

    def __init__(self, cfg, weights, local_ids):
        self.cfg, self.w, self.local = cfg, weights, set(local_ids)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.mup = cfg.get("logits_mup_width_multiplier") or 1.0
        self.state = {}  # depth -> {"k": keys, "v": values, conv name -> its input history}

    def dims(self, j):
        c = self.cfg
        if j in self.local:
            return c["swa_num_attention_heads"], c["swa_num_key_value_heads"], c["swa_head_dim"], c["sliding_window_size"], c["sliding_window_size"]
        return c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], 0, c.get("rel_extent", 1024)

    def step(self, j, emb, hidden):
        """emb [S, H] (the next tokens' embeddings), hidden [S, H] (the
        trunk's pre-norm states, or depth output): depth j's output [S, H]."""
        w, p = self.w, f"blocks.{j}."
        x = np.concatenate([rms_norm(hidden, w[p + "hidden_norm.weight"], self.eps),
                            rms_norm(emb, w[p + "embed_norm.weight"], self.eps)], axis=-1) @ w[p + "input_proj.weight"].T
        st = self.state.setdefault(j, {"k": None, "v": None})
        b = p + "transformer_block."
        r = self.attention(j, st, b, rms_norm(x, w[b + "input_layernorm.weight"], self.eps))
        h = x + r + self.conv(st, b + "attn_sconv.conv.weight", r)
        m = self.mlp(b, rms_norm(h, w[b + "post_attention_layernorm.weight"], self.eps))
        out = h + m + self.conv(st, b + "mlp_sconv.conv.weight", m)
        for name in [n for n in st if n.endswith(".next")]:
            st[name[: -len(".next")]] = st.pop(name)
        return out

    def logits(self, h, lm_head):
        return (rms_norm(h, self.w["norm.weight"], self.eps) / self.mup) @ lm_head.T

    def conv(self, st, name, x):
        """The causal depthwise convolution of x [S, C] after the depth's
        history of this input (its new history kept for the next call)."""
        wk = self.w[name].reshape(self.w[name].shape[0], -1)  # [C, K]
        K = wk.shape[1]
        past = st.get(name, np.zeros((K - 1, x.shape[1])))
        xp = np.concatenate([past, x])
        out = np.stack([sum(wk[:, k] * xp[t + k] for k in range(K)) for t in range(x.shape[0])])
        st[name + ".next"] = xp[-(K - 1):]
        return out

    def attention(self, j, st, b, x):
        w, S = self.w, x.shape[0]
        heads, kv, hd, window, extent = self.dims(j)
        d_rel = self.cfg.get("d_rel", 16)
        a = b + "self_attn."
        qkvr = x @ w[a + "qkvr_proj.weight"].T
        dq, dk = heads * hd, kv * hd
        q, k, v, r = qkvr[:, :dq], qkvr[:, dq:dq + dk], qkvr[:, dq + dk:dq + 2 * dk], qkvr[:, dq + 2 * dk:]
        k = k + self.conv(st, a + "k_sconv.conv.weight", k)
        v = v + self.conv(st, a + "v_sconv.conv.weight", v)
        q = rms_norm(q.reshape(S, heads, hd), w[a + "q_norm.weight"], self.eps)
        k = rms_norm(k.reshape(S, kv, hd), w[a + "k_norm.weight"], self.eps)
        v, r = v.reshape(S, kv, hd), r.reshape(S, heads, d_rel)
        st["k"] = k if st["k"] is None else np.concatenate([st["k"], k])
        st["v"] = v if st["v"] is None else np.concatenate([st["v"], v])
        T = st["k"].shape[0]
        pos = np.arange(T - S, T)  # the queries' positions
        dist = pos[:, None] - np.arange(T)[None, :]  # [S, T]
        tau = np.ones(S)
        floor = self.cfg.get("log_scaling_n_floor")
        if not window and floor is not None:
            tau = 1 + self.cfg.get("log_scaling_alpha", 0.1) * np.log(np.maximum((pos + 1) / floor, 1.0))
        rel = w[a + "rel_proj"]  # [d_rel, extent]
        out = np.zeros((S, heads, hd))
        for hh in range(heads):
            g = hh // (heads // kv)
            bias = r[:, hh] @ rel  # [S, extent]
            band = np.where(dist < extent, np.take_along_axis(bias, np.clip(dist, 0, extent - 1), axis=1), 0.0)
            scores = (tau[:, None] * q[:, hh]) @ st["k"][:, g].T / hd + tau[:, None] * band
            masked = (dist < 0) | ((dist >= window) if window else False)
            scores = np.where(masked, -np.inf, scores)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            out[:, hh] = (scores / scores.sum(axis=-1, keepdims=True)) @ st["v"][:, g]
        return out.reshape(S, heads * hd) @ w[a + "o_proj.weight"].T

    def mlp(self, b, x):
        w, m = self.w, b + "mlp."
        y = (silu(x @ w[m + "gate_proj.weight"].T) * (x @ w[m + "up_proj.weight"].T)) @ w[m + "down_proj.weight"].T
        return y * w[m + "global_scale"]
