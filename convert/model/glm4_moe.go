package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

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
			Top:   map[string]string{"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"},
			Layer: glmGGUFLayer,
			Metadata: func(m *Model, hp Hparams) ([]gg.KV, []gg.KV) {
				return glmGGUFMetadata(m, hp)
			},
			SpecialTokens: glmSpecialTokens,
		},
		OpenVINO: OpenVINOSpec{Refusal: glmOpenVINORefusal},
		HF:       glmHF(c, lite),
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
var glmGGUFLayer = map[string]string{
	"input_layernorm.weight":              "attn_norm.weight",
	"post_attention_layernorm.weight":     "post_attention_norm.weight",
	"self_attn.q_proj.weight":             "attn_q.weight",
	"self_attn.q_proj.bias":               "attn_q.bias",
	"self_attn.k_proj.weight":             "attn_k.weight",
	"self_attn.k_proj.bias":               "attn_k.bias",
	"self_attn.v_proj.weight":             "attn_v.weight",
	"self_attn.v_proj.bias":               "attn_v.bias",
	"self_attn.o_proj.weight":             "attn_output.weight",
	"self_attn.q_norm.weight":             "attn_q_norm.weight",
	"self_attn.k_norm.weight":             "attn_k_norm.weight",
	"mlp.gate.weight":                     "ffn_gate_inp.weight",
	"mlp.gate.e_score_correction_bias":    "exp_probs_b.bias",
	"mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
	"mlp.shared_experts.up_proj.weight":   "ffn_up_shexp.weight",
	"mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
	"mlp.gate_proj.weight":                "ffn_gate.weight",
	"mlp.up_proj.weight":                  "ffn_up.weight",
	"mlp.down_proj.weight":                "ffn_down.weight",
	"eh_proj.weight":                      "nextn.eh_proj.weight",
	"enorm.weight":                        "nextn.enorm.weight",
	"hnorm.weight":                        "nextn.hnorm.weight",
	"embed_tokens.weight":                 "nextn.embed_tokens.weight",
	"shared_head.norm.weight":             "nextn.shared_head_norm.weight",
	"shared_head.head.weight":             "nextn.shared_head_head.weight",
}

// glmSpecialTokens are the ids the reference converter's GLM vocabulary
// sets over tokenizer_config.json's (_set_vocab_glm), by token text.
var glmSpecialTokens = []SpecialToken{{"bos", "[gMASK]"}, {"eot", "<|user|>"}, {"unk", "<|endoftext|>"}, {"eom", "<|observation|>"}}

// glmGGUFMetadata is every key convert_hf_to_gguf.py writes for glm4moe
// (TextModel's, then Glm4MoeModel's), each when config.json has its key.
func glmGGUFMetadata(m *Model, hp Hparams) (base, own []gg.KV) {
	c := m.Config
	kv, _ := hp.Int("num_key_value_heads")
	base = glmGGUFBase(m, hp, kv)
	add, addInt := ggufAdder(m, hp, &base)
	if _, ok := hp.Int("head_dim"); ok {
		add("attention.key_length", gg.U32(uint32(c.HeadDim)))
		add("attention.value_length", gg.U32(uint32(c.HeadDim)))
	}
	add, addInt = ggufAdder(m, hp, &own)
	add("rope.dimension_count", gg.U32(uint32(c.RotaryDim())))
	addInt("expert_feed_forward_length", "moe_intermediate_size")
	addInt("expert_shared_count", "n_shared_experts")
	addInt("leading_dense_block_count", "first_k_dense_replace")
	add("expert_gating_func", gg.U32(2)) // sigmoid
	glmGGUFRouting(add, c, hp, false)
	add("nextn_predict_layers", gg.U32(uint32(m.MTPDepth)))
	return base, own
}

// ggufAdder appends the architecture's keys to kvs: add a value, addInt
// config.json's integer key when present.
func ggufAdder(m *Model, hp Hparams, kvs *[]gg.KV) (add func(string, gg.Value), addInt func(k, key string)) {
	a := m.Spec.GGUF.Arch
	add = func(k string, v gg.Value) { *kvs = append(*kvs, gg.KV{Key: a + "." + k, Value: v}) }
	addInt = func(k, key string) {
		if n, ok := hp.Int(key); ok {
			add(k, gg.U32(uint32(n)))
		}
	}
	return add, addInt
}

// glmGGUFBase is the reference converter's TextModel keys for a GLM-4.x
// config, with kvHeads key-value heads (deepseek2 writes 1: MLA as MQA).
func glmGGUFBase(m *Model, hp Hparams, kvHeads int64) []gg.KV {
	c := m.Config
	var kvs []gg.KV
	add, addInt := ggufAdder(m, hp, &kvs)
	u := func(v int) gg.Value { return gg.U32(uint32(v)) }
	add("block_count", u(c.NumHiddenLayers+m.MTPDepth))
	addInt("context_length", "max_position_embeddings")
	add("embedding_length", u(c.HiddenSize))
	addInt("feed_forward_length", "intermediate_size")
	add("attention.head_count", u(c.NumAttentionHeads))
	add("attention.head_count_kv", gg.U32(uint32(kvHeads)))
	add("rope.freq_base", gg.Float(float32(c.RopeTheta)))
	add("attention.layer_norm_rms_epsilon", gg.Float(float32(c.RMSNormEps)))
	add("expert_count", u(c.NumExperts))
	add("expert_used_count", u(c.NumExpertsPerTok))
	addInt("expert_group_count", "n_group")
	addInt("expert_group_used_count", "topk_group")
	return kvs
}

// glmGGUFRouting adds routed_scaling_factor and norm_topk_prob when
// config.json has them (deepseek2 writes the latter only when true).
func glmGGUFRouting(add func(string, gg.Value), c *Config, hp Hparams, onlyTrue bool) {
	if _, ok := hp["routed_scaling_factor"]; ok {
		add("expert_weights_scale", gg.Float(float32(c.RoutedScalingFactor)))
	}
	if b, ok := hp["norm_topk_prob"].(bool); ok && (b || !onlyTrue) {
		add("expert_weights_norm", gg.Bool(b))
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

// glmHF is how vLLM (glm4_moe_mtp.py, glm4_moe_lite_mtp.py) and SGLang
// (glm4_moe_nextn.py) build the NextN layer: eh_proj an nn.Linear in both,
// shared_head.head a ParallelLMHead; SGLang names the layer model.decoder
// and its LM head model.shared_head.head (glm4_moe_nextn.py:70-78, :137-145).
func glmHF(c *Config, lite bool) HFSpec {
	layer := "model.layers." + strconv.Itoa(c.NumHiddenLayers) + "."
	class := "glm4_moe_mtp"
	if lite {
		class = "glm4_moe_lite_mtp"
	}
	return HFSpec{
		MTPClass: class, PlainVLLM: []string{"eh_proj"}, PlainSGLang: []string{"eh_proj"}, LMHeads: []string{"shared_head.head"},
		SGLangName: func(module string) string {
			rest, ok := strings.CutPrefix(module, layer)
			switch {
			case !ok:
				return module
			case rest == "shared_head.head":
				return "model.shared_head.head"
			default:
				return "model.decoder." + rest
			}
		},
	}
}
