package model

// qwen35MoE is Qwen3.5-MoE and Qwen3.6-MoE (Qwen3_5MoeForConditionalGeneration):
// config nested under text_config, text weights under model.language_model.,
// a vision tower under model.visual., linear attention with flat split input
// projections, trunk experts fused, MTP experts per-expert (3.5) or fused (3.6).
type qwen35MoE struct{ hybridConfig }

func init() { RegisterFamily(qwen35MoE{}) }

func (qwen35MoE) Name() string { return "qwen3_5_moe" }

func (qwen35MoE) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"qwen3_5_moe", "qwen3_5_moe_text"}, "Qwen3_5Moe")
}

func (qwen35MoE) Spec(c *Config) *Spec { return qwen35Spec(c, "qwen35moe") }

// qwen35Spec is the Qwen3.5/3.6 layout (MoE or dense), for llama.cpp's
// architecture arch.
func qwen35Spec(c *Config, arch string) *Spec {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return hybridSpec(c, hybridLayout{
		text: []string{"model.language_model.", "model."}, vision: []string{"model.visual.", "visual."},
		linear: []Want{
			{"linear_attn.in_proj_qkv.weight", []int64{2*kd + vd, h}, 0},
			{"linear_attn.in_proj_z.weight", []int64{vd, h}, 0},
			{"linear_attn.in_proj_b.weight", []int64{nv, h}, 0},
			{"linear_attn.in_proj_a.weight", []int64{nv, h}, 0},
		},
		ggufArch: arch, preTokenizer: "qwen35", mrope: true,
	})
}
