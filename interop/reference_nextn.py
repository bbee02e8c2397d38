"""An independent numpy reference of the GLM-4.x models with a DeepSeek-style
NextN (MTP) layer, written from the Hugging Face modelling code's math
(transformers glm4_moe, glm4_moe_lite) and the checkpoints' layout, not from
mtpconv's Go code:

- GLM-4.5/4.6/4.7 (glm4_moe): GQA with q/k/v biases, optional per-head q/k
  RMSNorms, partial rotary (rotate-half on the first head_dim *
  partial_rotary_factor dims);
- GLM-4.7-Flash (glm4_moe_lite): multi-head latent attention (q_a_proj,
  q_a_layernorm, q_b_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; one
  rotary key shared by every head; interleaved rotary, scale
  (qk_nope + qk_rope)^-0.5);
- both: plain RMSNorms (the weight is applied as stored), the first
  first_k_dense_replace layers with a dense SwiGLU MLP, the others a MoE:
  sigmoid router scores, e_score_correction_bias added for the choice only,
  n_group / topk_group group selection (a group's score is the sum of its top
  two), top-k weights taken from the uncorrected scores, renormalised when
  norm_topk_prob, times routed_scaling_factor, plus shared_experts;
- the NextN layer model.layers.{num_hidden_layers}: logits =
  shared_head.head(shared_head.norm(layer(eh_proj(concat(enorm(embed(t)),
  hnorm(h)))))), embedding first, with h the trunk's hidden state after its
  final norm (what llama.cpp passes as h_nextn), embed_tokens and
  shared_head.head the layer's own when present, else the trunk's.

Hy3 (hy_v3, HY3Reference), from transformers' hy_v3 modelling code and vLLM's
hy_v3_mtp.py: GQA with per-head q/k RMSNorms and full rotate-half rotary, no
biases; the MoE's sigmoid router mlp.router.gate, mlp.expert_bias added for the
choice only, top-k over all experts (no groups), the chosen scores renormalised
(route_norm) times router_scaling_factor, plus the ungated mlp.shared_mlp; its
MTP layers model.layers.{L+j} chained: layer j takes the token after layer j-1's
and layer j-1's output after its final_layernorm (the trunk's post-norm hidden
state for j = 0), logits = lm_head(final_layernorm(layer(eh_proj(concat(
enorm(embed(t)), hnorm(h)))))).

Ling-3.0 (bailing_moe_v3, LingReference), from mlx-lm's bailing_moe_v3 and
llama.cpp's bailingmoe3 MTP graph: its MTP layer model.layers.{L} is a
full-attention layer, multi-head latent attention under attention.* (as
GLM-4.7-Flash's, interleaved rotary) whose per-head outputs are scaled by a
head-wise sigmoid gate (attention.g_proj of the layer's normed input) before
attention.dense; the MoE routes as GLM's (sigmoid, mlp.gate.expert_bias for the
choice, n_group / topk_group) with shared_experts, no SwiGLU clamp (the
converter pads expert_swiglu_limit_list with 0 for the MTP layer); logits =
lm_head(final_layernorm(layer(eh_proj(concat(enorm(word_embeddings(t)), hnorm(h)))))).
Only the MTP layer is computed (the KDA trunk is llama.cpp's, its h_nextn the input).

DeepSeek-V4 (deepseek_v4, DeepSeekV4Reference): its MTP layer mtp.0 with
hyper-connections, from mlx-vlm's deepseek_v4 modelling code (see the class).

Computation is float64."""
import json
from pathlib import Path

import numpy as np

from reference import load_raw, silu, text_config


def rms_norm(x, w, eps):
    """Plain RMSNorm: the weight is applied as stored."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def llama3_inv_freq(inv, scaling):
    """llama3 RoPE scaling of the inverse frequencies inv, as its definition
    (Llama 3.1's, transformers' "llama3" rope type) says: a frequency whose
    wavelength is below original_max_position_embeddings / high_freq_factor
    kept, above original_max_position_embeddings / low_freq_factor divided by
    factor, in between blended linearly in original / wavelength."""
    factor = float(scaling.get("factor", 8.0))
    low, high = float(scaling.get("low_freq_factor", 1.0)), float(scaling.get("high_freq_factor", 4.0))
    old = float(scaling.get("original_max_position_embeddings", 8192))
    wavelen = 2 * np.pi / inv
    smooth = np.clip((old / wavelen - low) / (high - low), 0.0, 1.0)
    return (1 - smooth) * inv / factor + smooth * inv


def rope_half(x, positions, rot, theta, scaling=None):
    """Rotate-half (neox) rotary on the first rot dims of x [S, H, D], its
    frequencies llama3-scaled when scaling is given."""
    half = rot // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2.0 / rot)
    if scaling is not None:
        inv = llama3_inv_freq(inv, scaling)
    ang = positions[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)


def rope_interleaved(x, positions, theta):
    """Interleaved rotary on all of x [S, H, D]: pair (x[2i], x[2i+1]) turns by
    frequency i; the result is laid out evens first (transformers'
    apply_rotary_pos_emb_interleave; dot products do not see the layout)."""
    d = x.shape[-1]
    inv = theta ** (-np.arange(d // 2, dtype=np.float64) * 2.0 / d)
    ang = positions[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def causal_attention(q, k, v, past, scale):
    """q [S, Hq, D], k/v [T, Hkv, D*] with T = past + S; GQA by head groups."""
    S, Hq, T, Hkv = q.shape[0], q.shape[1], k.shape[0], k.shape[1]
    group = Hq // Hkv
    out = np.zeros((S, Hq, v.shape[-1]))
    mask = np.arange(T)[None, :] > (past + np.arange(S))[:, None]
    for h in range(Hq):
        scores = np.where(mask, -np.inf, q[:, h] @ k[:, h // group].T * scale)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, h] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, h // group]
    return out


class GLMReference:
    """A GLM-4.x checkpoint's trunk and NextN layer, each layer with its own KV cache."""

    def __init__(self, folder, weights=None, scaling=True):
        c = self.cfg = text_config(folder)
        rs = c.get("rope_scaling") if scaling else None
        if rs is not None:
            assert (rs.get("rope_type") or rs.get("type")).lower() == "llama3", rs
        self.scaling = {t: rs for t in ("full_attention", "sliding_attention")
                        if rs is not None and (not c.get("yarn_only_types") or t in c["yarn_only_types"])}
        self.w = weights if weights is not None else load_raw(folder)
        self.n_layer = c["num_hidden_layers"]
        self.eps = c.get("rms_norm_eps", 1e-5)
        rp = c.get("rope_parameters") or {}
        self.theta = float(rp.get("rope_theta", c.get("rope_theta", 10000.0)))
        self.mla = c.get("kv_lora_rank") is not None
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads", self.heads)
        if not self.mla:
            self.hd = c.get("head_dim") or c["hidden_size"] // self.heads
            self.rot = int(self.hd * rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.5)))
        self.dense_layers = c.get("first_k_dense_replace", 0)
        self.cache = {}
        self.nextn = f"model.layers.{self.n_layer}."

    def reset(self):
        self.cache = {}

    # --- blocks ---
    def attention(self, p, x, positions):
        w, S = self.w, x.shape[0]
        a = p + "self_attn."
        if self.mla:
            c = self.cfg
            nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
            if a + "q_a_proj.weight" in w:
                q = rms_norm(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], self.eps) @ w[a + "q_b_proj.weight"].T
            else:
                q = x @ w[a + "q_proj.weight"].T
            q = q.reshape(S, self.heads, nope + rope)
            ckv = x @ w[a + "kv_a_proj_with_mqa.weight"].T
            latent = rms_norm(ckv[:, :r], w[a + "kv_a_layernorm.weight"], self.eps)
            k_rot = rope_interleaved(ckv[:, None, r:], positions, self.theta)  # [S, 1, rope]
            q = np.concatenate([q[..., :nope], rope_interleaved(q[..., nope:], positions, self.theta)], axis=-1)
            kv = (latent @ w[a + "kv_b_proj.weight"].T).reshape(S, self.heads, nope + vd)
            k = np.concatenate([kv[..., :nope], np.broadcast_to(k_rot, (S, self.heads, rope))], axis=-1)
            v = kv[..., nope:]
            scale = (nope + rope) ** -0.5
        else:
            def proj(n, heads):
                y = x @ w[a + n + ".weight"].T
                if a + n + ".bias" in w:
                    y = y + w[a + n + ".bias"]
                return y.reshape(S, heads, self.hd)
            q, k, v = proj("q_proj", self.heads), proj("k_proj", self.kv_heads), proj("v_proj", self.kv_heads)
            if a + "q_norm.weight" in w:
                q = rms_norm(q, w[a + "q_norm.weight"], self.eps)
                k = rms_norm(k, w[a + "k_norm.weight"], self.eps)
            q, k = rope_half(q, positions, self.rot, self.theta), rope_half(k, positions, self.rot, self.theta)
            scale = self.hd ** -0.5
        ck, cv = self.cache.get(p, (None, None))
        ck = k if ck is None else np.concatenate([ck, k])
        cv = v if cv is None else np.concatenate([cv, v])
        self.cache[p] = (ck, cv)
        out = causal_attention(q, ck, cv, ck.shape[0] - S, scale).reshape(S, -1)
        y = out @ w[a + "o_proj.weight"].T
        if a + "o_proj.bias" in w:
            y = y + w[a + "o_proj.bias"]
        return y

    def mlp(self, p, x, dense):
        w, m = self.w, p + "mlp."
        if dense:
            return (silu(x @ w[m + "gate_proj.weight"].T) * (x @ w[m + "up_proj.weight"].T)) @ w[m + "down_proj.weight"].T
        return self.moe(m, x)

    def route(self, m, x):
        """(indices, weights) per token, as Glm4MoeTopkRouter computes them."""
        c = self.cfg
        scores = sigmoid(x @ self.w[m + "gate.weight"].T)  # [S, E]
        choice = scores + self.w[m + "gate.e_score_correction_bias"]
        E, G, K = scores.shape[1], c.get("n_group", 1), c["num_experts_per_tok"]
        out = []
        for s in range(x.shape[0]):
            grouped = choice[s].reshape(G, E // G)
            group_scores = np.sort(grouped, axis=-1)[:, -2:].sum(axis=-1)
            keep = np.argsort(-group_scores, kind="stable")[: c.get("topk_group", 1)]
            masked = np.full(E, -np.inf)
            for g in keep:
                masked[g * (E // G):(g + 1) * (E // G)] = choice[s, g * (E // G):(g + 1) * (E // G)]
            top = np.argsort(-masked, kind="stable")[:K]
            weights = scores[s, top]
            if c.get("norm_topk_prob", True):
                weights = weights / (weights.sum() + 1e-20)
            out.append((top, weights * c.get("routed_scaling_factor", 1.0)))
        return out

    # The shared expert under a MoE block (None: the family has none).
    shared = "shared_experts."

    def swiglu(self, gate, up):
        return silu(gate) * up

    def moe(self, m, x):
        w = self.w
        out = np.zeros_like(x)
        for s, (top, weights) in enumerate(self.route(m, x)):
            for e, g in zip(top, weights):
                q = f"{m}experts.{e}."
                out[s] += g * (w[q + "down_proj.weight"] @ self.swiglu(w[q + "gate_proj.weight"] @ x[s], w[q + "up_proj.weight"] @ x[s]))
        if self.shared is None:
            return out
        sh = m + self.shared
        return out + self.swiglu(x @ w[sh + "gate_proj.weight"].T, x @ w[sh + "up_proj.weight"].T) @ w[sh + "down_proj.weight"].T

    def layer(self, i, x, positions):
        p, w = f"model.layers.{i}.", self.w
        x = x + self.attention(p, rms_norm(x, w[p + "input_layernorm.weight"], self.eps), positions)
        return x + self.mlp(p, rms_norm(x, w[p + "post_attention_layernorm.weight"], self.eps), i < self.dense_layers)

    # --- model ---
    def trunk(self, tokens, positions):
        """(hidden after the final norm [S, H], logits [S, V]) for the next tokens."""
        x = self.w["model.embed_tokens.weight"][np.asarray(tokens)]
        for i in range(self.n_layer):
            x = self.layer(i, x, positions)
        h = rms_norm(x, self.w["model.norm.weight"], self.eps)
        return h, h @ self.w["lm_head.weight"].T

    def nextn_hidden(self, tokens, hidden, positions):
        """The NextN layer's output after shared_head.norm, for tokens t_{p+1}
        paired with the trunk's hidden states h_p (post final norm)."""
        w, p = self.w, self.nextn
        emb = w.get(p + "embed_tokens.weight", w["model.embed_tokens.weight"])[np.asarray(tokens)]
        e = rms_norm(emb, w[p + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(self.n_layer, x, positions)
        return rms_norm(x, w[p + "shared_head.norm.weight"], self.eps)

    def nextn_logits(self, tokens, hidden, positions):
        head = self.w.get(self.nextn + "shared_head.head.weight", self.w["lm_head.weight"])
        return self.nextn_hidden(tokens, hidden, positions) @ head.T


def layer_norm(x, w, eps):
    """LayerNorm without a bias: the mean subtracted, then scaled by w."""
    x = x - x.mean(axis=-1, keepdims=True)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


class NemotronHReference(GLMReference):
    """Nemotron-H MoE's MTP head (transformers / vLLM nemotron_h_mtp math, the
    checkpoint's layout), fed the trunk's hidden state after its final norm:
    mtp.layers.0 fuses concat(enorm(embed(t)), hnorm(h)) by eh_proj, embedding
    first, then runs a pre-norm attention sub-layer without positions (GQA,
    scale head_dim^-0.5); mtp.layers.1 a pre-norm MoE sub-layer: sigmoid router
    scores plus e_score_correction_bias for the choice (groups as DeepSeek's),
    weights from the uncorrected scores, renormalised, times
    routed_scaling_factor; ReLU² experts without a gate (up, down) run in the
    latent space between fc1_latent_proj and fc2_latent_proj when the config has
    moe_latent_size; plus one ReLU² shared expert on the sub-layer's input; then
    final_layernorm and the trunk's lm_head. final_layernorm is an RMSNorm in
    the modelling code (vLLM, mlx-vlm) but a LayerNorm in llama.cpp's graph
    (src/models/nemotron-h-moe.cpp: LLM_NORM): final_norm says which."""

    def __init__(self, folder, weights=None, final_norm="rms"):
        c = self.cfg = text_config(folder)
        self.w = weights if weights is not None else load_raw(folder)
        self.n_layer = c["num_hidden_layers"]
        self.eps = c.get("layer_norm_epsilon", 1e-5)
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads", self.heads)
        self.hd = c.get("head_dim", 128)
        self.final_norm = final_norm
        self.cache = {}

    def nemotron_attention(self, p, x):
        w, S = self.w, x.shape[0]
        a = p + "mixer."
        q = (x @ w[a + "q_proj.weight"].T).reshape(S, self.heads, self.hd)
        k = (x @ w[a + "k_proj.weight"].T).reshape(S, self.kv_heads, self.hd)
        v = (x @ w[a + "v_proj.weight"].T).reshape(S, self.kv_heads, self.hd)
        ck, cv = self.cache.get(p, (None, None))
        ck = k if ck is None else np.concatenate([ck, k])
        cv = v if cv is None else np.concatenate([cv, v])
        self.cache[p] = (ck, cv)
        out = causal_attention(q, ck, cv, ck.shape[0] - S, self.hd ** -0.5).reshape(S, -1)
        return out @ w[a + "o_proj.weight"].T

    def nemotron_moe(self, p, x):
        w, m = self.w, p + "mixer."
        relu2 = lambda y: np.maximum(y, 0.0) ** 2
        lat = x @ w[m + "fc1_latent_proj.weight"].T if m + "fc1_latent_proj.weight" in w else x
        routed = np.zeros_like(lat)
        for s, (top, weights) in enumerate(self.route(m, x)):
            for e, g in zip(top, weights):
                q = f"{m}experts.{e}."
                routed[s] += g * (w[q + "down_proj.weight"] @ relu2(w[q + "up_proj.weight"] @ lat[s]))
        if m + "fc2_latent_proj.weight" in w:
            routed = routed @ w[m + "fc2_latent_proj.weight"].T
        sh = m + "shared_experts."
        return routed + relu2(x @ w[sh + "up_proj.weight"].T) @ w[sh + "down_proj.weight"].T

    def nextn_hidden(self, tokens, hidden, positions):
        w, p0, p1 = self.w, "mtp.layers.0.", "mtp.layers.1."
        emb = w["backbone.embeddings.weight"][np.asarray(tokens)]
        e = rms_norm(emb, w[p0 + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p0 + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p0 + "eh_proj.weight"].T
        x = x + self.nemotron_attention(p0, rms_norm(x, w[p0 + "norm.weight"], self.eps))
        x = x + self.nemotron_moe(p1, rms_norm(x, w[p1 + "norm.weight"], self.eps))
        norm = layer_norm if self.final_norm == "layer" else rms_norm
        return norm(x, w[p1 + "final_layernorm.weight"], self.eps)

    def nextn_logits(self, tokens, hidden, positions):
        return self.nextn_hidden(tokens, hidden, positions) @ self.w["lm_head.weight"].T


def causal_attention_swa(q, k, v, positions, key_positions, scale, window):
    """Causal attention over keys at key_positions for queries at positions, GQA by
    head groups; with window, a key p0 is masked for the query p1 when
    p1 - p0 >= window (llama.cpp's LLAMA_SWA_TYPE_STANDARD)."""
    Hq, Hkv = q.shape[1], k.shape[1]
    group = Hq // Hkv
    out = np.zeros((q.shape[0], Hq, v.shape[-1]))
    diff = positions[:, None] - key_positions[None, :]
    mask = diff < 0
    if window:
        mask |= diff >= window
    for h in range(Hq):
        scores = np.where(mask, -np.inf, q[:, h] @ k[:, h // group].T * scale)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[:, h] = (scores / scores.sum(axis=-1, keepdims=True)) @ v[:, h // group]
    return out


class Step35Reference:
    """A Step-3.5 checkpoint (Step3p5ForCausalLM) as llama.cpp's step35 graphs
    compute it (src/models/step35.cpp), written from that graph and the
    config's meaning, not from mtpconv's Go code:

    - every RMSNorm zero-centred (1 + w);
    - per layer (MTP layers included, layer_types and partial_rotary_factors
      padded to L + n as the converter pads them): GQA with per-head q/k norms;
      full-attention layers with num_attention_heads / num_attention_groups,
      neox RoPE on half of head_dim at rope_theta[0]; sliding-window layers with
      attention_other_setting's heads, neox RoPE on all of head_dim at
      rope_theta[1], keys p0 masked for the query p1 when p1 - p0 >=
      sliding_window; scale head_dim^-0.5; the head-wise gate
      sigmoid(g_proj(normed input)), one value per head, on the attention
      output before o_proj;
    - a dense SwiGLU MLP, or in the moe_layers_enum layers the routed experts
      (sigmoid of moe.gate, moe.router_bias added for the choice only, top-k,
      the chosen probabilities renormalised when norm_expert_weight, times
      moe_router_scaling_factor; experts stacked [E, out, in]) plus share_expert;
    - the trunk's h_nextn is its last layer's output before the final norm;
    - MTP layer j (model.layers.{L+j}): logits =
      shared_head.output(shared_head.norm(layer(eh_proj(concat(enorm(embed(t)),
      hnorm(h)))))), embedding first, each layer its own KV cache; chained,
      layer j reads the h_nextn (its output before the norm) of layer j-1.

    Step-3.7 (its config nested as text_config): llama3 rope_scaling applied
    to the RoPE of the layer types yarn_only_types lists (every layer without
    it), as vLLM's and transformers' Step models apply it; llama.cpp's step35
    reads the converter's rope_freqs in full-attention layers. With
    scaling=False the reference ignores rope_scaling (to show it matters).

    SwiGLU clamps (swiglu_limits) are not modelled: the fixture's are 0 (none).
    Computation is float64."""

    def __init__(self, folder, weights=None, scaling=True):
        c = self.cfg = text_config(folder)
        rs = c.get("rope_scaling") if scaling else None
        if rs is not None:
            assert (rs.get("rope_type") or rs.get("type")).lower() == "llama3", rs
        self.scaling = {t: rs for t in ("full_attention", "sliding_attention")
                        if rs is not None and (not c.get("yarn_only_types") or t in c["yarn_only_types"])}
        self.w = weights if weights is not None else load_raw(folder)
        self.n_layer = c["num_hidden_layers"]
        self.n_mtp = c.get("num_nextn_predict_layers", 0)
        total = self.n_layer + self.n_mtp
        types = list(c.get("layer_types") or [])
        self.types = (types + ["full_attention"] * total)[:total]
        self.eps = c.get("rms_norm_eps", 1e-5)
        th = c.get("rope_theta", 10000.0)
        self.theta, self.theta_swa = (float(th[0]), float(th[1])) if isinstance(th, list) else (float(th), float(th))
        self.hd = c["head_dim"]
        other = c.get("attention_other_setting") or {}
        self.heads_full = (c["num_attention_heads"], c["num_attention_groups"])
        self.heads_swa = (other.get("num_attention_heads", c["num_attention_heads"]),
                          other.get("num_attention_groups", c["num_attention_groups"]))
        self.window = c["sliding_window"]
        enum = c.get("moe_layers_enum")
        self.moe_layers = {int(i) for i in enum.split(",") if i.strip()} if enum is not None else set(range(1, self.n_layer))
        self.cache = {}

    def reset(self):
        self.cache = {}

    def norm(self, x, name):
        return rms_norm(x, 1.0 + self.w[name], self.eps)

    def attention(self, i, p, x, positions):
        w, S, hd = self.w, x.shape[0], self.hd
        a = p + "self_attn."
        swa = self.types[i] == "sliding_attention"
        nh, nkv = self.heads_swa if swa else self.heads_full
        q = (x @ w[a + "q_proj.weight"].T).reshape(S, nh, hd)
        k = (x @ w[a + "k_proj.weight"].T).reshape(S, nkv, hd)
        v = (x @ w[a + "v_proj.weight"].T).reshape(S, nkv, hd)
        q, k = self.norm(q, a + "q_norm.weight"), self.norm(k, a + "k_norm.weight")
        rot, theta = (hd, self.theta_swa) if swa else (hd // 2, self.theta)
        rs = self.scaling.get(self.types[i])
        q, k = rope_half(q, positions, rot, theta, rs), rope_half(k, positions, rot, theta, rs)
        ck, cv, cp = self.cache.get(p, (None, None, None))
        ck = k if ck is None else np.concatenate([ck, k])
        cv = v if cv is None else np.concatenate([cv, v])
        cp = positions if cp is None else np.concatenate([cp, positions])
        self.cache[p] = (ck, cv, cp)
        out = causal_attention_swa(q, ck, cv, positions, cp, hd ** -0.5, self.window if swa else 0)
        if a + "g_proj.weight" in w:
            out = out * sigmoid(x @ w[a + "g_proj.weight"].T)[:, :, None]
        return out.reshape(S, -1) @ w[a + "o_proj.weight"].T

    def ffn(self, i, p, x):
        w, c = self.w, self.cfg
        if i not in self.moe_layers:
            m = p + "mlp."
            return (silu(x @ w[m + "gate_proj.weight"].T) * (x @ w[m + "up_proj.weight"].T)) @ w[m + "down_proj.weight"].T
        m = p + "moe."
        probs = sigmoid(x @ w[m + "gate.weight"].T)  # [S, E]
        choice = probs + w[m + "router_bias"]
        out = np.zeros_like(x)
        for s in range(x.shape[0]):
            top = np.argsort(-choice[s], kind="stable")[: c["moe_top_k"]]
            weights = probs[s, top]
            if c.get("norm_expert_weight", True):
                weights = weights / max(weights.sum(), 6.103515625e-5)
            weights = weights * c.get("moe_router_scaling_factor", 1.0)
            for e, g in zip(top, weights):
                y = silu(w[m + "gate_proj.weight"][e] @ x[s]) * (w[m + "up_proj.weight"][e] @ x[s])
                out[s] += g * (w[m + "down_proj.weight"][e] @ y)
        sh = p + "share_expert."
        return out + (silu(x @ w[sh + "gate_proj.weight"].T) * (x @ w[sh + "up_proj.weight"].T)) @ w[sh + "down_proj.weight"].T

    def layer(self, i, x, positions):
        p = f"model.layers.{i}."
        x = x + self.attention(i, p, self.norm(x, p + "input_layernorm.weight"), positions)
        return x + self.ffn(i, p, self.norm(x, p + "post_attention_layernorm.weight"))

    def trunk(self, tokens, positions):
        """(h_nextn: the last layer's output before the final norm [S, H], logits [S, V])."""
        x = self.w["model.embed_tokens.weight"][np.asarray(tokens)]
        for i in range(self.n_layer):
            x = self.layer(i, x, positions)
        return x, self.norm(x, "model.norm.weight") @ self.w["lm_head.weight"].T

    def nextn(self, tokens, hidden, positions, head=0):
        """MTP layer head's (h_nextn: its output before the shared head's norm,
        logits) for tokens t_{p+1} paired with hidden states h_p."""
        w, i = self.w, self.n_layer + head
        p = f"model.layers.{i}."
        e = self.norm(w["model.embed_tokens.weight"][np.asarray(tokens)], p + "enorm.weight")
        h = self.norm(hidden, p + "hnorm.weight")
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(i, x, positions)
        return x, self.norm(x, p + "transformer.shared_head.norm.weight") @ w[p + "transformer.shared_head.output.weight"].T

    def chained_logits(self, tokens, hidden, depth):
        """The heads chained as llama.cpp's draft-mtp driver chains them
        (interop/mtp_logits.cpp --depth): head j, on a cache of its own, reads
        t_{1+j}..t_{n-1} at positions 1+j..n-1, row k paired with head j-1's
        h_nextn of its row k (the trunk's h_k for j = 0). One logits array per depth."""
        out, prev = [], hidden[:-1]
        for j in range(depth):
            pos = np.arange(1 + j, len(tokens))
            prev, logits = self.nextn(tokens[1 + j:], prev[: len(pos)], pos, head=j)
            out.append(logits)
        return out


class Glm5NextReference(GLMReference):
    """GLM-5.3-Flash's NextN layer (model.language_model.layers.{L}), written
    from the transformers glm5_next modelling code's math: nope-only
    multi-head latent attention (no rotary part: qk_rope_head_dim 0, scale
    qk_nope_head_dim^-0.5) whose DSA indexer selects index_topk // index_kpool
    pools of index_kpool positions plus the incomplete tail, so every causal
    position while the context fits (the reference runs it dense, and its
    callers keep the context that short); DeepSeek-V3's sigmoid MoE with the
    SwiGLU clamp (gate at most swiglu_limit, up within ±swiglu_limit) in the
    routed and the shared experts. The trunk (KDA layers, mHC streams) is not
    modelled: the layer is fed the trunk's hidden states."""

    def __init__(self, folder, weights=None):
        super().__init__(folder, weights)
        c = self.cfg
        assert c.get("qk_rope_head_dim", 0) == 0 and c["num_nextn_predict_layers"] == 1
        self.limit = float(c.get("swiglu_limit", 10.0))
        self.text = "model.language_model."
        self.nextn = f"{self.text}layers.{self.n_layer}."
        n_ctx = c["index_topk"] + c["index_kpool"] - 1
        self.max_context = n_ctx

    def swiglu(self, gate, up):
        return silu(np.minimum(gate, self.limit)) * np.clip(up, -self.limit, self.limit)

    def layer(self, i, x, positions):
        assert i == self.n_layer and x.shape[0] <= self.max_context, "the reference models the NextN layer, at a context the indexer keeps whole"
        p, w = self.nextn, self.w
        x = x + self.attention(p, rms_norm(x, w[p + "input_layernorm.weight"], self.eps), positions)
        return x + self.moe(p + "mlp.", rms_norm(x, w[p + "post_attention_layernorm.weight"], self.eps))

    def nextn_logits(self, tokens, hidden, positions):
        emb = self.w[self.text + "embed_tokens.weight"]
        w, p = self.w, self.nextn
        e = rms_norm(emb[np.asarray(tokens)], w[p + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(self.n_layer, x, positions)
        return rms_norm(x, w[p + "shared_head.norm.weight"], self.eps) @ w["lm_head.weight"].T


class HY3Reference(GLMReference):
    """A Hy3 checkpoint's trunk and chained MTP layers, each layer with its own KV cache."""

    shared = "shared_mlp."

    def __init__(self, folder, weights=None):
        super().__init__(folder, weights)
        self.rot = self.hd  # full rotary
        self.dense_layers = self.cfg.get("first_k_dense_replace", 1)

    def route(self, m, x):
        """(indices, weights) per token, as HYV3TopKRouter computes them."""
        c = self.cfg
        scores = sigmoid(x @ self.w[m + "router.gate.weight"].T)  # [S, E]
        choice = scores + self.w[m + "expert_bias"]
        out = []
        for s in range(x.shape[0]):
            top = np.argsort(-choice[s], kind="stable")[: c["num_experts_per_tok"]]
            weights = scores[s, top]
            if c.get("route_norm", True):
                weights = weights / (weights.sum() + 1e-20)
            out.append((top, weights * c.get("router_scaling_factor", 2.826)))
        return out

    def nextn_hidden(self, tokens, hidden, positions, depth=0):
        """MTP layer depth's output after its final_layernorm, for tokens
        paired with the hidden states of the depth before (post norm)."""
        w, i = self.w, self.n_layer + depth
        p = f"model.layers.{i}."
        emb = w.get(p + "embed_tokens.weight", w["model.embed_tokens.weight"])[np.asarray(tokens)]
        e = rms_norm(emb, w[p + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(i, x, positions)
        return rms_norm(x, w[p + "final_layernorm.weight"], self.eps)

    def nextn_logits(self, tokens, hidden, positions, depth=0):
        p = f"model.layers.{self.n_layer + depth}."
        head = self.w.get(p + "shared_head.head.weight", self.w["lm_head.weight"])
        return self.nextn_hidden(tokens, hidden, positions, depth) @ head.T


class LingReference(GLMReference):
    """A Ling-3.0 checkpoint's MTP layer (the trunk is not computed)."""

    def __init__(self, folder, weights=None):
        super().__init__(folder, weights)
        self.mla = True
        self.dense_layers = self.cfg.get("first_k_dense_replace", 1)
        p = f"{self.nextn}mlp.gate."
        # The routing is GLM's; Ling names the correction bias expert_bias.
        self.w[p + "e_score_correction_bias"] = self.w[p + "expert_bias"]

    def attention(self, p, x, positions):
        w, S, c = self.w, x.shape[0], self.cfg
        a = p + "attention."
        nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
        if a + "q_a_proj.weight" in w:
            q = rms_norm(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], self.eps) @ w[a + "q_b_proj.weight"].T
        else:
            q = x @ w[a + "q_proj.weight"].T
        q = q.reshape(S, self.heads, nope + rope)
        ckv = x @ w[a + "kv_a_proj_with_mqa.weight"].T
        latent = rms_norm(ckv[:, :r], w[a + "kv_a_layernorm.weight"], self.eps)
        k_rot = rope_interleaved(ckv[:, None, r:], positions, self.theta)
        q = np.concatenate([q[..., :nope], rope_interleaved(q[..., nope:], positions, self.theta)], axis=-1)
        kv = (latent @ w[a + "kv_b_proj.weight"].T).reshape(S, self.heads, nope + vd)
        k = np.concatenate([kv[..., :nope], np.broadcast_to(k_rot, (S, self.heads, rope))], axis=-1)
        v = kv[..., nope:]
        ck, cv = self.cache.get(p, (None, None))
        ck = k if ck is None else np.concatenate([ck, k])
        cv = v if cv is None else np.concatenate([cv, v])
        self.cache[p] = (ck, cv)
        out = causal_attention(q, ck, cv, ck.shape[0] - S, (nope + rope) ** -0.5)  # [S, heads, vd]
        gate = sigmoid(x @ w[a + "g_proj.weight"].T)  # [S, heads]
        return (out * gate[:, :, None]).reshape(S, -1) @ w[a + "dense.weight"].T

    def nextn_hidden(self, tokens, hidden, positions):
        w, p = self.w, self.nextn
        e = rms_norm(w["model.word_embeddings.weight"][np.asarray(tokens)], w[p + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(self.n_layer, x, positions)
        return rms_norm(x, w[p + "final_layernorm.weight"], self.eps)

    def nextn_logits(self, tokens, hidden, positions):
        return self.nextn_hidden(tokens, hidden, positions) @ self.w["lm_head.weight"].T


def sliding_sink_attention(q, k, v, past, scale, window=None, sinks=None):
    """causal_attention with, when window is set, keys at most window - 1
    positions behind the query (the query's own included: window keys), and,
    when sinks [Hq] are given, one learned logit per head in the softmax
    (gpt-oss style: a column whose probability is dropped)."""
    S, Hq, T, Hkv = q.shape[0], q.shape[1], k.shape[0], k.shape[1]
    group = Hq // Hkv
    out = np.zeros((S, Hq, v.shape[-1]))
    qpos, kpos = past + np.arange(S), np.arange(T)
    mask = kpos[None, :] > qpos[:, None]
    if window is not None:
        mask |= qpos[:, None] - kpos[None, :] >= window
    for h in range(Hq):
        scores = np.where(mask, -np.inf, q[:, h] @ k[:, h // group].T * scale)
        top = scores.max(axis=-1, keepdims=True)
        if sinks is not None:
            top = np.maximum(top, sinks[h])
        p = np.exp(scores - top)
        denom = p.sum(axis=-1, keepdims=True)
        if sinks is not None:
            denom = denom + np.exp(sinks[h] - top)
        out[:, h] = (p / denom) @ v[:, h // group]
    return out


class MiMoReference(GLMReference):
    """A MiMo-V2.5 checkpoint (modelling code: vLLM's mimo_v2.py and
    mimo_v2_mtp.py; the checkpoints' layout), written from that math, not
    from mtpconv's Go code:

    - hybrid_layer_pattern: 0 full attention (num_key_value_heads, rope_theta),
      1 sliding-window attention over sliding_window positions
      (swa_num_key_value_heads, swa_rope_theta), with learned per-head
      softmax sinks (attention_sink_bias) where add_swa_attention_sink_bias /
      add_full_attention_sink_bias say;
    - q/k/v fused in qkv_proj ([Q | K | V] rows), q/k heads of head_dim, v
      heads of v_head_dim, rotate-half rotary on head_dim *
      partial_rotary_factor dims, scale head_dim^-0.5, the attention output
      times attention_value_scale;
    - moe_layer_freq: 0 a dense SwiGLU MLP, 1 a MoE with sigmoid scores,
      e_score_correction_bias for the choice, top-k weights renormalised, no
      shared expert; plain RMSNorms of layernorm_epsilon;
    - MTP layer j (model.mtp.layers.{j}): x = eh_proj(concat(enorm(embed(t)),
      hnorm(h))), embedding first, h the hidden state before the final norm
      (llama.cpp's h_nextn); then a sliding-window layer with sinks
      (input_layernorm, self_attn, pre_mlp_layernorm, a dense MLP); logits =
      lm_head(final_layernorm(x))."""

    shared = None  # its MoE blocks have no shared expert

    def __init__(self, folder, weights=None):
        super().__init__(folder, weights)
        c = self.cfg
        self.eps = c.get("layernorm_epsilon") or 1e-5
        self.hybrid = list(c["hybrid_layer_pattern"])
        self.moe_freq = list(c["moe_layer_freq"])
        self.vhd = c["v_head_dim"]
        self.window = c["sliding_window"]
        self.swa_theta = float(c.get("swa_rope_theta", self.theta))
        self.value_scale = c.get("attention_value_scale") or 1.0

    def swa(self, i):
        return i >= self.n_layer or self.hybrid[i] == 1

    def attention_of(self, i, p, x, positions):
        w, c, S = self.w, self.cfg, x.shape[0]
        a = p + "self_attn."
        swa = self.swa(i)
        kvh = c["swa_num_key_value_heads"] if swa else c["num_key_value_heads"]
        qkv = x @ w[a + "qkv_proj.weight"].T
        nq, nk = self.heads * self.hd, kvh * self.hd
        q = qkv[:, :nq].reshape(S, self.heads, self.hd)
        k = qkv[:, nq:nq + nk].reshape(S, kvh, self.hd)
        v = qkv[:, nq + nk:].reshape(S, kvh, self.vhd)
        theta = self.swa_theta if swa else self.theta
        q, k = rope_half(q, positions, self.rot, theta), rope_half(k, positions, self.rot, theta)
        ck, cv = self.cache.get(p, (None, None))
        ck = k if ck is None else np.concatenate([ck, k])
        cv = v if cv is None else np.concatenate([cv, v])
        self.cache[p] = (ck, cv)
        sinks = w.get(a + "attention_sink_bias")
        out = sliding_sink_attention(q, ck, cv, ck.shape[0] - S, self.hd ** -0.5, self.window if swa else None, sinks)
        return (out.reshape(S, -1) @ w[a + "o_proj.weight"].T) * self.value_scale

    def route(self, m, x):
        c = dict(self.cfg)
        c["routed_scaling_factor"] = c.get("routed_scaling_factor") or 1.0  # null in the releases
        self.cfg, saved = c, self.cfg
        try:
            return super().route(m, x)
        finally:
            self.cfg = saved

    def layer(self, i, x, positions):
        w = self.w
        if i < self.n_layer:
            p, post, dense = f"model.layers.{i}.", "post_attention_layernorm.weight", self.moe_freq[i] == 0
        else:
            p, post, dense = f"model.mtp.layers.{i - self.n_layer}.", "pre_mlp_layernorm.weight", True
        x = x + self.attention_of(i, p, rms_norm(x, w[p + "input_layernorm.weight"], self.eps), positions)
        return x + self.mlp(p, rms_norm(x, w[p + post], self.eps), dense)

    def trunk(self, tokens, positions):
        """(hidden before the final norm [S, H], logits [S, V]): MiMo's MTP takes the former."""
        x = self.w["model.embed_tokens.weight"][np.asarray(tokens)]
        for i in range(self.n_layer):
            x = self.layer(i, x, positions)
        return x, rms_norm(x, self.w["model.norm.weight"], self.eps) @ self.w["lm_head.weight"].T

    def mtp_layer(self, tokens, hidden, positions, head=0):
        """MTP layer head for tokens t_{p+1} paired with hidden states h_p:
        (its hidden state before final_layernorm, which the next head takes, and its logits)."""
        w, p = self.w, f"model.mtp.layers.{head}."
        e = rms_norm(w["model.embed_tokens.weight"][np.asarray(tokens)], w[p + "enorm.weight"], self.eps)
        h = rms_norm(hidden, w[p + "hnorm.weight"], self.eps)
        x = np.concatenate([e, h], axis=-1) @ w[p + "eh_proj.weight"].T
        x = self.layer(self.n_layer + head, x, positions)
        return x, rms_norm(x, w[p + "final_layernorm.weight"], self.eps) @ w["lm_head.weight"].T

    def chained_logits(self, tokens, hidden, depth):
        """The heads 0..depth-1 chained as llama.cpp's draft-mtp driver runs
        them, teacher forced: head j on t_{1+j}..t_{n-1} at positions 1+j..,
        row k paired with head j-1's hidden row k (the trunk's for j = 0)."""
        out, prev = [], hidden[:-1]
        for j in range(depth):
            n = len(tokens)
            x, logits = self.mtp_layer(tokens[1 + j:], prev[:n - 1 - j], np.arange(1 + j, n), head=j)
            out.append(logits)
            prev = x
        return out


FP4_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def load_dsv4(folder, prefixes):
    """DeepSeek-V4's tensors whose names start with one of prefixes, as
    float64: the FP4 routed experts (I8 codes two to a byte, element 2i in
    the low nibble; an F8_E8M0 scale 2^(s - 127) per 32 inputs) decoded from
    the formats' definitions, the hash table as integers."""
    import safetensors
    from reference import to_f64
    folder = Path(folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    raw = {}
    for shard in sorted(set(index["weight_map"].values())):
        for name, t in safetensors.deserialize((folder / shard).read_bytes()):
            if name.startswith(prefixes):
                raw[name] = (bytes(t["data"]), t["dtype"].upper(), t["shape"])
    out = {}
    for name, (data, dtype, shape) in raw.items():
        if dtype == "I8":
            codes = np.frombuffer(data, dtype=np.uint8).reshape(shape)
            nib = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(shape[0], 2 * shape[1])
            sdata, sdtype, sshape = raw[name[: -len(".weight")] + ".scale"]
            assert sdtype == "F8_E8M0", (name, sdtype)
            scale = 2.0 ** (np.frombuffer(sdata, dtype=np.uint8).astype(np.float64) - 127).reshape(sshape)
            out[name] = FP4_E2M1[nib] * np.repeat(scale, 32, axis=1)
        elif dtype == "I32":
            out[name] = np.frombuffer(data, dtype=np.int32).reshape(shape)
        elif dtype != "F8_E8M0":
            out[name] = to_f64(data, dtype, shape)
    return out


class DeepSeekV4Reference:
    """DeepSeek-V4's MTP layer (mtp.0.*), from mlx-vlm 0.7.10's deepseek_v4
    modelling code and its deepseek_v4_mtp drafter: the draft input is the
    trunk's hc_mult hyper-connection streams before its hc_head, [S, hc, D].

    h = e_proj(enorm(embed(t))) added to h_proj(hnorm(stream)) of every
    stream; then the decoder layer, each of its two branches wrapped in a
    hyper-connection: the streams flattened and RMS-normalised (no weight)
    give mixes = fn · z, from which pre = sigmoid(mixes[:hc] · scale0 +
    base) + hc_eps, post = 2 sigmoid(mixes[hc:2hc] · scale1 + base) and a
    hc × hc stream mix, softmax(mixes[2hc:] · scale2 + base) + hc_eps made
    doubly stochastic by hc_sinkhorn_iters alternating normalisations (the
    first of columns only); the branch reads norm(Σ pre_i stream_i) and the
    streams become post_j · branch + Σ_i comb_ij stream_i. The attention:
    q = rms(wq_b(q_norm(wq_a x))) per head (no weight), one key-value head
    kv_norm(wkv x), both rotated on their last qk_rope_head_dim dims
    (interleaved pairs, rope_theta, no scaling: the MTP layer does not
    compress), softmax over keys with a per-head sink, head_dim^-0.5, the
    output rotated back, then wo_a per group of heads and wo_b. The MoE:
    sqrt(softplus(router)) scores, the bias added for the choice only, top-k,
    renormalised, × routed_scaling_factor, SwiGLU clamped at swiglu_limit
    (gate above, up both sides), plus the shared expert. Logits =
    head(norm(Σ pre_i stream_i)) with the layer's own hc_head (pre only).
    Computation is float64."""

    def __init__(self, folder):
        with open(Path(folder) / "config.json") as f:
            self.c = json.load(f)
        self.w = load_dsv4(folder, ("mtp.0.", "embed.", "head."))
        self.eps, self.hc = self.c["rms_norm_eps"], self.c["hc_mult"]

    def rope(self, x, positions, inverse=False):
        """Interleaved rotary on the last qk_rope_head_dim dims of x [S, H, D]."""
        r = self.c["qk_rope_head_dim"]
        inv = float(self.c["rope_theta"]) ** (-np.arange(0, r, 2, dtype=np.float64) / r)
        ang = positions[:, None].astype(np.float64) * inv[None, :] * (-1 if inverse else 1)
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        rot = x[..., -r:]
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.empty_like(rot)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
        return np.concatenate([x[..., :-r], out], axis=-1)

    def attention(self, x, positions):
        w, c, p = self.w, self.c, "mtp.0.attn."
        S, H, hd = x.shape[0], c["num_attention_heads"], c["head_dim"]
        q = (rms_norm(x @ w[p + "wq_a.weight"].T, w[p + "q_norm.weight"], self.eps) @ w[p + "wq_b.weight"].T).reshape(S, H, hd)
        q = self.rope(rms_norm(q, 1.0, self.eps), positions)
        kv = self.rope(rms_norm(x @ w[p + "wkv.weight"].T, w[p + "kv_norm.weight"], self.eps)[:, None, :], positions)
        out = sliding_sink_attention(q, kv, kv, 0, hd ** -0.5, c["sliding_window"], w[p + "attn_sink"])
        out = self.rope(out, positions, inverse=True)
        G, rank = c["o_groups"], c["o_lora_rank"]
        wo_a = w[p + "wo_a.weight"].reshape(G, rank, -1)
        grouped = np.concatenate([out[:, g * H // G:(g + 1) * H // G].reshape(S, -1) @ wo_a[g].T for g in range(G)], axis=-1)
        return grouped @ w[p + "wo_b.weight"].T

    def swiglu(self, x, p):
        lim, w = self.c["swiglu_limit"], self.w
        gate = np.minimum(x @ w[p + "w1.weight"].T, lim)
        up = np.clip(x @ w[p + "w3.weight"].T, -lim, lim)
        return (silu(gate) * up) @ w[p + "w2.weight"].T

    def moe(self, x):
        w, c, p = self.w, self.c, "mtp.0.ffn."
        scores = np.sqrt(np.logaddexp(0, x @ w[p + "gate.weight"].T))
        k = c["num_experts_per_tok"]
        out = self.swiglu(x, p + "shared_experts.")
        for s in range(x.shape[0]):
            inds = np.argsort(-(scores[s] + w[p + "gate.bias"]), kind="stable")[:k]
            wts = scores[s, inds]
            if c["norm_topk_prob"]:
                wts = wts / (wts.sum() + 1e-20)
            for e, wt in zip(inds, wts * c["routed_scaling_factor"]):
                out[s] += wt * self.swiglu(x[s:s + 1], f"{p}experts.{e}.")[0]
        return out

    def hyper(self, x, p, norm, branch):
        w, hc, S = self.w, self.hc, x.shape[0]
        eps = self.c["hc_eps"]
        fn, base, scale = w[p + "_fn"], w[p + "_base"], w[p + "_scale"]
        mixes = rms_norm(x.reshape(S, -1), 1.0, self.eps) @ fn.T
        pre = sigmoid(mixes[:, :hc] * scale[0] + base[:hc]) + eps
        post = 2 * sigmoid(mixes[:, hc:2 * hc] * scale[1] + base[hc:2 * hc])
        comb = mixes[:, 2 * hc:].reshape(S, hc, hc) * scale[2] + base[2 * hc:].reshape(hc, hc)
        comb = np.exp(comb - comb.max(axis=-1, keepdims=True))
        comb = comb / comb.sum(axis=-1, keepdims=True) + eps
        comb = comb / (comb.sum(axis=-2, keepdims=True) + eps)
        for _ in range(self.c["hc_sinkhorn_iters"] - 1):
            comb = comb / (comb.sum(axis=-1, keepdims=True) + eps)
            comb = comb / (comb.sum(axis=-2, keepdims=True) + eps)
        out = branch(rms_norm((pre[:, :, None] * x).sum(axis=1), w[norm], self.eps))
        return post[:, :, None] * out[:, None, :] + np.einsum("sij,sid->sjd", comb, x)

    def nextn_hidden(self, tokens, hidden, positions):
        """The layer's output before the LM head, [S, D], for the next tokens
        and the trunk's streams hidden [S, hc, D]."""
        w, p = self.w, "mtp.0."
        e = rms_norm(w["embed.weight"][tokens], w[p + "enorm.weight"], self.eps) @ w[p + "e_proj.weight"].T
        h = e[:, None, :] + rms_norm(hidden, w[p + "hnorm.weight"], self.eps) @ w[p + "h_proj.weight"].T
        h = self.hyper(h, p + "hc_attn", p + "attn_norm.weight", lambda x: self.attention(x, positions))
        h = self.hyper(h, p + "hc_ffn", p + "ffn_norm.weight", self.moe)
        mixes = rms_norm(h.reshape(h.shape[0], -1), 1.0, self.eps) @ w[p + "hc_head_fn"].T
        pre = sigmoid(mixes * w[p + "hc_head_scale"][0] + w[p + "hc_head_base"]) + self.c["hc_eps"]
        return rms_norm((pre[:, :, None] * h).sum(axis=1), w[p + "norm.weight"], self.eps)

    def nextn_logits(self, tokens, hidden, positions):
        return self.nextn_hidden(tokens, hidden, positions) @ self.w["head.weight"].T
