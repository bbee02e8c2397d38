package model

// qwen3Next is Qwen3-Next (Qwen3NextForCausalLM): flat config, weights under
// model., linear attention with grouped in_proj_qkvz / in_proj_ba, and every
// MoE block (trunk and MTP) storing its experts per expert.
type qwen3Next struct{ hybridConfig }

func init() { RegisterFamily(qwen3Next{}) }

func (qwen3Next) Name() string { return "qwen3_next" }

func (qwen3Next) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"qwen3_next"}, "Qwen3Next")
}

func (qwen3Next) Spec(c *Config) *Spec {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	s := hybridSpec(c, hybridLayout{
		text: []string{"model."},
		linear: []Want{
			// Per key-head group: [q, k, v..., z...] rows, interleaved.
			{"linear_attn.in_proj_qkvz.weight", []int64{2*kd + 2*vd, h}, 0},
			{"linear_attn.in_proj_ba.weight", []int64{2 * nv, h}, 0},
		},
		ggufArch: "qwen3next", preTokenizer: "qwen2",
	})
	s.HF.MTPClass = "qwen3_next_mtp"
	s.MLX.DrafterTextConfig = func(m *Model, text map[string]any) {
		hybridDrafterText(m, text)
		// The drafter's TextConfig defaults norm_topk_prob to true; Qwen3-Next does not renormalise.
		if _, ok := text["norm_topk_prob"]; !ok {
			text["norm_topk_prob"] = false
		}
	}
	// mlx-lm's qwen3_next loader only sanitizes raw per-expert files; on a
	// converted file it keeps mtp.* keys and the strict load fails.
	s.MLX.CombinedRefusal = "stock mlx-lm cannot load a converted qwen3_next file that carries mtp.* tensors (use --target mlx for the head)"
	return s
}
