package families

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Nemotron-H MoE (NemotronHForCausalLM with routed experts: Nemotron 3
// Nano, Super): a hybrid trunk under backbone.* whose layers are, as
// hybrid_override_pattern spells them, Mamba-2 mixers (M), attention
// without positions (*) and MoE blocks (E: ReLU² experts without a gate, a
// ReLU² shared expert, sigmoid routing with e_score_correction_bias, and
// in Super the latent projections fc1_latent_proj / fc2_latent_proj around
// the experts), each a pre-norm residual block with one plain RMSNorm. Its
// MTP head sits apart as mtp_hybrid_override_pattern "*E" says: mtp.layers.0
// is the attention sub-layer, which also holds the NextN input fusion
// (enorm, hnorm, eh_proj over concat(embedding, hidden)), mtp.layers.1 the
// MoE sub-layer with final_layernorm; llama.cpp folds the two into one block
// n_layer (nemotron_h_moe; conversion/nemotron.py _MTP_SPECIAL_RENAMES) and
// drafts from the trunk's hidden state after its final norm
// (src/models/nemotron-h-moe.cpp graph_mtp). The dense Nemotron-H
// (nemotron_h, no routed experts) has no MTP graph and is refused. See
// docs/nemotron.md.

// nemotronHFamily is the family's descriptor.
var nemotronHFamily = &model.Family{
	Name: "nemotron_h", Title: "Nemotron-H",
	Docs:       "docs/nemotron.md",
	Layout:     "the head's two sub-layers (`mtp.layers.0` attention + NextN fusion, `mtp.layers.1` MoE) folded into one block (`Spec.HeadOneLayer`), gateless ReLU² experts with latent projections (`MoE.NoGate`/`Width`), `backbone.*`",
	ModelTypes: []string{"nemotron_h"}, Arch: "NemotronHForCausalLM",
	ParseConfig: parseNemotronH, Spec: specNemotronH,
	// mlx-vlm's nemotron_h_mtp splitter: the head's names without mtp.,
	// experts stacked as switch_mlp.fc1 / fc2, block_size depth + 1, the
	// router (mixer.gate) never quantized.
	MLX: model.MLXSpec{DrafterModelType: "nemotron_h_mtp", DrafterBlockExtra: 1, DrafterRoutersFloat: true,
		DrafterName:     func(rel string) string { return strings.TrimPrefix(rel, "layers.0.") },
		CombinedRefusal: "stock mlx-lm drops the MTP head of Nemotron-H checkpoints (its sanitize removes mtp.*), so a combined file would carry a head nothing runs."},
	GGUF: model.GGUFSpec{Arch: "nemotron_h_moe", PreTokenizer: "pixtral", Top: nemotronHGGUFTop, Layer: nemotronHGGUFLayer,
		HeadBlockFromSubLayer: true, PermuteQK: true, Hparams: nemotronHGGUFHparams, Metadata: nemotronHGGUFMetadata},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	// vLLM 0.32.0 has nemotron_h_mtp.py, but how it and SGLang build the
	// head under a repo's quantization is not ported to the rules yet.
	// Both runtimes build the head under the checkpoint's names
	// (mtp.layers.{i}.*: vllm nemotron_h_mtp.py:271-283, :369-373; sglang
	// nemotron_h_mtp.py's NemotronHMultiTokenPredictor, prefix "mtp") with
	// the repo's quantization config, eh_proj included: a
	// ColumnParallelLinear given quant_config in both (vllm
	// nemotron_h_mtp.py:75-85, :164-174; sglang nemotron_h_mtp.py's
	// NemotronHMTP*DecoderLayer), so no module is plain and no class
	// overrides the config. The LM head is the trunk's.
	HF: model.HFSpec{MTPClass: "nemotron_h_mtp"},
}

func init() { model.RegisterFamily(nemotronHFamily) }

// NemotronHConfig is Nemotron-H's own config.json keys (KeysOf[NemotronHConfig]),
// with NemotronHConfig's defaults (transformers 5) where it has them.
type NemotronHConfig struct {
	HybridOverridePattern    string   `json:"hybrid_override_pattern"`
	LayersBlockType          []string `json:"layers_block_type"`
	MTPHybridOverridePattern string   `json:"mtp_hybrid_override_pattern"`
	MTPLayersBlockType       []string `json:"mtp_layers_block_type"`
	MambaNumHeads            int      `json:"mamba_num_heads"`
	MambaHeadDim             int      `json:"mamba_head_dim"`
	NGroups                  int      `json:"n_groups"`
	SSMStateSize             int      `json:"ssm_state_size"`
	ConvKernel               int      `json:"conv_kernel"`
	UseConvBias              bool     `json:"use_conv_bias"`
	NRoutedExperts           int      `json:"n_routed_experts"`
	NSharedExperts           int      `json:"n_shared_experts"`
	SharedExpertIntermediate int      `json:"moe_shared_expert_intermediate_size"`
	MoELatentSize            *int     `json:"moe_latent_size"`
	NGroup                   int      `json:"n_group"`
	TopkGroup                int      `json:"topk_group"`
	RoutedScalingFactor      float64  `json:"routed_scaling_factor"`
	LayerNormEpsilon         float64  `json:"layer_norm_epsilon"`
	AttentionBias            bool     `json:"attention_bias"`
	MLPHiddenAct             string   `json:"mlp_hidden_act"`

	// Pattern and MTPPattern are the layer kinds as pattern characters
	// (M Mamba-2, * attention, E MoE), from whichever key the config uses.
	Pattern, MTPPattern string `json:"-"`
}

// nemotronHDefaults are NemotronHConfig's defaults for the keys the
// family reads (transformers 5.19, configuration_nemotron_h.py).
func nemotronHDefaults() NemotronHConfig {
	return NemotronHConfig{MambaNumHeads: 128, MambaHeadDim: 64, NGroups: 8, SSMStateSize: 128, ConvKernel: 4, UseConvBias: true,
		NRoutedExperts: 8, NSharedExperts: 1, SharedExpertIntermediate: 7688, NGroup: 1, TopkGroup: 1, RoutedScalingFactor: 1,
		LayerNormEpsilon: 1e-5, MLPHiddenAct: "relu2"}
}

// nemotronHKinds maps layers_block_type's names to pattern characters.
var nemotronHKinds = map[string]byte{"mamba": 'M', "linear_attention": 'M', "attention": '*', "full_attention": '*', "moe": 'E'}

// nemotronHPattern is a layer list as pattern characters, from a pattern
// string or a list of block types; key names the config key for messages.
func nemotronHPattern(s string, list []string, key, listKey string) (string, error) {
	if s == "" && list != nil {
		var b strings.Builder
		for _, t := range list {
			c, ok := nemotronHKinds[t]
			if !ok {
				return "", fmt.Errorf("%s has a %q block: Nemotron-H MoE layers are mamba, attention or moe", listKey, t)
			}
			b.WriteByte(c)
		}
		return b.String(), nil
	}
	for _, c := range s {
		if c != 'M' && c != '*' && c != 'E' {
			return "", fmt.Errorf("%s %q has a %q layer: Nemotron-H MoE layers are M (Mamba-2), * (attention) or E (MoE)", key, s, c)
		}
	}
	return s, nil
}

func parseNemotronH(raw []byte) (*model.Config, error) {
	if model.HasKey(raw, "llm_config") || model.HasKey(raw, "text_config") {
		return nil, fmt.Errorf("a nested Nemotron-H configuration (llm_config or text_config: the Nano Omni releases) is not read; only NemotronHForCausalLM's flat config.json is")
	}
	if !model.HasKey(raw, "num_experts_per_tok") {
		return nil, fmt.Errorf("Nemotron-H without routed experts (no num_experts_per_tok: the dense nemotron_h models) has no MTP draft graph in llama.cpp or mlx-vlm; only the MoE variants (Nemotron 3 Nano, Super) are converted")
	}
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RopeTheta: 10000, RMSNormEps: 1e-5})
	if err != nil {
		return nil, err
	}
	nh := nemotronHDefaults()
	if err := c.DecodeText(&nh); err != nil {
		return nil, err
	}
	if !model.HasKey(raw, "num_key_value_heads") {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if !model.HasKey(raw, "head_dim") {
		c.HeadDim = 128
	}
	if q := c.QuantizationConfig; q != nil && (q.QuantMethod != "fp8" || len(q.WeightBlockSize) != 2) {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: Nemotron-H's quantized releases (ModelOpt FP8 and NVFP4) are not read; this tool reads the BF16 release (or block FP8 with weight_block_size)", q.QuantMethod)
	}
	if nh.Pattern, err = nemotronHPattern(nh.HybridOverridePattern, nh.LayersBlockType, "hybrid_override_pattern", "layers_block_type"); err != nil {
		return nil, err
	}
	if nh.MTPHybridOverridePattern == "" && nh.MTPLayersBlockType == nil {
		nh.MTPPattern = "*E" // NemotronHConfig's default, ["full_attention", "moe"]
	} else if nh.MTPPattern, err = nemotronHPattern(nh.MTPHybridOverridePattern, nh.MTPLayersBlockType, "mtp_hybrid_override_pattern", "mtp_layers_block_type"); err != nil {
		return nil, err
	}
	if model.HasKey(raw, "layers_block_type") || !model.HasKey(raw, "num_hidden_layers") {
		c.NumHiddenLayers = len(nh.Pattern) // the converter's count
	}
	c.NumExperts, c.SharedExpertIntermed, c.RMSNormEps = nh.NRoutedExperts, nh.SharedExpertIntermediate, nh.LayerNormEpsilon
	c.LayerTypes = nil
	for _, k := range nh.Pattern {
		c.LayerTypes = append(c.LayerTypes, map[rune]string{'M': "mamba", '*': model.FullAttention, 'E': "moe"}[k])
	}
	model.SetKeys(c, &nh)
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "n_routed_experts", Value: nh.NRoutedExperts}, model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok},
		model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize}, model.PositiveKey{Name: "moe_shared_expert_intermediate_size", Value: nh.SharedExpertIntermediate},
		model.PositiveKey{Name: "mamba_num_heads", Value: nh.MambaNumHeads}, model.PositiveKey{Name: "mamba_head_dim", Value: nh.MambaHeadDim}, model.PositiveKey{Name: "n_groups", Value: nh.NGroups},
		model.PositiveKey{Name: "ssm_state_size", Value: nh.SSMStateSize}, model.PositiveKey{Name: "conv_kernel", Value: nh.ConvKernel}, model.PositiveKey{Name: "n_group", Value: nh.NGroup}, model.PositiveKey{Name: "topk_group", Value: nh.TopkGroup})
	if nh.MoELatentSize != nil {
		keys = append(keys, model.PositiveKey{Name: "moe_latent_size", Value: *nh.MoELatentSize})
	}
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	patternKey := "hybrid_override_pattern"
	if nh.HybridOverridePattern == "" && nh.LayersBlockType != nil {
		patternKey = "layers_block_type"
	}
	if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: patternKey, Len: len(nh.Pattern)}); err != nil {
		return nil, err
	}
	switch d, ok := c.ConfigMTPDepth(); {
	case !ok || d != 1:
		// NemotronHModel asserts it; the MTP graph runs one block.
		return nil, fmt.Errorf("num_nextn_predict_layers is %d: Nemotron-H's head is one MTP layer (llama.cpp's converter and draft graph take exactly 1)", d)
	case nh.MTPPattern != "*E":
		return nil, fmt.Errorf("mtp_hybrid_override_pattern is %q: llama.cpp folds a Nemotron-H head of an attention then a MoE sub-layer (\"*E\") into its block, no other", nh.MTPPattern)
	case nh.NSharedExperts != 1:
		return nil, fmt.Errorf("n_shared_experts is %d: Nemotron-H's MoE has one shared expert (llama.cpp's nemotron_h_moe)", nh.NSharedExperts)
	case nh.MLPHiddenAct != "relu2":
		return nil, fmt.Errorf("mlp_hidden_act is %q: Nemotron-H's experts are ReLU² (relu2) in llama.cpp and mlx-vlm", nh.MLPHiddenAct)
	case nh.AttentionBias:
		return nil, fmt.Errorf("attention_bias is true: no Nemotron-H release has attention biases, and llama.cpp's MTP block reads none")
	case c.NumExperts%nh.NGroup != 0 || nh.TopkGroup > nh.NGroup:
		return nil, fmt.Errorf("n_routed_experts %d, n_group %d, topk_group %d: the experts do not split into the groups", c.NumExperts, nh.NGroup, nh.TopkGroup)
	case !(nh.RoutedScalingFactor > 0):
		return nil, fmt.Errorf("routed_scaling_factor is %v: it must be positive", nh.RoutedScalingFactor)
	case !(nh.LayerNormEpsilon > 0):
		return nil, fmt.Errorf("layer_norm_epsilon is %v: it must be positive", nh.LayerNormEpsilon)
	}
	return c, nil
}

// nemotronHLatent is the experts' width: moe_latent_size, or 0 for hidden_size.
func nemotronHLatent(c *model.Config) int {
	if p := model.KeysOf[NemotronHConfig](c).MoELatentSize; p != nil {
		return *p
	}
	return 0
}

func specNemotronH(c *model.Config) *model.Spec {
	nh := model.KeysOf[NemotronHConfig](c)
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	q, kv := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim)
	attention := func(p string) []model.Want {
		return []model.Want{w(p+"mixer.q_proj.weight", 0, q, h), w(p+"mixer.k_proj.weight", 0, kv, h),
			w(p+"mixer.v_proj.weight", 0, kv, h), w(p+"mixer.o_proj.weight", 0, h, q)}
	}
	lat, si, ei := int64(nemotronHLatent(c)), int64(nh.SharedExpertIntermediate), int64(c.MoeIntermediateSize)
	width := h
	if lat > 0 {
		width = lat
	}
	moe := func(p string) []model.Want {
		ws := []model.Want{w(p+"mixer.gate.weight", model.RoleRouter, int64(c.NumExperts), h),
			w(p+"mixer.gate.e_score_correction_bias", model.RoleKeepDType, int64(c.NumExperts)), // float32 in the releases
			w(p+"mixer.shared_experts.up_proj.weight", 0, si, h), w(p+"mixer.shared_experts.down_proj.weight", 0, h, si)}
		if lat > 0 {
			ws = append(ws, w(p+"mixer.fc1_latent_proj.weight", 0, lat, h), w(p+"mixer.fc2_latent_proj.weight", 0, h, lat))
		}
		return ws
	}
	experts := func(p string) []model.Want {
		var ws []model.Want
		for x := range c.NumExperts {
			e := p + "mixer.experts." + strconv.Itoa(x) + "."
			ws = append(ws, w(e+"up_proj.weight", 0, ei, width), w(e+"down_proj.weight", 0, width, ei))
		}
		return ws
	}
	dInner, groups, state := int64(nh.MambaNumHeads*nh.MambaHeadDim), int64(nh.NGroups), int64(nh.SSMStateSize)
	conv := dInner + 2*groups*state
	trunkLayer := func(i int) []model.Want {
		ws := []model.Want{w("norm.weight", 0, h)}
		if i < 0 || i >= len(nh.Pattern) {
			return ws
		}
		switch nh.Pattern[i] {
		case 'M':
			ws = append(ws, w("mixer.in_proj.weight", 0, 2*dInner+2*groups*state+int64(nh.MambaNumHeads), h),
				w("mixer.conv1d.weight", model.RoleConv1d, conv, 1, int64(nh.ConvKernel)), w("mixer.dt_bias", 0, int64(nh.MambaNumHeads)),
				w("mixer.A_log", model.RoleKeepDType, int64(nh.MambaNumHeads)), w("mixer.D", 0, int64(nh.MambaNumHeads)),
				w("mixer.norm.weight", 0, dInner), w("mixer.out_proj.weight", 0, h, dInner))
			if nh.UseConvBias {
				ws = append(ws, w("mixer.conv1d.bias", 0, conv))
			}
		case '*':
			ws = append(ws, attention("")...)
		case 'E':
			ws = append(append(ws, moe("")...), experts("")...)
		}
		return ws
	}
	head := append([]model.Want{w("layers.0.enorm.weight", 0, h), w("layers.0.hnorm.weight", 0, h),
		w("layers.0.eh_proj.weight", 0, h, 2*h), w("layers.0.norm.weight", 0, h)}, attention("layers.0.")...)
	head = append(append(append(head, w("layers.1.norm.weight", 0, h)), moe("layers.1.")...), w("layers.1.final_layernorm.weight", 0, h))
	s := &model.Spec{
		TextPrefixes: []string{"backbone."}, HeadPrefix: "mtp.", HeadOneLayer: true,
		TrunkTop:   []model.Want{w("embeddings.weight", 0, v, h), w("norm_f.weight", 0, h)},
		TrunkLayer: trunkLayer,
		HeadLayer:  head,
		MoE: &model.MoE{Experts: "layers.1.mixer.experts.", PerExpert: [3]string{"", "up_proj.weight", "down_proj.weight"}, NoGate: true,
			Width:   nemotronHLatent(c),
			Stacked: [3]string{"", "layers.1.mixer.switch_mlp.fc1.weight", "layers.1.mixer.switch_mlp.fc2.weight"}},
		Experts:  func(model.ExpertLayout) []model.Want { return experts("layers.1.") },
		MoELayer: func(i int) bool { return i >= c.NumHiddenLayers }, // the trunk's experts are listed in its layers
		Report:   nemotronHReport(c),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// nemotronHReport is what inspect says of a Nemotron-H MoE config.
func nemotronHReport(c *model.Config) model.ReportSpec {
	nh := model.KeysOf[NemotronHConfig](c)
	r := model.ReportSpec{
		Dims: map[string]any{"hybrid_override_pattern": nh.Pattern, "mtp_hybrid_override_pattern": nh.MTPPattern,
			"mamba_num_heads": nh.MambaNumHeads, "mamba_head_dim": nh.MambaHeadDim, "n_groups": nh.NGroups, "ssm_state_size": nh.SSMStateSize,
			"n_group": nh.NGroup, "topk_group": nh.TopkGroup, "routed_scaling_factor": nh.RoutedScalingFactor,
			"moe_shared_expert_intermediate_size": nh.SharedExpertIntermediate},
		Attention: fmt.Sprintf("GQA without positions (NoPE), heads %d/%d of dim %d; the MTP head's first sub-layer", c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim),
		Layers: fmt.Sprintf("%d (%d Mamba-2, %d attention, %d MoE: %s); the head apart, an attention and a MoE sub-layer (%s) folded into one block by llama.cpp",
			c.NumHiddenLayers, strings.Count(nh.Pattern, "M"), strings.Count(nh.Pattern, "*"), strings.Count(nh.Pattern, "E"), nh.Pattern, nh.MTPPattern),
		Routing: fmt.Sprintf("sigmoid, e_score_correction_bias for the choice, n_group %d, topk_group %d, weights renormalised, scaled by %v; ReLU² experts without a gate, one ReLU² shared expert",
			nh.NGroup, nh.TopkGroup, nh.RoutedScalingFactor),
	}
	if lat := nemotronHLatent(c); lat > 0 {
		r.Dims["moe_latent_size"] = lat
		r.Routing += fmt.Sprintf(", the experts in a latent space of %d (fc1_latent_proj, fc2_latent_proj)", lat)
	}
	return r
}

// nemotronHGGUFTop is gguf-py's tensor map of the tensors outside the layers.
var nemotronHGGUFTop = map[string]gg.TensorName{"embeddings.weight": gg.Weight(gg.KindTokenEmbd), "norm_f.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)}

// nemotronHGGUFLayer is the head's tensors as NemotronHModel.modify_tensors
// renames them into block n_layer (_MTP_SPECIAL_RENAMES; the rest by
// gguf-py's nemotron_h_moe map of backbone.layers.{bid}.*), by their names
// under the head prefix.
var nemotronHGGUFLayer = map[string]gg.TensorName{
	"layers.0.enorm.weight":                          gg.Weight(gg.KindNextNEnorm),
	"layers.0.hnorm.weight":                          gg.Weight(gg.KindNextNHnorm),
	"layers.0.eh_proj.weight":                        gg.Weight(gg.KindNextNEHProj),
	"layers.0.norm.weight":                           gg.Weight(gg.KindAttnNorm),
	"layers.0.mixer.q_proj.weight":                   gg.Weight(gg.KindAttnQ),
	"layers.0.mixer.k_proj.weight":                   gg.Weight(gg.KindAttnK),
	"layers.0.mixer.v_proj.weight":                   gg.Weight(gg.KindAttnV),
	"layers.0.mixer.o_proj.weight":                   gg.Weight(gg.KindAttnOut),
	"layers.1.norm.weight":                           gg.Weight(gg.KindAttnPostNorm),
	"layers.1.mixer.gate.weight":                     gg.Weight(gg.KindFFNGateInp),
	"layers.1.mixer.gate.e_score_correction_bias":    gg.Bias(gg.KindFFNExpProbsB),
	"layers.1.mixer.shared_experts.up_proj.weight":   gg.Weight(gg.KindFFNUpShexp),
	"layers.1.mixer.shared_experts.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
	"layers.1.mixer.fc1_latent_proj.weight":          gg.Weight(gg.KindFFNLatentDown),
	"layers.1.mixer.fc2_latent_proj.weight":          gg.Weight(gg.KindFFNLatentUp),
	"layers.1.final_layernorm.weight":                gg.Weight(gg.KindNextNSharedHeadNorm),
}

// nemotronHGGUFHparams makes the values TextModel's keys read what
// NemotronHModel's base classes read: NemotronHConfig's attributes (its
// defaults for the keys it has, none for rope_theta and rms_norm_eps, which
// it lacks), head_dim removed (GraniteModel pops it before its base reads it).
func nemotronHGGUFHparams(m *model.Model, h model.Hparams) {
	raw := m.Config.Raw
	for _, k := range []string{"rope_theta", "rms_norm_eps"} {
		if !model.HasKey(raw, k) {
			delete(h, k)
		}
	}
	delete(h, "head_dim")
	nh := model.KeysOf[NemotronHConfig](m.Config)
	for k, v := range map[string]any{"max_position_embeddings": 4096, "intermediate_size": 21504, "num_key_value_heads": m.Config.NumKeyValueHeads,
		"layer_norm_epsilon": nh.LayerNormEpsilon, "n_routed_experts": nh.NRoutedExperts, "n_group": nh.NGroup, "topk_group": nh.TopkGroup} {
		if _, ok := h[k]; !ok {
			h[k] = json.Number(fmt.Sprint(v))
		}
	}
}

// nemotronHGGUFMetadata is the keys NemotronHModel's classes add after
// TextModel's (LlamaModel's vocabulary size and rotary width, which reads
// hidden_size / heads with head_dim popped; GraniteHybridModel's Mamba-2
// sizes, per-layer key-value heads, no RoPE and 2^20 context; its own head
// size, per-layer FFN widths and expert keys, the latent size and the MTP
// block count), keys set again keeping their place.
func nemotronHGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, nh := m.Config, model.KeysOf[NemotronHConfig](m.Config)
	n := c.NumHiddenLayers + m.MTPDepth
	g.U32("vocab_size", (c.VocabSize+7)/8*8) // Nemotron's set_vocab pads it to a multiple of 8
	g.U32("rope.dimension_count", c.HiddenSize/c.NumAttentionHeads)
	g.U32("ssm.conv_kernel", nh.ConvKernel)
	g.U32("ssm.state_size", nh.SSMStateSize)
	g.U32("ssm.group_count", nh.NGroups)
	g.U32("ssm.inner_size", nh.MambaNumHeads*nh.MambaHeadDim)
	g.U32("ssm.time_step_rank", nh.MambaNumHeads)
	kv, ff := make([]int32, n), make([]int32, n)
	for i := range n {
		if i >= c.NumHiddenLayers || nh.Pattern[i] == '*' {
			kv[i] = int32(c.NumKeyValueHeads)
		}
		if i >= c.NumHiddenLayers || nh.Pattern[i] == 'E' {
			ff[i] = int32(c.MoeIntermediateSize)
		}
	}
	g.Set("attention.head_count_kv", gg.Int32s(kv))
	if v, ok := h.Int("attn_rotary_emb"); ok {
		g.U32("rope.dimension_count", int(v))
	}
	g.Bool("rope.scaling.finetuned", false)
	g.U32("context_length", 1<<20)
	g.U32("attention.key_length", c.HeadDim)
	g.U32("attention.value_length", c.HeadDim)
	g.Set("feed_forward_length", gg.Int32s(ff))
	g.U32("expert_used_count", c.NumExpertsPerTok)
	g.U32("expert_feed_forward_length", c.MoeIntermediateSize)
	g.U32("expert_shared_feed_forward_length", nh.SharedExpertIntermediate)
	g.U32("expert_count", c.NumExperts)
	g.U32("expert_shared_count", nh.NSharedExperts)
	g.Bool("expert_weights_norm", c.NormTopkProb == nil || *c.NormTopkProb)
	g.F32("expert_weights_scale", nh.RoutedScalingFactor)
	g.U32("expert_group_count", nh.NGroup)
	if lat := nemotronHLatent(c); lat > 0 {
		g.U32("moe_latent_size", lat)
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}
