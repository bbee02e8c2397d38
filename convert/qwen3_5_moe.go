package convert

import "strings"

// Qwen3.5-MoE and Qwen3.6-MoE (Qwen3_5MoeForConditionalGeneration): config
// nested under text_config, text weights under model.language_model., a
// vision tower under model.visual., linear attention with flat split input
// projections, trunk experts fused, MTP experts per-expert (3.5) or fused (3.6).
var qwen35MoE = &family{
	name: "qwen3_5_moe",
	matches: func(c *Config) bool {
		if c.ModelType == "qwen3_5_moe" || c.TextModelType == "qwen3_5_moe_text" || c.TextModelType == "qwen3_5_moe" {
			return true
		}
		for _, a := range c.Architectures {
			if strings.HasPrefix(a, "Qwen3_5Moe") {
				return true
			}
		}
		return false
	},
	textPrefixes:   []string{"model.language_model.", "model."},
	visionPrefixes: []string{"model.visual.", "visual."},
	linearAttention: func(c *Config) []want {
		h := int64(c.HiddenSize)
		kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
		vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
		nv := int64(c.LinearNumValueHeads)
		return append([]want{
			{"linear_attn.in_proj_qkv.weight", []int64{2*kd + vd, h}},
			{"linear_attn.in_proj_z.weight", []int64{vd, h}},
			{"linear_attn.in_proj_b.weight", []int64{nv, h}},
			{"linear_attn.in_proj_a.weight", []int64{nv, h}},
		}, gatedDeltaCommon(c)...)
	},
}
