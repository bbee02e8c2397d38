package families

import "github.com/mtpconv/mtpconv/convert/model"

// Qwen3.5-MoE and Qwen3.6-MoE (Qwen3_5MoeForConditionalGeneration): config
// nested under text_config, text weights under model.language_model., a
// vision tower under model.visual., linear attention with flat split input
// projections, trunk experts fused, MTP experts per-expert (3.5) or fused (3.6).
var qwen35MoEFamily = hybridFamily(model.Family{
	Name: "qwen3_5_moe", Title: "Qwen3.5/3.6 MoE",
	Docs:       "docs/qwen.md",
	Layout:     "fused or per-expert experts, nested `text_config`, on the hybrid decoder of `qwen_hybrid.go`",
	ModelTypes: []string{"qwen3_5_moe", "qwen3_5_moe_text"}, Arch: "Qwen3_5Moe",
	Spec: specQwen35,
}, "qwen35moe", "qwen35", true, "qwen3_5_mtp")

func init() { model.RegisterFamily(qwen35MoEFamily) }

// specQwen35 is the Qwen3.5/3.6 layout (MoE or dense).
func specQwen35(c *model.Config) *model.Spec {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return hybridSpec(c, hybridLayout{
		text: []string{"model.language_model.", "model."}, vision: []string{"model.visual.", "visual."},
		linear: []model.Want{
			{Suffix: "linear_attn.in_proj_qkv.weight", Shape: []int64{2*kd + vd, h}, Role: 0},
			{Suffix: "linear_attn.in_proj_z.weight", Shape: []int64{vd, h}, Role: 0},
			{Suffix: "linear_attn.in_proj_b.weight", Shape: []int64{nv, h}, Role: 0},
			{Suffix: "linear_attn.in_proj_a.weight", Shape: []int64{nv, h}, Role: 0},
		},
	})
}
