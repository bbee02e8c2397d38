package families

import (
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// qwen3Next is Qwen3-Next (Qwen3NextForCausalLM): flat config, weights under
// model., linear attention with grouped in_proj_qkvz / in_proj_ba, and every
// MoE block (trunk and MTP) storing its experts per expert.
var qwen3NextFamily = func() *model.Family {
	f := hybridFamily(model.Family{
		Name: "qwen3_next", Title: "Qwen3-Next",
		Docs:       "docs/qwen.md",
		Layout:     "a flat config without an MTP count, per-expert experts, on the hybrid decoder of `qwen_hybrid.go`",
		ModelTypes: []string{"qwen3_next"}, Arch: "Qwen3Next",
		Spec: specQwen3Next,
	}, "qwen3next", "qwen2", false, "qwen3_next_mtp")
	f.MLX.DrafterTextConfig = func(m *model.Model, text *jsonobj.Object) {
		hybridDrafterText(m, text)
		// The drafter's TextConfig defaults norm_topk_prob to true; Qwen3-Next does not renormalise.
		if !text.Has("norm_topk_prob") {
			text.Set("norm_topk_prob", false)
		}
	}
	// mlx-lm's qwen3_next loader only sanitizes raw per-expert files; on a
	// converted file it keeps mtp.* keys and the strict load fails.
	f.MLX.CombinedRefusal = "stock mlx-lm cannot load a converted qwen3_next file that carries mtp.* tensors (use --target mlx for the head)"
	return f
}()

func init() { model.RegisterFamily(qwen3NextFamily) }

func specQwen3Next(c *model.Config) *model.Spec {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return hybridSpec(c, hybridLayout{
		text: []string{"model."},
		linear: []model.Want{
			// Per key-head group: [q, k, v..., z...] rows, interleaved.
			{Suffix: "linear_attn.in_proj_qkvz.weight", Shape: []int64{2*kd + 2*vd, h}, Role: 0},
			{Suffix: "linear_attn.in_proj_ba.weight", Shape: []int64{2 * nv, h}, Role: 0},
		},
	})
}
