package families

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// The DeepSeek-V3 lineage (DeepSeek-V3's modelling code and the families
// built on it: GLM-4.5/4.6/4.7, GLM-4.7-Flash): the NextN (MTP) layers in
// the layer list, layer num_hidden_layers + j (eh_proj over
// concat(enorm(embedding), hnorm(hidden)), embedding first, a whole MoE
// decoder layer, shared_head.norm, and the layer's own embed_tokens and
// shared_head.head, copies of the trunk's); the first first_k_dense_replace
// layers dense, the others a MoE with sigmoid group routing
// (e_score_correction_bias, n_group / topk_group, routed_scaling_factor)
// and shared_experts; plain RMSNorms; attention either GQA (q/k/v biases,
// q/k norms: GLM-4.5) or multi-head latent attention (q_a/q_b,
// kv_a_proj_with_mqa, kv_b_proj: DeepSeek-V2/V3, GLM-4.7-Flash). Each family
// of the lineage is a deepseekFamily in its own file; this file holds what
// they share, their config keys (DeepSeekConfig) included.

// DeepSeekConfig is the lineage's own config.json keys, decoded by its
// families (KeysOf[DeepSeekConfig]): routed and shared expert counts, sigmoid
// routing over expert groups, leading dense layers, attention biases and
// q/k norms, multi-head latent attention.
type DeepSeekConfig struct {
	NRoutedExperts      int     `json:"n_routed_experts"`
	NSharedExperts      int     `json:"n_shared_experts"`
	NGroup              int     `json:"n_group"`
	TopkGroup           int     `json:"topk_group"`
	RoutedScalingFactor float64 `json:"routed_scaling_factor"`
	ScoringFunc         string  `json:"scoring_func"`
	FirstKDenseReplace  int     `json:"first_k_dense_replace"`
	AttentionBias       bool    `json:"attention_bias"`
	UseQKNorm           bool    `json:"use_qk_norm"`
	QLoraRank           *int    `json:"q_lora_rank"`
	KVLoraRank          int     `json:"kv_lora_rank"`
	QKNopeHeadDim       int     `json:"qk_nope_head_dim"`
	QKRopeHeadDim       int     `json:"qk_rope_head_dim"`
	VHeadDim            int     `json:"v_head_dim"`
	// The DSA indexer (DeepSeek-V3.2): its heads, head size and the keys
	// it selects per query.
	IndexNHeads  int `json:"index_n_heads"`
	IndexHeadDim int `json:"index_head_dim"`
	IndexTopk    int `json:"index_topk"`
	// GLM-5.2's per-layer indexer modes ("full" runs the layer's own
	// indexer, "shared" reuses the previous full layer's choice and has no
	// indexer tensors), or the keys GlmMoeDsaConfig derives them from.
	IndexerTypes        []string        `json:"indexer_types"`
	IndexTopkPattern    json.RawMessage `json:"index_topk_pattern"`
	IndexTopkFreq       *int            `json:"index_topk_freq"`
	IndexSkipTopkOffset *int            `json:"index_skip_topk_offset"`
	// IndexerTypesGiven: config.json itself lists indexer_types (GLM-5.2's
	// does; GLM-5's and GLM-5.1's do not, every layer full).
	IndexerTypesGiven bool `json:"-"`
}

// DecodeDeepSeekConfig decodes the lineage's keys of a config DecodeConfig
// read into KeysOf[DeepSeekConfig](c) (for test families of the lineage too).
func DecodeDeepSeekConfig(c *model.Config) error {
	_, err := model.DecodeKeys[DeepSeekConfig](c)
	return err
}

// deepseekFamily is one family of the lineage: what its users call it (in
// every message about their config), its configuration class's defaults,
// its attention, and what it says of an FP8 release it cannot read.
type deepseekFamily struct {
	name     string // "GLM-4.5/4.6/4.7"
	defaults model.ConfigDefaults
	mla      bool
	// quantRefusal says why a quantization_config other than block FP8 is
	// refused (given its quant_method).
	quantRefusal func(method string) string
}

// parseDeepSeekConfig decodes a config of the lineage: the routed experts
// are n_routed_experts, the shared experts n_shared_experts ×
// moe_intermediate_size wide; an FP8 release is read only in the block-FP8
// layout.
func parseDeepSeekConfig(raw []byte, f deepseekFamily) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, f.defaults)
	if err != nil {
		return nil, err
	}
	if err := DecodeDeepSeekConfig(c); err != nil {
		return nil, err
	}
	ds := model.KeysOf[DeepSeekConfig](c)
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s", q.QuantMethod, f.quantRefusal(q.QuantMethod))
	}
	c.NumExperts = ds.NRoutedExperts
	c.SharedExpertIntermed = ds.NSharedExperts * c.MoeIntermediateSize
	keys := append(c.CommonKeys(),
		model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize}, model.PositiveKey{Name: "n_routed_experts", Value: ds.NRoutedExperts},
		model.PositiveKey{Name: "n_shared_experts", Value: ds.NSharedExperts}, model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok},
		model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize}, model.PositiveKey{Name: "n_group", Value: ds.NGroup},
		model.PositiveKey{Name: "topk_group", Value: ds.TopkGroup})
	if f.mla {
		keys = append(keys, model.PositiveKey{Name: "kv_lora_rank", Value: ds.KVLoraRank}, model.PositiveKey{Name: "qk_nope_head_dim", Value: ds.QKNopeHeadDim},
			model.PositiveKey{Name: "qk_rope_head_dim", Value: ds.QKRopeHeadDim}, model.PositiveKey{Name: "v_head_dim", Value: ds.VHeadDim})
		if ds.QLoraRank != nil {
			keys = append(keys, model.PositiveKey{Name: "q_lora_rank", Value: *ds.QLoraRank})
		}
	}
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	switch {
	case ds.FirstKDenseReplace < 0 || ds.FirstKDenseReplace > c.NumHiddenLayers:
		return nil, fmt.Errorf("first_k_dense_replace %d is outside [0, num_hidden_layers %d]", ds.FirstKDenseReplace, c.NumHiddenLayers)
	case ds.NRoutedExperts%ds.NGroup != 0 || ds.TopkGroup > ds.NGroup:
		return nil, fmt.Errorf("n_routed_experts %d, n_group %d, topk_group %d: the experts do not split into the groups", ds.NRoutedExperts, ds.NGroup, ds.TopkGroup)
	case ds.QKRopeHeadDim%2 != 0:
		return nil, fmt.Errorf("qk_rope_head_dim %d is odd", ds.QKRopeHeadDim)
	case ds.RoutedScalingFactor < 0 || ds.RoutedScalingFactor == 0 && model.HasKey(raw, "routed_scaling_factor"):
		// It scales every routed expert's output: zero or negative turns the
		// experts off or around (absent, the modelling code's default is 1).
		return nil, fmt.Errorf("routed_scaling_factor is %v: it must be positive", ds.RoutedScalingFactor)
	case ds.ScoringFunc != "" && ds.ScoringFunc != "sigmoid":
		// The releases route by sigmoid (the modelling code has no other); a
		// config saying otherwise would be converted as if it did not.
		return nil, fmt.Errorf("scoring_func is %q: %s heads route experts by sigmoid scores only", ds.ScoringFunc, f.name)
	}
	c.LayerTypes = slices.Repeat([]string{model.FullAttention}, c.NumHiddenLayers) // every layer full attention (reports)
	return c, nil
}

// deepseekMLA reports multi-head latent attention.
func deepseekMLA(c *model.Config) bool { return model.KeysOf[DeepSeekConfig](c).KVLoraRank > 0 }

// deepseekCombinedRefusal is why no combined MLX file is written for a family of the lineage.
func deepseekCombinedRefusal(name string) string {
	return "stock mlx-lm drops the NextN layer of " + name + " checkpoints (its sanitize keeps layers below num_hidden_layers only), so a combined file would carry a head nothing runs."
}

// deepseekSpec is the lineage's layout, with f's attention; the GGUF,
// MLX and OpenVINO tables are the family's to fill.
func deepseekSpec(c *model.Config, f deepseekFamily) *model.Spec {
	ds := model.KeysOf[DeepSeekConfig](c)
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	e, si, di := int64(c.NumExperts), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	var attention []model.Want
	if f.mla {
		nope, rope, vd := int64(ds.QKNopeHeadDim), int64(ds.QKRopeHeadDim), int64(ds.VHeadDim)
		heads, kl := int64(c.NumAttentionHeads), int64(ds.KVLoraRank)
		if ds.QLoraRank != nil {
			ql := int64(*ds.QLoraRank)
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
		attention = []model.Want{w("self_attn.q_proj.weight", 0, q, h), w("self_attn.k_proj.weight", 0, kv, h),
			w("self_attn.v_proj.weight", 0, kv, h), w("self_attn.o_proj.weight", 0, h, q)}
		if ds.AttentionBias {
			attention = append(attention, w("self_attn.q_proj.bias", 0, q), w("self_attn.k_proj.bias", 0, kv), w("self_attn.v_proj.bias", 0, kv))
		}
		if ds.UseQKNorm {
			d := int64(c.HeadDim)
			attention = append(attention, w("self_attn.q_norm.weight", 0, d), w("self_attn.k_norm.weight", 0, d))
		}
	}
	norms := []model.Want{w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h)} // plain RMSNorm
	dense := []model.Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	moe := []model.Want{
		w("mlp.gate.weight", model.RoleRouter, e, h),
		w("mlp.gate.e_score_correction_bias", model.RoleKeepDType, e), // float32 in the releases; mlx-vlm keeps it so
		w("mlp.shared_experts.gate_proj.weight", 0, si, h), w("mlp.shared_experts.up_proj.weight", 0, si, h),
		w("mlp.shared_experts.down_proj.weight", 0, h, si),
	}
	isMoE := func(i int) bool { return i >= ds.FirstKDenseReplace }
	layer := func(i int) []model.Want {
		ws := append(slices.Clone(norms), attention...)
		if isMoE(i) {
			return append(ws, moe...)
		}
		return append(ws, dense...)
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("shared_head.norm.weight", 0, h),
		w("embed_tokens.weight", model.RoleOptional, v, h), w("shared_head.head.weight", model.RoleOptional, v, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		TrunkTop:   []model.Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE:        model.SwitchGLUExperts(),
		Experts:    func(layout model.ExpertLayout) []model.Want { return model.NextNExperts(c, layout) },
		MoELayer:   isMoE,
		Forward:    deepseekForward,
		Report:     deepseekReport(c, f.mla),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// deepseekReport is what inspect says of a config of the lineage: its
// attention (GQA, or MLA), its leading dense layers and its routing.
func deepseekReport(c *model.Config, mla bool) model.ReportSpec {
	ds := model.KeysOf[DeepSeekConfig](c)
	norm, normTopk := "weights as chosen", c.NormTopkProb == nil || *c.NormTopkProb
	if normTopk {
		norm = "weights renormalised"
	}
	r := model.ReportSpec{
		Dims: map[string]any{
			"first_k_dense_replace": ds.FirstKDenseReplace, "n_shared_experts": ds.NSharedExperts,
			"n_group": ds.NGroup, "topk_group": ds.TopkGroup, "routed_scaling_factor": ds.RoutedScalingFactor,
			"partial_rotary_factor": c.PartialRotaryFactor, "norm_topk_prob": normTopk,
		},
		Layers:  fmt.Sprintf("%d (%d dense MLP, %d MoE), all full attention", c.NumHiddenLayers, min(ds.FirstKDenseReplace, c.NumHiddenLayers), max(0, c.NumHiddenLayers-ds.FirstKDenseReplace)),
		Routing: fmt.Sprintf("sigmoid, e_score_correction_bias for the choice, n_group %d, topk_group %d, %s, scaled by %v", ds.NGroup, ds.TopkGroup, norm, ds.RoutedScalingFactor),
	}
	if mla {
		ql := "none (q_proj)"
		if ds.QLoraRank != nil {
			ql = strconv.Itoa(*ds.QLoraRank)
			r.Dims["q_lora_rank"] = *ds.QLoraRank
		}
		for k, v := range map[string]int{"kv_lora_rank": ds.KVLoraRank, "qk_nope_head_dim": ds.QKNopeHeadDim, "qk_rope_head_dim": ds.QKRopeHeadDim, "v_head_dim": ds.VHeadDim} {
			r.Dims[k] = v
		}
		r.Attention = fmt.Sprintf("multi-head latent attention, %d heads: q_lora_rank %s, kv_lora_rank %d, qk dims %d nope + %d rope, v dim %d (theta %v)",
			c.NumAttentionHeads, ql, ds.KVLoraRank, ds.QKNopeHeadDim, ds.QKRopeHeadDim, ds.VHeadDim, c.RopeTheta)
		return r
	}
	r.Dims["attention_bias"], r.Dims["use_qk_norm"] = ds.AttentionBias, ds.UseQKNorm
	r.Attention = fmt.Sprintf("GQA, heads %d/%d of dim %d (rotary %d, theta %v)", c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RotaryDim(), c.RopeTheta)
	if ds.AttentionBias {
		r.Attention += ", q/k/v biases"
	}
	if ds.UseQKNorm {
		r.Attention += ", q/k norms"
	}
	return r
}

// deepseekGGUFLayer is gguf-py's tensor map of the lineage's GQA layers
// (glm4moe) over the NextN base: their biases, and post_attention_layernorm
// as attn_post_norm.
var deepseekGGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"post_attention_layernorm.weight": gg.Weight(gg.KindAttnPostNorm),
	"self_attn.q_proj.bias":           gg.Bias(gg.KindAttnQ),
	"self_attn.k_proj.bias":           gg.Bias(gg.KindAttnK),
	"self_attn.v_proj.bias":           gg.Bias(gg.KindAttnV),
})

// dsaIndexer is the DSA indexer's tensors in a layer that runs it
// (DeepSeek-V3.2, GLM-5.2): wq_b over the query latent, wk, the LayerNorm
// k_norm with its bias, weights_proj.
func dsaIndexer(c *model.Config) []model.Want {
	ds := model.KeysOf[DeepSeekConfig](c)
	h, nh, hd, ql := int64(c.HiddenSize), int64(ds.IndexNHeads), int64(ds.IndexHeadDim), int64(derefOr(ds.QLoraRank, 0))
	return []model.Want{
		{Suffix: "self_attn.indexer.wq_b.weight", Shape: []int64{nh * hd, ql}},
		{Suffix: "self_attn.indexer.wk.weight", Shape: []int64{hd, h}},
		{Suffix: "self_attn.indexer.k_norm.weight", Shape: []int64{hd}},
		{Suffix: "self_attn.indexer.k_norm.bias", Shape: []int64{hd}},
		{Suffix: "self_attn.indexer.weights_proj.weight", Shape: []int64{nh, h}},
	}
}

// checkDSAIndexer checks the keys of the DSA indexer: it reads the query
// latent, so q_lora_rank is required.
func checkDSAIndexer(ds *DeepSeekConfig) error {
	return model.CheckPositive(model.PositiveKey{Name: "q_lora_rank", Value: derefOr(ds.QLoraRank, 0)}, model.PositiveKey{Name: "index_n_heads", Value: ds.IndexNHeads},
		model.PositiveKey{Name: "index_head_dim", Value: ds.IndexHeadDim}, model.PositiveKey{Name: "index_topk", Value: ds.IndexTopk})
}

func derefOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

// dsaGGUFLayer is deepseek2's tensor map and the DSA indexer's (gguf-py's
// deepseek32 and glm-dsa maps).
var dsaGGUFLayer = func() map[string]gg.TensorName {
	m := map[string]gg.TensorName{
		"self_attn.indexer.wq_b.weight":         gg.Weight(gg.KindIndexerAttnQB),
		"self_attn.indexer.wk.weight":           gg.Weight(gg.KindIndexerAttnK),
		"self_attn.indexer.k_norm.weight":       gg.Weight(gg.KindIndexerKNorm),
		"self_attn.indexer.k_norm.bias":         gg.Bias(gg.KindIndexerKNorm),
		"self_attn.indexer.weights_proj.weight": gg.Weight(gg.KindIndexerProj),
	}
	for k, v := range deepseek2GGUFLayer {
		m[k] = v
	}
	return m
}()

// deepseek2GGUFLayer is gguf-py's deepseek2 tensor map of the lineage's
// MLA layers (kv_b_proj becomes attn_k_b and attn_v_b, split by the target).
var deepseek2GGUFLayer = func() map[string]gg.TensorName {
	m := map[string]gg.TensorName{
		"post_attention_layernorm.weight":     gg.Weight(gg.KindFFNNorm),
		"self_attn.q_proj.weight":             gg.Weight(gg.KindAttnQ),
		"self_attn.q_a_proj.weight":           gg.Weight(gg.KindAttnQA),
		"self_attn.q_a_layernorm.weight":      gg.Weight(gg.KindAttnQANorm),
		"self_attn.q_b_proj.weight":           gg.Weight(gg.KindAttnQB),
		"self_attn.kv_a_proj_with_mqa.weight": gg.Weight(gg.KindAttnKVAMQA),
		"self_attn.kv_a_layernorm.weight":     gg.Weight(gg.KindAttnKVANorm),
	}
	for k, v := range deepseekGGUFLayer {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return m
}()

// deepseekGGUFRouting sets routed_scaling_factor and norm_topk_prob when
// config.json has them (deepseek2 writes the latter only when true).
func deepseekGGUFRouting(g *model.GGUFKeys, h model.Hparams, onlyTrue bool) {
	if v, ok := h["routed_scaling_factor"].(json.Number); ok {
		g.F32FromNumber("expert_weights_scale", v)
	}
	if b, ok := h["norm_topk_prob"].(bool); ok && (b || !onlyTrue) {
		g.Bool("expert_weights_norm", b)
	}
}

// deepseek2GGUFHparams is DeepseekV2Model's change to the values before
// TextModel's keys: MLA runs as MQA (one key-value head). (Its
// rms_norm_eps default of 1e-6 never applies: the configuration class has one.)
func deepseek2GGUFHparams(m *model.Model, h model.Hparams) {
	h["num_key_value_heads"] = json.Number("1")
}

// deepseek2GGUFMetadata is the keys DeepseekV2Model.set_gguf_parameters adds
// after TextModel's (MLA as MQA: one key-value head of kv_lora_rank +
// qk_rope_head_dim), then the NextN layer count.
func deepseek2GGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, ds := m.Config, model.KeysOf[DeepSeekConfig](m.Config)
	dense := 0 // first_k_dense_replace's default: none with routed experts, all without
	if _, ok := h["n_routed_experts"]; !ok {
		dense = c.NumHiddenLayers
	}
	if n, ok := h.Int("first_k_dense_replace"); ok {
		dense = int(n)
	}
	g.U32("leading_dense_block_count", dense)
	g.U32("vocab_size", c.VocabSize)
	if ds.QLoraRank != nil {
		g.U32("attention.q_lora_rank", *ds.QLoraRank)
	}
	g.U32("attention.kv_lora_rank", ds.KVLoraRank)
	g.U32("attention.key_length", ds.KVLoraRank+ds.QKRopeHeadDim)
	g.U32("attention.value_length", ds.KVLoraRank)
	g.U32("attention.key_length_mla", ds.QKNopeHeadDim+ds.QKRopeHeadDim)
	g.U32("attention.value_length_mla", ds.VHeadDim)
	if err := g.U32FromHparams(h, "expert_feed_forward_length", "moe_intermediate_size", "intermediate_size"); err != nil {
		return err
	}
	if err := g.U32FromHparams(h, "expert_count", "n_routed_experts"); err != nil {
		return err
	}
	g.U32("expert_shared_count", ds.NSharedExperts)
	deepseekGGUFRouting(g, h, true)
	g.U32("rope.dimension_count", ds.QKRopeHeadDim)
	if v, ok := model.RopeParameters(h)["mscale_all_dim"].(json.Number); ok {
		f, _ := v.Float64()
		g.F32("rope.scaling.yarn_log_multiplier", 0.1*f)
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// deepseekForward is the NextN forward of the modelling code: per MTP layer
// its own eh_proj, norms and shared head; GQA with biases (or MLA) and
// sigmoid group routing.
func deepseekForward(m *model.Model) model.Forward {
	c, ds := m.Config, model.KeysOf[DeepSeekConfig](m.Config)
	p := m.HeadLayerPrefix(0)
	f := model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "shared_head.norm.weight", Eps: c.RMSNormEps}
	for j := range m.MTPDepth {
		p := m.HeadLayerPrefix(j)
		sa, mp := p+"self_attn.", p+"mlp."
		at := model.Attention{Kind: model.AttnGQA, Prefix: sa,
			Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
			Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta}
		if ds.AttentionBias {
			at.QBias, at.KBias, at.VBias = sa+"q_proj.bias", sa+"k_proj.bias", sa+"v_proj.bias"
		}
		if ds.UseQKNorm {
			at.QNorm, at.KNorm = sa+"q_norm.weight", sa+"k_norm.weight"
		}
		if deepseekMLA(c) {
			at = model.Attention{Kind: model.AttnMLA, Prefix: sa, Q: sa + "q_proj.weight", O: sa + "o_proj.weight",
				KVA: sa + "kv_a_proj_with_mqa.weight", KVANorm: sa + "kv_a_layernorm.weight", KVB: sa + "kv_b_proj.weight",
				Heads: c.NumAttentionHeads, KVLoraRank: ds.KVLoraRank, QKNopeHeadDim: ds.QKNopeHeadDim,
				QKRopeHeadDim: ds.QKRopeHeadDim, VHeadDim: ds.VHeadDim, RotaryDim: ds.QKRopeHeadDim, RopeTheta: c.RopeTheta}
			if ds.QLoraRank != nil {
				at.Q, at.QA, at.QANorm, at.QLoraRank = sa+"q_b_proj.weight", sa+"q_a_proj.weight", sa+"q_a_layernorm.weight", *ds.QLoraRank
			}
		}
		f.Layers = append(f.Layers, model.ForwardLayer{Prefix: p, InputNorm: p + "input_layernorm.weight",
			PostAttentionNorm: p + "post_attention_layernorm.weight", Attention: at,
			MLP: model.MLP{Kind: model.MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight",
				Gate: p + "mlp.switch_mlp.gate_proj.weight", Up: p + "mlp.switch_mlp.up_proj.weight", Down: p + "mlp.switch_mlp.down_proj.weight",
				Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: c.NormTopkProb == nil || *c.NormTopkProb,
				SharedPrefix: mp + "shared_experts.", SharedGate: mp + "shared_experts.gate_proj.weight",
				SharedUp: mp + "shared_experts.up_proj.weight", SharedDown: mp + "shared_experts.down_proj.weight",
				Routing: model.RouteSigmoidGroupTopK, ScoreCorrectionBias: mp + "gate.e_score_correction_bias",
				Groups: ds.NGroup, TopKGroups: ds.TopkGroup, ScalingFactor: ds.RoutedScalingFactor}})
	}
	return f
}

// deepseekHF is how vLLM (its <class>.py, e.g. glm4_moe_mtp.py) and SGLang
// (glm4_moe_nextn.py and its siblings) build the lineage's NextN layer:
// eh_proj an nn.Linear in both, shared_head.head a ParallelLMHead; SGLang
// names the layer model.decoder and its LM head model.shared_head.head
// (sglang glm4_moe_nextn.py:70-78, :137-145).
func deepseekHF(class string) model.HFSpec {
	return model.HFSpec{
		MTPClass: class, PlainVLLM: []string{"eh_proj"}, PlainSGLang: []string{"eh_proj"}, LMHeads: []string{"shared_head.head"},
		SGLangName: func(c *model.Config, module string) string {
			rest, ok := strings.CutPrefix(module, "model.layers."+strconv.Itoa(c.NumHiddenLayers)+".")
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
