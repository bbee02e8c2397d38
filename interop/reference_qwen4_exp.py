"""An independent numpy reference of Qwen3.8-Flash-Next's MTP head (qwen4_exp,
mtp.*), written from the architecture's math (the layout in
docs/qwen3.8-flash-next.md; the operations as the Qwen4-Exp modelling code
defines them), not from mtpconv's Go code nor by calling mlx-vlm:

- every RMSNorm is zero-centred (the stored weight w applied as 1 + w);
- the residual stream is hc_count hyper-connection streams side by side
  ([S, hc_count * hidden]); the head takes the trunk's streams before the
  trunk's mixer: x = fc_embedding(pre_fc_norm_embedding(embed(t))) added to
  fc_hidden(stream) of every stream of pre_fc_norm_hidden(h), that norm one
  RMSNorm over all hc_count * hidden values;
- a hyper-connection (attn_ and mlp_hyper_connection) normalises each stream
  on its own (hc_norm, grouped per stream), mixes them into the branch input
  mean_s(sigmoid(up(silu(down(n) / hc)))_s * n_s), runs the branch (attention
  or MoE) on it and adds 2 sigmoid(block_inject(n) / hc)_s times the branch
  output to each stream s;
- the attention is Qwen sparse attention: gated GQA (q_proj gives per head the
  query and a sigmoid output gate; zero-centred q/k norms; rotate-half rotary
  on the first partial_rotary_factor of each head) in which a query at
  position t that has more than indexer_budget / indexer_compress_ratio
  complete key blocks behind it sees only the indexer's top blocks and the
  tokens after its last complete block. The indexer scores a block as
  sum over its heads of relu(q_h . k_block) / sqrt(indexer_head_dim), q_h the
  normed, rotated indexer query at t, k_block the normed mean of the block's
  raw indexer keys rotated at the block's first position;
- the MoE: softmax router, top k (renormalised when norm_topk_prob), SwiGLU
  experts, plus the shared expert scaled by sigmoid(shared_expert_gate(x));
- the head's own hyper_connection_mixer (without the injection) folds the
  streams into one hidden state; logits = lm_head of that.

Weights are in the MLX drafter's names (mtp.* without "mtp.", the experts
stacked as layers.0.mlp.switch_mlp.{gate,up,down}_proj.weight [E, out, in]):
from_checkpoint reads them from a raw Hugging Face checkpoint. Computation is
float64."""
import numpy as np

from reference import attend, gated_qkv, load_raw, rms_norm, rope, sigmoid, silu, text_config


class AmbiguousSelection(ValueError):
    """The indexer's top blocks are not determined: scores tie at the cut-off."""


def grouped_rms_norm(x, w, eps, group):
    """A zero-centred RMSNorm of each group of values on its own."""
    shape = x.shape
    y = x.reshape(*shape[:-1], -1, group)
    return rms_norm(y, w.reshape(-1, group), eps).reshape(shape)


class Qwen4ExpMTPReference:
    """The MTP head of a qwen4_exp checkpoint, with its own KV and indexer caches."""

    def __init__(self, cfg, weights):
        self.cfg, self.w = cfg, weights
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.hidden, self.hc = cfg["hidden_size"], cfg.get("hc_count", 4)
        rp = cfg.get("rope_parameters") or {}
        self.theta = rp.get("rope_theta", cfg.get("rope_theta"))
        self.hd = cfg["head_dim"]
        self.rot = int(self.hd * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25)))
        self.heads, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.top_k, self.norm_topk = cfg["num_experts_per_tok"], cfg.get("norm_topk_prob", True)
        self.idx_heads, self.idx_dim = cfg.get("indexer_n_heads", 4), cfg.get("indexer_head_dim", 128)
        self.ratio = cfg.get("indexer_compress_ratio", 4)
        self.block_topk = cfg.get("indexer_budget", 2048) // self.ratio
        self.keys = self.values = self.index_keys = None
        self.sparse_queries = 0  # queries that attended to the indexer's blocks only

    @classmethod
    def from_checkpoint(cls, folder):
        """The head of a raw checkpoint, renamed as the drafter names it."""
        raw = load_raw(folder, "mtp.")
        w = {k[len("mtp."):]: v for k, v in raw.items()}
        p = "layers.0.mlp."
        gate_up = w.pop(p + "experts.gate_up_proj")
        half = gate_up.shape[1] // 2
        w[p + "switch_mlp.gate_proj.weight"], w[p + "switch_mlp.up_proj.weight"] = gate_up[:, :half], gate_up[:, half:]
        w[p + "switch_mlp.down_proj.weight"] = w.pop(p + "experts.down_proj")
        return cls(text_config(folder), w)

    def step(self, emb, hidden, positions):
        """emb [S, hidden] (the tokens' embeddings), hidden [S, hc * hidden]
        (the trunk's streams, or the head's own from the step before),
        positions [S]. Returns (the mixed hidden state the LM head reads
        [S, hidden], the head's streams before its mixer [S, hc * hidden])."""
        w, eps, H, S = self.w, self.eps, self.hidden, emb.shape[0]
        e = rms_norm(emb, w["pre_fc_norm_embedding.weight"], eps) @ w["fc_embedding.weight"].T
        h = rms_norm(hidden, w["pre_fc_norm_hidden.weight"], eps).reshape(S, self.hc, H) @ w["fc_hidden.weight"].T
        x = (e[:, None, :] + h).reshape(S, self.hc * H)
        x = self.hyper_connection("layers.0.attn_hyper_connection.", x, lambda m: self.attention(m, positions))
        x = self.hyper_connection("layers.0.mlp_hyper_connection.", x, self.moe)
        return self.mix("hyper_connection_mixer.", x)[0], x

    def mix(self, p, x):
        """A hyper-connection's stream mix: (the branch input, the normed streams)."""
        w, H = self.w, self.hidden
        n = grouped_rms_norm(x, w[p + "hc_norm.weight"], self.eps, H)
        gate = sigmoid(silu(n @ w[p + "input_mix_weight_down.weight"].T / self.hc) @ w[p + "input_mix_weight_up.weight"].T)
        S = x.shape[0]
        return (gate.reshape(S, self.hc, H) * n.reshape(S, self.hc, H)).mean(axis=1), n

    def hyper_connection(self, p, x, branch):
        mixed, n = self.mix(p, x)
        inject = 2 * sigmoid(n @ self.w[p + "block_inject_weight.weight"].T / self.hc)  # [S, hc]
        out = branch(mixed)
        return x + (inject[:, :, None] * out[:, None, :]).reshape(x.shape)

    def attention(self, x, positions):
        w, p, hd, S = self.w, "layers.0.self_attn.", self.hd, x.shape[0]
        q, gate, k, v = gated_qkv(self, w, p, x, positions)
        self.keys = k if self.keys is None else np.concatenate([self.keys, k])
        self.values = v if self.values is None else np.concatenate([self.values, v])
        out = attend(q, self.keys, self.values, self.visible(x, positions))
        return (out.reshape(S, self.heads * hd) * sigmoid(gate)) @ w[p + "o_proj.weight"].T

    def visible(self, x, positions):
        """Which cached tokens each of the S new queries attends to: every
        earlier one, or, past the indexer's budget, its chosen blocks and the
        tokens after its last complete block."""
        w, p, d, S = self.w, "layers.0.self_attn.indexer.", self.idx_dim, x.shape[0]
        qk = (x @ w[p + "index_qk_proj.weight"].T).reshape(S, self.idx_heads + 1, d)
        self.index_keys = qk[:, -1] if self.index_keys is None else np.concatenate([self.index_keys, qk[:, -1]])
        T = self.index_keys.shape[0]
        past = T - S
        iq = rope(rms_norm(qk[:, :-1], w[p + "q_layernorm.weight"], self.eps), positions, self.rot, self.theta)
        blocks = T // self.ratio
        pooled = self.index_keys[: blocks * self.ratio].reshape(blocks, self.ratio, d).mean(axis=1)
        starts = np.arange(blocks) * self.ratio  # the cache holds positions 0..T-1
        bk = rope(rms_norm(pooled, w[p + "k_layernorm.weight"], self.eps)[:, None], starts, self.rot, self.theta)[:, 0]
        vis = np.zeros((S, T), dtype=bool)
        for i in range(S):
            end = past + i + 1
            complete = end // self.ratio
            if complete <= self.block_topk:
                vis[i, :end] = True
                continue
            self.sparse_queries += 1
            score = np.maximum(iq[i] @ bk[:complete].T, 0).sum(axis=0) / np.sqrt(d)
            order = np.argsort(-score, kind="stable")
            last, first_out = score[order[self.block_topk - 1]], score[order[self.block_topk]]
            if last - first_out <= 1e-6 * max(abs(last), 1e-30):
                # Which of the tied blocks an implementation keeps is its own
                # choice (a top-k's tie order): no single answer to check against.
                raise AmbiguousSelection(f"query at position {positions[i]}: blocks tie at the indexer's cut-off ({last} vs {first_out})")
            for b in order[: self.block_topk]:
                vis[i, b * self.ratio:(b + 1) * self.ratio] = True
            vis[i, complete * self.ratio:end] = True
        return vis

    def moe(self, x):
        w, p = self.w, "layers.0.mlp."
        logits = x @ w[p + "gate.weight"].T
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.zeros_like(x)
        sw = p + "switch_mlp."
        for s in range(x.shape[0]):
            top = np.argsort(-probs[s], kind="stable")[: self.top_k]
            weights = probs[s, top] / probs[s, top].sum() if self.norm_topk else probs[s, top]
            for e, g in zip(top, weights):
                y = silu(w[sw + "gate_proj.weight"][e] @ x[s]) * (w[sw + "up_proj.weight"][e] @ x[s])
                out[s] += g * (w[sw + "down_proj.weight"][e] @ y)
        se = p + "shared_expert."
        sh = (silu(x @ w[se + "gate_proj.weight"].T) * (x @ w[se + "up_proj.weight"].T)) @ w[se + "down_proj.weight"].T
        return out + sigmoid(x @ w[p + "shared_expert_gate.weight"].T) * sh
