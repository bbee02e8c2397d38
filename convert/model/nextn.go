package model

// What the families built on DeepSeek-V3's NextN head share, under no one
// family's name: gguf-py's one tensor map (tensor_mapping.py) of the
// tensors most NextN layers spell alike, their experts as stored in the
// releases, and the tensors outside the layers.

import (
	"encoding/json"
	"maps"
	"strconv"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// NextNGGUFTop is gguf-py's tensor map of the tensors outside the layers,
// by their common names under the text prefix (and the LM head's).
var NextNGGUFTop = map[string]gg.TensorName{"embed_tokens.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)}

// nextNGGUFLayer is the base of every NextN family's layer table: gguf-py's
// kind of each tensor under a decoder layer (an MTP layer is block
// n_layer + j) that the families name alike.
var nextNGGUFLayer = map[string]gg.TensorName{
	"input_layernorm.weight":              gg.Weight(gg.KindAttnNorm),
	"post_attention_layernorm.weight":     gg.Weight(gg.KindFFNNorm),
	"self_attn.q_proj.weight":             gg.Weight(gg.KindAttnQ),
	"self_attn.k_proj.weight":             gg.Weight(gg.KindAttnK),
	"self_attn.v_proj.weight":             gg.Weight(gg.KindAttnV),
	"self_attn.o_proj.weight":             gg.Weight(gg.KindAttnOut),
	"self_attn.q_norm.weight":             gg.Weight(gg.KindAttnQNorm),
	"self_attn.k_norm.weight":             gg.Weight(gg.KindAttnKNorm),
	"mlp.gate_proj.weight":                gg.Weight(gg.KindFFNGate),
	"mlp.up_proj.weight":                  gg.Weight(gg.KindFFNUp),
	"mlp.down_proj.weight":                gg.Weight(gg.KindFFNDown),
	"mlp.gate.weight":                     gg.Weight(gg.KindFFNGateInp),
	"mlp.gate.e_score_correction_bias":    gg.Bias(gg.KindFFNExpProbsB),
	"mlp.shared_experts.gate_proj.weight": gg.Weight(gg.KindFFNGateShexp),
	"mlp.shared_experts.up_proj.weight":   gg.Weight(gg.KindFFNUpShexp),
	"mlp.shared_experts.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
	"eh_proj.weight":                      gg.Weight(gg.KindNextNEHProj),
	"enorm.weight":                        gg.Weight(gg.KindNextNEnorm),
	"hnorm.weight":                        gg.Weight(gg.KindNextNHnorm),
	"embed_tokens.weight":                 gg.Weight(gg.KindNextNEmbedTokens),
	"shared_head.norm.weight":             gg.Weight(gg.KindNextNSharedHeadNorm),
	"shared_head.head.weight":             gg.Weight(gg.KindNextNSharedHeadHead),
}

// NextNGGUFLayer is a family's GGUF layer table: the shared base with the
// family's own entries over it (the tensors only it has, and its own kind
// where gguf-py's map for its architecture differs).
func NextNGGUFLayer(own map[string]gg.TensorName) map[string]gg.TensorName {
	m := maps.Clone(nextNGGUFLayer)
	maps.Copy(m, own)
	return m
}

// NextNExperts are the routed experts of one MoE block as the releases
// store them (SwitchGLUExperts): per expert, or transformers 5's fused
// gate_up_proj and down_proj.
func NextNExperts(c *Config, layout ExpertLayout) []Want {
	h, i, e := int64(c.HiddenSize), int64(c.MoeIntermediateSize), int64(c.NumExperts)
	if layout == Fused {
		moe := SwitchGLUExperts()
		return []Want{{moe.Experts + moe.FusedGateUp, []int64{e, 2 * i, h}, 0}, {moe.Experts + moe.FusedDown, []int64{e, h, i}, 0}}
	}
	out := make([]Want, 0, 3*c.NumExperts)
	for x := range c.NumExperts {
		p := "mlp.experts." + strconv.Itoa(x) + "."
		out = append(out, Want{p + "gate_proj.weight", []int64{i, h}, 0}, Want{p + "up_proj.weight", []int64{i, h}, 0},
			Want{p + "down_proj.weight", []int64{h, i}, 0})
	}
	return out
}

// HasKey reports whether config.json (raw) sets key at its top level, for
// a family whose configuration class's default differs from the shared one.
func HasKey(raw []byte, key string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return false
	}
	_, ok := top[key]
	return ok
}
