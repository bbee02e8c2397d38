package families

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Hy3 (HYV3ForCausalLM, tencent/Hy3-preview): GQA with per-head q/k
// RMSNorms and full rotary, no biases; the first layers a dense SwiGLU MLP
// (first_k_dense_replace, or transformers' mlp_layer_types), the others a
// MoE: a sigmoid router (mlp.router.gate) whose scores plus a float32
// mlp.expert_bias choose the top k, the chosen scores renormalised
// (route_norm) times router_scaling_factor, plus an ungated shared expert
// (mlp.shared_mlp). The MTP layers follow the trunk's in the layer list
// (model.layers.{L+j}: enorm, hnorm, eh_proj over concat(embedding,
// hidden), a whole MoE decoder layer, final_layernorm; the trunk's
// embedding and lm_head serve every layer). llama.cpp's hy_v3 runs them
// chained (src/models/hy-v3.cpp graph_mtp, nextn_layer_offset: each depth
// its own layer, fed the hidden state the one before it computed, after
// its final_layernorm); the reference converter writes final_layernorm as
// nextn.shared_head_norm (conversion/hunyuan.py HYV3Model). See docs/hy.md.

// hyV3Family is the family's descriptor.
var hyV3Family = &model.Family{
	Name: "hy_v3", Title: hyV3Name,
	Docs:       "docs/hy.md",
	Layout:     "GQA with q/k norms, sigmoid routing with a float32 `expert_bias`, its MTP layers chained in the layer list (`GGUFSpec.ChainedHeads`), `final_layernorm` as the shared head's norm",
	ModelTypes: []string{"hy_v3"}, Arch: "HYV3ForCausalLM",
	ParseConfig: parseHyV3, Spec: specHyV3,
	MLX: model.MLXSpec{CombinedRefusal: "stock mlx-lm has no hy_v3 model (nor a loader keeping its MTP layers), so a combined " +
		hyV3Name + " file would carry a head nothing runs."},
	GGUF: model.GGUFSpec{
		// The pinned converter knows no Hy3 tokenizer hash; Hy4-preview's,
		// the Hy line's newest it knows, is assumed (inferred; docs/hy.md).
		Arch: "hy_v3", PreTokenizer: "hy_v4",
		Top:          model.NextNGGUFTop,
		Layer:        hyV3GGUFLayer,
		Hparams:      hyV3GGUFHparams,
		Metadata:     hyV3GGUFMetadata,
		ChainedHeads: true,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	// The lineage's NextN layer as vLLM and SGLang build it: eh_proj a torch
	// nn.Linear in both (vllm hy_v3_mtp.py:106; sglang
	// hunyuan_v3_nextn.py:60), the decoder layer under the checkpoint's
	// prefix model.layers.N in vLLM (hy_v3_mtp.py:108-113, :157) and as
	// model.decoder in SGLang (hunyuan_v3_nextn.py:68-74, its load_weights
	// mapping model.layers.N.* there); the LM head is the trunk's lm_head in
	// both (hy_v3_mtp.py:330-333; SGLang's set_embed_and_head). SGLang read
	// at the stored sglang commit 19321ff.
	HF: deepseekHF("hy_v3_mtp"),
}

func init() { model.RegisterFamily(hyV3Family) }

// hyV3Name is the family as its users know it.
const hyV3Name = "Hy3"

// hyV3Config is the family's own config.json keys, with HYV3Config's
// defaults (transformers' configuration class) where it has them.
type hyV3Config struct {
	NumSharedExperts    *int     `json:"num_shared_experts"`
	RouterScalingFactor *float64 `json:"router_scaling_factor"`
	RouteNorm           *bool    `json:"route_norm"`
	FirstKDenseReplace  *int     `json:"first_k_dense_replace"`
	MLPLayerTypes       []string `json:"mlp_layer_types"`
	AttentionBias       bool     `json:"attention_bias"`
	MLPBias             bool     `json:"mlp_bias"`
}

// hyV3Defaults are HYV3Config's.
var hyV3Defaults = model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 11158840}

func (k hyV3Config) sharedExperts() int {
	if k.NumSharedExperts == nil {
		return 1
	}
	return *k.NumSharedExperts
}

func (k hyV3Config) scaling() float64 {
	if k.RouterScalingFactor == nil {
		return 2.826
	}
	return *k.RouterScalingFactor
}

func (k hyV3Config) routeNorm() bool { return k.RouteNorm == nil || *k.RouteNorm }

// denseLayers is the number of leading dense layers: first_k_dense_replace
// (vLLM's hy_v3.py reads it), else the dense entries of mlp_layer_types,
// else HYV3Config's default, one.
func (k hyV3Config) denseLayers() int {
	switch {
	case k.FirstKDenseReplace != nil:
		return *k.FirstKDenseReplace
	case k.MLPLayerTypes != nil:
		return len(k.MLPLayerTypes) - len(slices.DeleteFunc(slices.Clone(k.MLPLayerTypes), func(t string) bool { return t == "dense" }))
	}
	return 1
}

func parseHyV3(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, hyV3Defaults)
	if err != nil {
		return nil, err
	}
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s is read in bf16 or block FP8 (weight_scale_inv, weight_block_size) only", q.QuantMethod, hyV3Name)
	}
	if !model.HasKey(raw, "head_dim") {
		c.HeadDim = 128 // HYV3Config's default, not hidden_size / heads
	}
	k, err := model.DecodeKeys[hyV3Config](c)
	if err != nil {
		return nil, err
	}
	c.SharedExpertIntermed = k.sharedExperts() * c.MoeIntermediateSize
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize}, model.PositiveKey{Name: "num_experts", Value: c.NumExperts},
		model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok}, model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize},
		model.PositiveKey{Name: "num_shared_experts", Value: k.sharedExperts()})
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	if k.MLPLayerTypes != nil {
		if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: "mlp_layer_types", Len: len(k.MLPLayerTypes)}); err != nil {
			return nil, err
		}
	}
	dense := k.denseLayers()
	switch {
	case k.AttentionBias || k.MLPBias:
		// llama.cpp's hy_v3 loads no bias: a biased checkpoint would draft without them.
		return nil, fmt.Errorf("attention_bias / mlp_bias is true: %s heads have no biases (llama.cpp's hy_v3 loads none)", hyV3Name)
	case dense < 0 || dense > c.NumHiddenLayers:
		return nil, fmt.Errorf("first_k_dense_replace %d is outside [0, num_hidden_layers %d]", dense, c.NumHiddenLayers)
	case k.MLPLayerTypes != nil && !slices.Equal(k.MLPLayerTypes, hyV3LayerTypes(dense, len(k.MLPLayerTypes))):
		// The head's layers route experts; only leading dense layers are a layout llama.cpp and vLLM share.
		return nil, fmt.Errorf("mlp_layer_types %v: %s takes leading dense layers only (then sparse)", k.MLPLayerTypes, hyV3Name)
	case k.scaling() <= 0:
		return nil, fmt.Errorf("router_scaling_factor is %v: it must be positive", k.scaling())
	case c.PartialRotaryFactor != 1:
		// hy_v3 rotates the whole head (its graph asserts n_rot = head_dim).
		return nil, fmt.Errorf("partial_rotary_factor is %v: %s rotates the whole head", c.PartialRotaryFactor, hyV3Name)
	}
	c.LayerTypes = slices.Repeat([]string{model.FullAttention}, c.NumHiddenLayers) // every layer full attention (reports)
	return c, nil
}

// hyV3LayerTypes is mlp_layer_types for dense leading dense layers of n.
func hyV3LayerTypes(dense, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "sparse"
		if i < dense {
			out[i] = "dense"
		}
	}
	return out
}

func specHyV3(c *model.Config) *model.Spec {
	k := *model.KeysOf[hyV3Config](c)
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	e, si, di := int64(c.NumExperts), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	q, kv, hd := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim), int64(c.HeadDim)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	common := []model.Want{
		w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h), // plain RMSNorms
		w("self_attn.q_proj.weight", 0, q, h), w("self_attn.k_proj.weight", 0, kv, h),
		w("self_attn.v_proj.weight", 0, kv, h), w("self_attn.o_proj.weight", 0, h, q),
		w("self_attn.q_norm.weight", 0, hd), w("self_attn.k_norm.weight", 0, hd),
	}
	dense := []model.Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	moe := []model.Want{
		w("mlp.router.gate.weight", model.RoleRouter, e, h),
		w("mlp.expert_bias", model.RoleKeepDType, e), // float32 in the release (HYV3's _keep_in_fp32_modules)
		w("mlp.shared_mlp.gate_proj.weight", 0, si, h), w("mlp.shared_mlp.up_proj.weight", 0, si, h),
		w("mlp.shared_mlp.down_proj.weight", 0, h, si),
	}
	nDense := k.denseLayers()
	isMoE := func(i int) bool { return i >= nDense }
	layer := func(i int) []model.Want {
		if isMoE(i) {
			return append(slices.Clone(common), moe...)
		}
		return append(slices.Clone(common), dense...)
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("final_layernorm.weight", 0, h),
		// The release has neither (the trunk's serve); the converter writes them when present.
		w("embed_tokens.weight", model.RoleOptional, v, h), w("shared_head.head.weight", model.RoleOptional, v, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		TrunkTop:   []model.Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE:        model.SwitchGLUExperts(),
		Experts:    func(layout model.ExpertLayout) []model.Want { return model.NextNExperts(c, layout) },
		MoELayer:   isMoE,
		Forward:    hyV3Forward,
		Report:     hyV3Report(c, k),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// hyV3Report is what inspect says of a Hy3 config.
func hyV3Report(c *model.Config, k hyV3Config) model.ReportSpec {
	norm := "weights as chosen"
	if k.routeNorm() {
		norm = "weights renormalised"
	}
	dense := min(k.denseLayers(), c.NumHiddenLayers)
	return model.ReportSpec{
		Dims: map[string]any{"first_k_dense_replace": dense, "num_shared_experts": k.sharedExperts(),
			"router_scaling_factor": k.scaling(), "route_norm": k.routeNorm()},
		Attention: fmt.Sprintf("GQA, heads %d/%d of dim %d, q/k norms, full rotary (theta %v)", c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RopeTheta),
		Layers:    fmt.Sprintf("%d (%d dense MLP, %d MoE), all full attention", c.NumHiddenLayers, dense, c.NumHiddenLayers-dense),
		Routing:   fmt.Sprintf("sigmoid, expert_bias for the choice, %s, scaled by %v, %d ungated shared expert(s)", norm, k.scaling(), k.sharedExperts()),
	}
}

// hyV3GGUFLayer is gguf-py's hy_v3 tensor map, from the suffixes under a
// decoder layer (final_layernorm is the converter's nextn.shared_head_norm;
// mlp.expert_bias is named whole, blk.N.exp_probs_b, as hy_v3's loader reads it).
var hyV3GGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"mlp.router.gate.weight":          gg.Weight(gg.KindFFNGateInp),
	"mlp.expert_bias":                 gg.BareName(gg.KindFFNExpProbsB),
	"mlp.shared_mlp.gate_proj.weight": gg.Weight(gg.KindFFNGateShexp),
	"mlp.shared_mlp.up_proj.weight":   gg.Weight(gg.KindFFNUpShexp),
	"mlp.shared_mlp.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
	"final_layernorm.weight":          gg.Weight(gg.KindNextNSharedHeadNorm),
})

// hyV3GGUFHparams fills what HYV3Config always has and config.json may
// leave out, among the keys TextModel reads (the converter reads the
// configuration object): head_dim, whose default is 128.
func hyV3GGUFHparams(m *model.Model, h model.Hparams) {
	if _, ok := h["head_dim"]; !ok {
		h["head_dim"] = json.Number(strconv.Itoa(m.Config.HeadDim))
	}
}

// hyV3GGUFMetadata is the keys HYV3Model.set_gguf_parameters adds after
// TextModel's: the expert widths, the routing's renormalisation, scale and
// sigmoid gating, then the MTP layer count.
func hyV3GGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, k := m.Config, *model.KeysOf[hyV3Config](m.Config)
	g.U32("expert_feed_forward_length", c.MoeIntermediateSize)
	g.U32("expert_shared_feed_forward_length", c.MoeIntermediateSize*k.sharedExperts())
	g.Bool("expert_weights_norm", k.routeNorm())
	g.F32("expert_weights_scale", k.scaling())
	g.U32("expert_gating_func", model.GGUFExpertGating["sigmoid"])
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// hyV3Forward is the MTP forward of the modelling code (vLLM's
// hy_v3_mtp.py): per MTP layer its own eh_proj and norms, GQA with q/k
// norms, sigmoid top-k routing with the expert bias (one group), the
// layer's final_layernorm before the shared LM head.
func hyV3Forward(m *model.Model) model.Forward {
	c, k := m.Config, *model.KeysOf[hyV3Config](m.Config)
	p := m.HeadLayerPrefix(0)
	f := model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "final_layernorm.weight", Eps: c.RMSNormEps}
	for j := range m.MTPDepth {
		p := m.HeadLayerPrefix(j)
		sa, mp := p+"self_attn.", p+"mlp."
		f.Layers = append(f.Layers, model.ForwardLayer{Prefix: p, InputNorm: p + "input_layernorm.weight",
			PostAttentionNorm: p + "post_attention_layernorm.weight",
			Attention: model.Attention{Kind: model.AttnGQA, Prefix: sa,
				Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
				QNorm: sa + "q_norm.weight", KNorm: sa + "k_norm.weight",
				Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta},
			MLP: model.MLP{Kind: model.MLPSparseMoE, Prefix: mp, Router: mp + "router.gate.weight",
				Gate: mp + "switch_mlp.gate_proj.weight", Up: mp + "switch_mlp.up_proj.weight", Down: mp + "switch_mlp.down_proj.weight",
				Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: k.routeNorm(),
				SharedPrefix: mp + "shared_mlp.", SharedGate: mp + "shared_mlp.gate_proj.weight",
				SharedUp: mp + "shared_mlp.up_proj.weight", SharedDown: mp + "shared_mlp.down_proj.weight",
				Routing: model.RouteSigmoidGroupTopK, ScoreCorrectionBias: mp + "expert_bias",
				Groups: 1, TopKGroups: 1, ScalingFactor: k.scaling()}})
	}
	return f
}
