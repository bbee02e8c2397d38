package convert

import "strings"

// Qwen3-Next (Qwen3NextForCausalLM): flat config, weights under model.,
// linear attention with grouped in_proj_qkvz / in_proj_ba, and every MoE
// block (trunk and MTP) storing its experts per expert.
var qwen3Next = &family{
	name: "qwen3_next",
	matches: func(c *Config) bool {
		if c.ModelType == "qwen3_next" {
			return true
		}
		for _, a := range c.Architectures {
			if strings.HasPrefix(a, "Qwen3Next") {
				return true
			}
		}
		return false
	},
	textPrefixes: []string{"model."},
	linearAttention: func(c *Config) []want {
		h := int64(c.HiddenSize)
		kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
		vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
		nv := int64(c.LinearNumValueHeads)
		return append([]want{
			// Per key-head group: [q, k, v..., z...] rows, interleaved.
			{"linear_attn.in_proj_qkvz.weight", []int64{2*kd + 2*vd, h}},
			{"linear_attn.in_proj_ba.weight", []int64{2 * nv, h}},
		}, gatedDeltaCommon(c)...)
	},
}
