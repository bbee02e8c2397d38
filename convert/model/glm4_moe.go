package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// GLM-4.5, 4.6 and 4.7 with the Air models (Glm4MoeForCausalLM), and the
// GLM-4.7-Flash layout they share with glm4_moe_lite.go: DeepSeek's NextN
// layer in the layer list (model.layers.{num_hidden_layers}: eh_proj over
// concat(enorm(embedding), hnorm(hidden)), embedding first, a whole MoE
// decoder layer, shared_head.norm, and the layer's own embed_tokens and
// shared_head.head, copies of the trunk's), the first first_k_dense_replace
// layers dense, the others a MoE with sigmoid group routing
// (e_score_correction_bias, n_group / topk_group, routed_scaling_factor)
// and shared_experts, plain RMSNorms. GLM-4.5's attention is GQA with q/k/v
// biases (attention_bias), partial rotary and, in the 355B models, q/k
// norms (use_qk_norm). See docs/glm.md.

func init() { RegisterFamily(glm4Moe{}) }

type glm4Moe struct{}

func (glm4Moe) Name() string { return "glm4_moe" }

func (glm4Moe) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"glm4_moe"}, "Glm4MoeForCausalLM")
}

// Glm4MoeConfig's defaults.
var glm4MoeDefaults = ConfigDefaults{PartialRotaryFactor: 0.5, RMSNormEps: 1e-5, RopeTheta: 10000}

func (glm4Moe) ParseConfig(raw []byte) (*Config, error) {
	return parseGLMConfig(raw, glm4MoeDefaults, false)
}

func (glm4Moe) Spec(c *Config) *Spec { return glmSpec(c, false) }

// glmRefusals name the consumers that do not run these heads.
const (
	glmOpenVINORefusal = "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."
	glmCombinedRefusal = "stock mlx-lm drops the NextN layer of GLM-4.x checkpoints (its sanitize keeps layers below num_hidden_layers only), so a combined file would carry a head nothing runs."
)

// parseGLMConfig decodes a GLM-4.x config: the routed experts are
// n_routed_experts, the shared experts n_shared_experts × moe_intermediate_size
// wide; an FP8 release is read only in the block-FP8 layout.
func parseGLMConfig(raw []byte, d ConfigDefaults, lite bool) (*Config, error) {
	c, err := DecodeConfig(raw, d)
	if err != nil {
		return nil, err
	}
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: GLM's FP8 releases store per-channel FP8 weights with weight_scale (compressed-tensors), not the block-FP8 layout (weight_scale_inv, weight_block_size) this tool reads", q.QuantMethod)
	}
	c.NumExperts = c.NRoutedExperts
	c.SharedExpertIntermed = c.NSharedExperts * c.MoeIntermediateSize
	keys := append(c.CommonKeys(),
		PositiveKey{"intermediate_size", c.IntermediateSize}, PositiveKey{"n_routed_experts", c.NRoutedExperts},
		PositiveKey{"n_shared_experts", c.NSharedExperts}, PositiveKey{"num_experts_per_tok", c.NumExpertsPerTok},
		PositiveKey{"moe_intermediate_size", c.MoeIntermediateSize}, PositiveKey{"n_group", c.NGroup},
		PositiveKey{"topk_group", c.TopkGroup})
	if lite {
		keys = append(keys, PositiveKey{"kv_lora_rank", c.KVLoraRank}, PositiveKey{"qk_nope_head_dim", c.QKNopeHeadDim},
			PositiveKey{"qk_rope_head_dim", c.QKRopeHeadDim}, PositiveKey{"v_head_dim", c.VHeadDim})
		if c.QLoraRank != nil {
			keys = append(keys, PositiveKey{"q_lora_rank", *c.QLoraRank})
		}
	}
	if err := CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	switch {
	case c.FirstKDenseReplace < 0 || c.FirstKDenseReplace > c.NumHiddenLayers:
		return nil, fmt.Errorf("first_k_dense_replace %d is outside [0, num_hidden_layers %d]", c.FirstKDenseReplace, c.NumHiddenLayers)
	case c.NRoutedExperts%c.NGroup != 0 || c.TopkGroup > c.NGroup:
		return nil, fmt.Errorf("n_routed_experts %d, n_group %d, topk_group %d: the experts do not split into the groups", c.NRoutedExperts, c.NGroup, c.TopkGroup)
	case c.QKRopeHeadDim%2 != 0:
		return nil, fmt.Errorf("qk_rope_head_dim %d is odd", c.QKRopeHeadDim)
	case c.ScoringFunc != "" && c.ScoringFunc != "sigmoid":
		// The releases route by sigmoid (the modelling code has no other); a
		// config saying otherwise would be converted as if it did not.
		return nil, fmt.Errorf("scoring_func is %q: GLM-4.x heads route experts by sigmoid scores only", c.ScoringFunc)
	}
	c.LayerTypes = slices.Repeat([]string{FullAttention}, c.NumHiddenLayers) // every layer full attention (reports)
	return c, nil
}

// glmMLA reports GLM-4.7-Flash's multi-head latent attention.
func glmMLA(c *Config) bool { return c.KVLoraRank > 0 }

// glmSpec is the GLM-4.x layout; lite selects GLM-4.7-Flash's MLA and
// llama.cpp's deepseek2 architecture.
func glmSpec(c *Config, lite bool) *Spec {
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	e, si, di := int64(c.NumExperts), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	w := func(s string, role Role, shape ...int64) Want { return Want{Suffix: s, Shape: shape, Role: role} }
	var attention []Want
	if lite {
		nope, rope, vd := int64(c.QKNopeHeadDim), int64(c.QKRopeHeadDim), int64(c.VHeadDim)
		heads, kl := int64(c.NumAttentionHeads), int64(c.KVLoraRank)
		if c.QLoraRank != nil {
			ql := int64(*c.QLoraRank)
			attention = append(attention, w("self_attn.q_a_proj.weight", 0, ql, h), w("self_attn.q_a_layernorm.weight", 0, ql),
				w("self_attn.q_b_proj.weight", 0, heads*(nope+rope), ql))
		} else {
			attention = append(attention, w("self_attn.q_proj.weight", 0, heads*(nope+rope), h))
		}
		attention = append(attention,
			w("self_attn.kv_a_proj_with_mqa.weight", 0, kl+rope, h), w("self_attn.kv_a_layernorm.weight", 0, kl),
			w("self_attn.kv_b_proj.weight", 0, heads*(nope+vd), kl), w("self_attn.o_proj.weight", 0, h, heads*vd))
	} else {
		q, kv := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim)
		attention = []Want{w("self_attn.q_proj.weight", 0, q, h), w("self_attn.k_proj.weight", 0, kv, h),
			w("self_attn.v_proj.weight", 0, kv, h), w("self_attn.o_proj.weight", 0, h, q)}
		if c.AttentionBias {
			attention = append(attention, w("self_attn.q_proj.bias", 0, q), w("self_attn.k_proj.bias", 0, kv), w("self_attn.v_proj.bias", 0, kv))
		}
		if c.UseQKNorm {
			d := int64(c.HeadDim)
			attention = append(attention, w("self_attn.q_norm.weight", 0, d), w("self_attn.k_norm.weight", 0, d))
		}
	}
	norms := []Want{w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h)} // plain RMSNorm
	dense := []Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	moe := []Want{
		w("mlp.gate.weight", RoleRouter, e, h),
		w("mlp.gate.e_score_correction_bias", RoleKeepDType, e), // float32 in the releases; mlx-vlm keeps it so
		w("mlp.shared_experts.gate_proj.weight", 0, si, h), w("mlp.shared_experts.up_proj.weight", 0, si, h),
		w("mlp.shared_experts.down_proj.weight", 0, h, si),
	}
	isMoE := func(i int) bool { return i >= c.FirstKDenseReplace }
	layer := func(i int) []Want {
		ws := append(slices.Clone(norms), attention...)
		if isMoE(i) {
			return append(ws, moe...)
		}
		return append(ws, dense...)
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("shared_head.norm.weight", 0, h),
		w("embed_tokens.weight", RoleOptional, v, h), w("shared_head.head.weight", RoleOptional, v, h))
	s := &Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		TrunkTop:   []Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE: &MoE{
			Experts: "mlp.experts.", FusedGateUp: "gate_up_proj", FusedDown: "down_proj",
			PerExpert: [3]string{"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
			Stacked:   [3]string{"mlp.switch_mlp.gate_proj.weight", "mlp.switch_mlp.up_proj.weight", "mlp.switch_mlp.down_proj.weight"},
		},
		Experts:  func(layout ExpertLayout) []Want { return glmExperts(c, layout) },
		MoELayer: isMoE,
		Forward:  glmForward,
		Report:   glmReport(c, lite),
		MLX:      MLXSpec{CombinedRefusal: glmCombinedRefusal},
		GGUF: GGUFSpec{
			Arch: "glm4moe", PreTokenizer: "glm4",
			Top:           map[string]gg.TensorName{"embed_tokens.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)},
			Layer:         glmGGUFLayer,
			Metadata:      glmGGUFMetadata,
			SpecialTokens: glmSpecialTokens,
		},
		OpenVINO: OpenVINOSpec{Refusal: glmOpenVINORefusal},
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// glmReport is what inspect says of a GLM-4.x config: its attention (GQA,
// or MLA for GLM-4.7-Flash), its leading dense layers and its routing.
func glmReport(c *Config, lite bool) ReportSpec {
	norm, normTopk := "weights as chosen", c.NormTopkProb == nil || *c.NormTopkProb
	if normTopk {
		norm = "weights renormalised"
	}
	r := ReportSpec{
		Dims: map[string]any{
			"first_k_dense_replace": c.FirstKDenseReplace, "n_shared_experts": c.NSharedExperts,
			"n_group": c.NGroup, "topk_group": c.TopkGroup, "routed_scaling_factor": c.RoutedScalingFactor,
			"partial_rotary_factor": c.PartialRotaryFactor, "norm_topk_prob": normTopk,
		},
		Layers:  fmt.Sprintf("%d (%d dense MLP, %d MoE), all full attention", c.NumHiddenLayers, min(c.FirstKDenseReplace, c.NumHiddenLayers), max(0, c.NumHiddenLayers-c.FirstKDenseReplace)),
		Routing: fmt.Sprintf("sigmoid, e_score_correction_bias for the choice, n_group %d, topk_group %d, %s, scaled by %v", c.NGroup, c.TopkGroup, norm, c.RoutedScalingFactor),
	}
	if lite {
		ql := "none (q_proj)"
		if c.QLoraRank != nil {
			ql = strconv.Itoa(*c.QLoraRank)
			r.Dims["q_lora_rank"] = *c.QLoraRank
		}
		for k, v := range map[string]int{"kv_lora_rank": c.KVLoraRank, "qk_nope_head_dim": c.QKNopeHeadDim, "qk_rope_head_dim": c.QKRopeHeadDim, "v_head_dim": c.VHeadDim} {
			r.Dims[k] = v
		}
		r.Attention = fmt.Sprintf("multi-head latent attention, %d heads: q_lora_rank %s, kv_lora_rank %d, qk dims %d nope + %d rope, v dim %d (theta %v)",
			c.NumAttentionHeads, ql, c.KVLoraRank, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.RopeTheta)
		return r
	}
	r.Dims["attention_bias"], r.Dims["use_qk_norm"] = c.AttentionBias, c.UseQKNorm
	r.Attention = fmt.Sprintf("GQA, heads %d/%d of dim %d (rotary %d, theta %v)", c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RotaryDim(), c.RopeTheta)
	if c.AttentionBias {
		r.Attention += ", q/k/v biases"
	}
	if c.UseQKNorm {
		r.Attention += ", q/k norms"
	}
	return r
}

// glmExperts lists the routed experts of one block: per expert in the
// releases (transformers 5's fused layout when a checkpoint was saved by it).
func glmExperts(c *Config, layout ExpertLayout) []Want {
	h, i, e := int64(c.HiddenSize), int64(c.MoeIntermediateSize), int64(c.NumExperts)
	if layout == Fused {
		return []Want{{"mlp.experts.gate_up_proj", []int64{e, 2 * i, h}, 0}, {"mlp.experts.down_proj", []int64{e, h, i}, 0}}
	}
	out := make([]Want, 0, 3*c.NumExperts)
	for x := range c.NumExperts {
		p := "mlp.experts." + strconv.Itoa(x) + "."
		out = append(out, Want{p + "gate_proj.weight", []int64{i, h}, 0}, Want{p + "up_proj.weight", []int64{i, h}, 0},
			Want{p + "down_proj.weight", []int64{h, i}, 0})
	}
	return out
}

// glmGGUFLayer is gguf-py's tensor map for glm4moe (and deepseek2's MoE
// and NextN tensors), from the suffixes under a decoder layer.
var glmGGUFLayer = map[string]gg.TensorName{
	"input_layernorm.weight":              gg.Weight(gg.KindAttnNorm),
	"post_attention_layernorm.weight":     gg.Weight(gg.KindAttnPostNorm),
	"self_attn.q_proj.weight":             gg.Weight(gg.KindAttnQ),
	"self_attn.q_proj.bias":               gg.Bias(gg.KindAttnQ),
	"self_attn.k_proj.weight":             gg.Weight(gg.KindAttnK),
	"self_attn.k_proj.bias":               gg.Bias(gg.KindAttnK),
	"self_attn.v_proj.weight":             gg.Weight(gg.KindAttnV),
	"self_attn.v_proj.bias":               gg.Bias(gg.KindAttnV),
	"self_attn.o_proj.weight":             gg.Weight(gg.KindAttnOut),
	"self_attn.q_norm.weight":             gg.Weight(gg.KindAttnQNorm),
	"self_attn.k_norm.weight":             gg.Weight(gg.KindAttnKNorm),
	"mlp.gate.weight":                     gg.Weight(gg.KindFFNGateInp),
	"mlp.gate.e_score_correction_bias":    gg.Bias(gg.KindFFNExpProbsB),
	"mlp.shared_experts.gate_proj.weight": gg.Weight(gg.KindFFNGateShexp),
	"mlp.shared_experts.up_proj.weight":   gg.Weight(gg.KindFFNUpShexp),
	"mlp.shared_experts.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
	"mlp.gate_proj.weight":                gg.Weight(gg.KindFFNGate),
	"mlp.up_proj.weight":                  gg.Weight(gg.KindFFNUp),
	"mlp.down_proj.weight":                gg.Weight(gg.KindFFNDown),
	"eh_proj.weight":                      gg.Weight(gg.KindNextNEHProj),
	"enorm.weight":                        gg.Weight(gg.KindNextNEnorm),
	"hnorm.weight":                        gg.Weight(gg.KindNextNHnorm),
	"embed_tokens.weight":                 gg.Weight(gg.KindNextNEmbedTokens),
	"shared_head.norm.weight":             gg.Weight(gg.KindNextNSharedHeadNorm),
	"shared_head.head.weight":             gg.Weight(gg.KindNextNSharedHeadHead),
}

// glmSpecialTokens are the ids the reference converter's GLM vocabulary
// sets over tokenizer_config.json's (_set_vocab_glm), by token text.
var glmSpecialTokens = []SpecialToken{{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}}

// glmGGUFMetadata is the keys Glm4MoeModel.set_gguf_parameters adds
// after TextModel's (the routed expert count set again, from n_routed_experts).
func glmGGUFMetadata(m *Model, h Hparams, g *GGUFKeys) error {
	g.U32("rope.dimension_count", m.Config.RotaryDim())
	for _, k := range [][2]string{{"expert_count", "n_routed_experts"}, {"expert_feed_forward_length", "moe_intermediate_size"},
		{"expert_shared_count", "n_shared_experts"}, {"leading_dense_block_count", "first_k_dense_replace"}} {
		if err := g.intOf(h, k[0], k[1]); err != nil {
			return err
		}
	}
	g.U32("expert_gating_func", expertGating["sigmoid"])
	glmGGUFRouting(g, h, false)
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// glmGGUFRouting sets routed_scaling_factor and norm_topk_prob when
// config.json has them (deepseek2 writes the latter only when true).
func glmGGUFRouting(g *GGUFKeys, h Hparams, onlyTrue bool) {
	if v, ok := h["routed_scaling_factor"].(json.Number); ok {
		g.floatOf("expert_weights_scale", v)
	}
	if b, ok := h["norm_topk_prob"].(bool); ok && (b || !onlyTrue) {
		g.Bool("expert_weights_norm", b)
	}
}

// glmForward is the NextN forward of the modelling code: per MTP layer
// its own eh_proj, norms and shared head; GQA with biases (or MLA) and
// sigmoid group routing.
func glmForward(m *Model) Forward {
	c := m.Config
	p := m.HeadLayerPrefix(0)
	f := Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "shared_head.norm.weight", Eps: c.RMSNormEps}
	for j := range m.MTPDepth {
		p := m.HeadLayerPrefix(j)
		sa, mp := p+"self_attn.", p+"mlp."
		at := Attention{Kind: AttnGQA, Prefix: sa,
			Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
			Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta}
		if c.AttentionBias {
			at.QBias, at.KBias, at.VBias = sa+"q_proj.bias", sa+"k_proj.bias", sa+"v_proj.bias"
		}
		if c.UseQKNorm {
			at.QNorm, at.KNorm = sa+"q_norm.weight", sa+"k_norm.weight"
		}
		if glmMLA(c) {
			at = Attention{Kind: AttnMLA, Prefix: sa, Q: sa + "q_proj.weight", O: sa + "o_proj.weight",
				KVA: sa + "kv_a_proj_with_mqa.weight", KVANorm: sa + "kv_a_layernorm.weight", KVB: sa + "kv_b_proj.weight",
				Heads: c.NumAttentionHeads, KVLoraRank: c.KVLoraRank, QKNopeHeadDim: c.QKNopeHeadDim,
				QKRopeHeadDim: c.QKRopeHeadDim, VHeadDim: c.VHeadDim, RotaryDim: c.QKRopeHeadDim, RopeTheta: c.RopeTheta}
			if c.QLoraRank != nil {
				at.Q, at.QA, at.QANorm, at.QLoraRank = sa+"q_b_proj.weight", sa+"q_a_proj.weight", sa+"q_a_layernorm.weight", *c.QLoraRank
			}
		}
		f.Layers = append(f.Layers, ForwardLayer{Prefix: p, InputNorm: p + "input_layernorm.weight",
			PostAttentionNorm: p + "post_attention_layernorm.weight", Attention: at,
			MLP: MLP{Kind: MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight",
				Gate: p + "mlp.switch_mlp.gate_proj.weight", Up: p + "mlp.switch_mlp.up_proj.weight", Down: p + "mlp.switch_mlp.down_proj.weight",
				Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: c.NormTopkProb == nil || *c.NormTopkProb,
				SharedPrefix: mp + "shared_experts.", SharedGate: mp + "shared_experts.gate_proj.weight",
				SharedUp: mp + "shared_experts.up_proj.weight", SharedDown: mp + "shared_experts.down_proj.weight",
				Routing: RouteSigmoidGroupTopK, ScoreCorrectionBias: mp + "gate.e_score_correction_bias",
				Groups: c.NGroup, TopKGroups: c.TopkGroup, ScalingFactor: c.RoutedScalingFactor}})
	}
	return f
}
