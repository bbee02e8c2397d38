package families

import (
	"fmt"
	"strconv"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// The hybrid Qwen decoder (Qwen3.5/3.6-MoE and Qwen3-Next): GatedDeltaNet
// linear attention on three of four layers, gated full attention on the
// fourth, a sparse MoE with a gated shared expert in every layer, and an MTP
// head of the same full-attention MoE layer behind two pre-fc norms and fc.
// Every RMSNorm but linear_attn.norm is zero-centred (stored w, applied 1+w).
// The two family files differ only in where tensors live and in the linear
// attention's input projections.

// hybridDefaults are the Qwen3.5 and Qwen3-Next configuration classes' defaults.
var hybridDefaults = model.ConfigDefaults{PartialRotaryFactor: 0.25, RMSNormEps: 1e-6, RopeTheta: 10000, FullAttentionInterval: 4}

// parseHybrid decodes and validates a hybrid config and derives the
// layer types from full_attention_interval when layer_types is absent (the
// hybrid families' ParseConfig).
func parseHybrid(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, hybridDefaults)
	if err != nil {
		return nil, err
	}
	if err := validateHybrid(c); err != nil {
		return nil, err
	}
	if c.LayerTypes == nil {
		for i := 0; i < c.NumHiddenLayers; i++ {
			if (i+1)%c.FullAttentionInterval == 0 {
				c.LayerTypes = append(c.LayerTypes, model.FullAttention)
			} else {
				c.LayerTypes = append(c.LayerTypes, model.LinearAttention)
			}
		}
	}
	return c, nil
}

// validateHybrid refuses a hybrid config that cannot describe a model:
// the shared keys and checks plus the linear attention's and the layer types.
func validateHybrid(c *model.Config) error {
	keys := append(c.CommonKeys(),
		model.PositiveKey{Name: "linear_num_key_heads", Value: c.LinearNumKeyHeads}, model.PositiveKey{Name: "linear_num_value_heads", Value: c.LinearNumValueHeads},
		model.PositiveKey{Name: "linear_key_head_dim", Value: c.LinearKeyHeadDim}, model.PositiveKey{Name: "linear_value_head_dim", Value: c.LinearValueHeadDim},
		model.PositiveKey{Name: "linear_conv_kernel_dim", Value: c.LinearConvKernelDim},
		model.PositiveKey{Name: "full_attention_interval", Value: c.FullAttentionInterval})
	if err := model.CheckPositive(append(keys, c.MLPKeys()...)...); err != nil {
		return err
	}
	if err := c.CheckCommon(); err != nil {
		return err
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if c.LayerTypes != nil {
		if err := model.CheckLayerLists(c.TrunkLayers(), false, model.LayerList{Key: "layer_types", Len: len(c.LayerTypes)}); err != nil {
			return err
		}
	}
	for i, t := range c.LayerTypes {
		if t != model.FullAttention && t != model.LinearAttention {
			return fmt.Errorf("layer_types[%d] is %q", i, t)
		}
	}
	return nil
}

// hybridLayout is what sets one hybrid family apart: where its tensors
// live, its linear-attention input projections, and llama.cpp's
// architecture and pre-tokenizer for it (Qwen3.5's write M-RoPE sections).
type hybridLayout struct {
	text, vision []string
	linear       []model.Want
}

// hybridReport is what inspect says of a hybrid config: its two attentions
// and how the layers alternate between them.
func hybridReport(c *model.Config) model.ReportSpec {
	full := 0
	for _, t := range c.LayerTypes {
		if t == model.FullAttention {
			full++
		}
	}
	return model.ReportSpec{
		Dims: map[string]any{
			"linear_num_key_heads": c.LinearNumKeyHeads, "linear_num_value_heads": c.LinearNumValueHeads,
			"linear_key_head_dim": c.LinearKeyHeadDim, "linear_value_head_dim": c.LinearValueHeadDim,
			"linear_conv_kernel_dim": c.LinearConvKernelDim,
		},
		Attention: fmt.Sprintf("gated full attention, heads %d/%d of dim %d (rotary %d, theta %v); gated delta-net linear attention, heads %d/%d of dims %d/%d, conv kernel %d",
			c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RotaryDim(), c.RopeTheta,
			c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim, c.LinearConvKernelDim),
		Layers: fmt.Sprintf("%d (%d linear attention, %d full attention)", len(c.LayerTypes), len(c.LayerTypes)-full, full),
	}
}

// hybridSpec is the Spec the Qwen hybrid families share. A dense config
// (the Qwen3.5/3.6 dense models) has a SwiGLU MLP where the others have the MoE.
func hybridSpec(c *model.Config, l hybridLayout) *model.Spec {
	textPrefixes, visionPrefixes, linear := l.text, l.vision, l.linear
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	norm := func(suffix string) model.Want {
		return model.Want{Suffix: suffix, Shape: []int64{h}, Role: model.RoleZeroCentredNorm}
	}
	layerNorms := []model.Want{norm("input_layernorm.weight"), norm("post_attention_layernorm.weight")}
	mlp := sparseMoE
	if c.Dense() {
		mlp = denseMLP
	}
	s := &model.Spec{
		TextPrefixes: textPrefixes, VisionPrefixes: visionPrefixes, HeadPrefix: "mtp.",
		TrunkTop: []model.Want{{Suffix: "embed_tokens.weight", Shape: []int64{v, h}, Role: 0}, norm("norm.weight")},
		TrunkLayer: func(i int) []model.Want {
			ws := append([]model.Want{}, layerNorms...)
			if c.LayerTypes[i] == model.FullAttention {
				ws = append(ws, gatedAttention(c)...)
			} else {
				ws = append(ws, linear...)
				ws = append(ws, gatedDeltaCommon(c)...)
			}
			return append(ws, mlp(c)...)
		},
		HeadTop: []model.Want{
			{Suffix: "fc.weight", Shape: []int64{h, 2 * h}, Role: 0},
			norm("pre_fc_norm_embedding.weight"),
			norm("pre_fc_norm_hidden.weight"),
			norm("norm.weight"),
		},
		HeadLayer: append(append(append([]model.Want{}, layerNorms...), gatedAttention(c)...), mlp(c)...),
		MoE:       model.SwitchGLUExperts(),
		Experts:   func(layout model.ExpertLayout) []model.Want { return expertTensors(c, layout) },
		Forward:   hybridForward,
		Report:    hybridReport(c),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}, Role: 0}
	}
	if c.Dense() {
		s.MoE, s.Experts = nil, nil
	}
	return s
}

// hybridFamily is a hybrid family's descriptor: the tables the hybrid
// families share, for llama.cpp's architecture arch and pre-tokenizer pre
// (mrope: M-RoPE sections in its keys) and vLLM's MTP class mtpClass.
func hybridFamily(f model.Family, arch, pre string, mrope bool, mtpClass string) *model.Family {
	f.ParseConfig, f.ZeroCentredHead = parseHybrid, true
	// vLLM builds mtp.fc as a ColumnParallelLinear, SGLang as an nn.Linear
	// (sglang qwen3_5_mtp.py:129, qwen3_next_mtp.py:60).
	f.HF = model.HFSpec{MTPClass: mtpClass, PlainSGLang: []string{"fc"}}
	f.MLX = model.MLXSpec{
		DrafterModelType:  "qwen3_5_mtp",
		DrafterTextConfig: hybridDrafterText,
		TrunkName: func(m *model.Model, n string) string {
			// mlx-lm's sanitize: model.language_model.X -> language_model.model.X, lm_head -> language_model.lm_head.
			if rest, ok := cutPrefix(n, m.TextPrefix); ok {
				return "language_model.model." + rest
			}
			return "language_model." + n
		},
	}
	f.GGUF = model.GGUFSpec{
		Arch: arch, PreTokenizer: pre,
		Top:     map[string]gg.TensorName{"embed_tokens.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)},
		HeadTop: hybridGGUFHead,
		Layer:   hybridGGUFLayer,
		Metadata: func(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
			return hybridGGUFMetadata(m, h, g, mrope)
		},
	}
	return &f
}

// hybridDrafterText fills what mlx-vlm's qwen3_5_mtp TextConfig needs and
// a flat config lacks: rope_parameters (M-RoPE sections over the rotary
// half), and mtp_num_hidden_layers.
func hybridDrafterText(m *model.Model, text *jsonobj.Object) {
	c := m.Config
	// A value the flat config gives keeps its literal.
	literal := func(key string, v float64) any {
		if x, ok := text.Get(key); ok {
			return x
		}
		return v
	}
	if !text.Has("rope_parameters") {
		text.Set("rope_parameters", map[string]any{
			"type": "default", "rope_theta": literal("rope_theta", c.RopeTheta), "partial_rotary_factor": literal("partial_rotary_factor", c.PartialRotaryFactor),
			"mrope_section": []int{c.RotaryDim() / 2, 0, 0},
		})
	}
	if !text.Has("mtp_num_hidden_layers") {
		text.Set("mtp_num_hidden_layers", m.MTPDepth)
	}
}

// hybridGGUFLayer is gguf-py's tensor map for qwen35moe, qwen3next and the
// dense qwen35, from the suffixes under a decoder layer.
var hybridGGUFLayer = model.NextNGGUFLayer(map[string]gg.TensorName{
	"post_attention_layernorm.weight":    gg.Weight(gg.KindAttnPostNorm),
	"mlp.shared_expert.gate_proj.weight": gg.Weight(gg.KindFFNGateShexp),
	"mlp.shared_expert.up_proj.weight":   gg.Weight(gg.KindFFNUpShexp),
	"mlp.shared_expert.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
	"mlp.shared_expert_gate.weight":      gg.Weight(gg.KindFFNGateInpShexp),
})

// hybridGGUFHead is the head's tensors outside its layers (mtp.fc, ...) as
// the reference converter remaps them: fc -> eh_proj, pre_fc_norm_embedding
// -> enorm, pre_fc_norm_hidden -> hnorm, norm -> shared_head.norm.
var hybridGGUFHead = map[string]gg.TensorName{
	"fc.weight":                    gg.Weight(gg.KindNextNEHProj),
	"pre_fc_norm_embedding.weight": gg.Weight(gg.KindNextNEnorm),
	"pre_fc_norm_hidden.weight":    gg.Weight(gg.KindNextNHnorm),
	"norm.weight":                  gg.Weight(gg.KindNextNSharedHeadNorm),
}

// hybridGGUFMetadata is the keys the reference converter adds for these
// architectures after TextModel's (Qwen2MoeModel's expert sizes, the MTP
// mixin's layer count, Qwen3NextModel's linear attention and rotary
// dimensions, and Qwen3.5's default M-RoPE sections when the config has
// none).
func hybridGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys, mrope bool) error {
	c := m.Config
	for _, k := range [][2]string{{"expert_feed_forward_length", "moe_intermediate_size"}, {"expert_shared_feed_forward_length", "shared_expert_intermediate_size"}} {
		if err := g.U32FromHparams(h, k[0], k[1]); err != nil {
			return err
		}
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	g.U32("ssm.conv_kernel", c.LinearConvKernelDim)
	g.U32("ssm.state_size", c.LinearKeyHeadDim)
	g.U32("ssm.group_count", c.LinearNumKeyHeads)
	g.U32("ssm.time_step_rank", c.LinearNumValueHeads)
	g.U32("ssm.inner_size", c.LinearValueHeadDim*c.LinearNumValueHeads)
	// The configuration class always has layer_types (derived from
	// full_attention_interval when config.json has none).
	var rec []bool
	for _, t := range m.LayerTypes {
		rec = append(rec, t == model.LinearAttention)
	}
	for range m.MTPDepth {
		rec = append(rec, false)
	}
	g.Set("attention.recurrent_layers", gg.Bools(rec))
	g.U32("full_attention_interval", c.FullAttentionInterval)
	g.U32("rope.dimension_count", c.RotaryDim())
	if _, ok := model.RopeParameters(h)["mrope_section"]; mrope && !ok {
		g.Set("rope.dimension_sections", gg.Int32s([]int32{11, 11, 10, 0}))
	}
	return nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// gatedDeltaCommon lists the GatedDeltaNet tensors both families share.
// conv1d is expected in the raw PyTorch layout [C, 1, K].
func gatedDeltaCommon(c *model.Config) []model.Want {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return []model.Want{
		{Suffix: "linear_attn.conv1d.weight", Shape: []int64{2*kd + vd, 1, int64(c.LinearConvKernelDim)}, Role: model.RoleConv1d},
		{Suffix: "linear_attn.A_log", Shape: []int64{nv}, Role: model.RoleKeepDType}, // mlx-lm keeps A_log as stored (float32 in Qwen3.5)
		{Suffix: "linear_attn.dt_bias", Shape: []int64{nv}, Role: 0},
		{Suffix: "linear_attn.norm.weight", Shape: []int64{int64(c.LinearValueHeadDim)}, Role: 0}, // a plain norm, never shifted
		{Suffix: "linear_attn.out_proj.weight", Shape: []int64{h, vd}, Role: 0},
	}
}

// gatedAttention lists a gated full-attention block (trunk every 4th layer, and the MTP layer).
func gatedAttention(c *model.Config) []model.Want {
	h := int64(c.HiddenSize)
	q := int64(c.NumAttentionHeads * c.HeadDim)
	kv := int64(c.NumKeyValueHeads * c.HeadDim)
	qOut := q
	if c.OutputGate() {
		qOut = 2 * q // queries and their sigmoid gate, interleaved per head
	}
	d := int64(c.HeadDim)
	return []model.Want{
		{Suffix: "self_attn.q_proj.weight", Shape: []int64{qOut, h}, Role: 0},
		{Suffix: "self_attn.k_proj.weight", Shape: []int64{kv, h}, Role: 0},
		{Suffix: "self_attn.v_proj.weight", Shape: []int64{kv, h}, Role: 0},
		{Suffix: "self_attn.o_proj.weight", Shape: []int64{h, q}, Role: 0},
		{Suffix: "self_attn.q_norm.weight", Shape: []int64{d}, Role: model.RoleZeroCentredNorm},
		{Suffix: "self_attn.k_norm.weight", Shape: []int64{d}, Role: model.RoleZeroCentredNorm},
	}
}

// sparseMoE lists the non-expert tensors of a MoE block with a gated shared expert.
func sparseMoE(c *model.Config) []model.Want {
	h, e, si := int64(c.HiddenSize), int64(c.NumExperts), int64(c.SharedExpertIntermed)
	return []model.Want{
		{Suffix: "mlp.gate.weight", Shape: []int64{e, h}, Role: model.RoleRouter},
		{Suffix: "mlp.shared_expert.gate_proj.weight", Shape: []int64{si, h}, Role: 0},
		{Suffix: "mlp.shared_expert.up_proj.weight", Shape: []int64{si, h}, Role: 0},
		{Suffix: "mlp.shared_expert.down_proj.weight", Shape: []int64{h, si}, Role: 0},
		{Suffix: "mlp.shared_expert_gate.weight", Shape: []int64{1, h}, Role: model.RoleRouter},
	}
}

// denseMLP lists a dense SwiGLU MLP.
func denseMLP(c *model.Config) []model.Want {
	h, i := int64(c.HiddenSize), int64(c.IntermediateSize)
	return []model.Want{
		{Suffix: "mlp.gate_proj.weight", Shape: []int64{i, h}, Role: 0},
		{Suffix: "mlp.up_proj.weight", Shape: []int64{i, h}, Role: 0},
		{Suffix: "mlp.down_proj.weight", Shape: []int64{h, i}, Role: 0},
	}
}

// expertTensors lists the routed-expert tensors of one block in a layout.
func expertTensors(c *model.Config, layout model.ExpertLayout) []model.Want {
	h, i := int64(c.HiddenSize), int64(c.MoeIntermediateSize)
	if layout == model.Fused {
		e := int64(c.NumExperts)
		return []model.Want{
			{Suffix: "mlp.experts.gate_up_proj", Shape: []int64{e, 2 * i, h}, Role: 0},
			{Suffix: "mlp.experts.down_proj", Shape: []int64{e, h, i}, Role: 0},
		}
	}
	out := make([]model.Want, 0, 3*c.NumExperts)
	for e := 0; e < c.NumExperts; e++ {
		p := "mlp.experts." + strconv.Itoa(e) + "."
		out = append(out,
			model.Want{Suffix: p + "gate_proj.weight", Shape: []int64{i, h}, Role: 0},
			model.Want{Suffix: p + "up_proj.weight", Shape: []int64{i, h}, Role: 0},
			model.Want{Suffix: p + "down_proj.weight", Shape: []int64{h, i}, Role: 0})
	}
	return out
}

// hybridForward is the MTP forward of the checkpoint's modelling code:
// fc(concat(norm_e(embedding), norm_h(hidden))), then per layer gated
// attention and the sparse MoE with residuals, then mtp.norm.
func hybridForward(m *model.Model) model.Forward {
	c := m.Config
	f := model.Forward{
		EmbedNorm: "mtp.pre_fc_norm_embedding.weight", HiddenNorm: "mtp.pre_fc_norm_hidden.weight",
		EmbeddingFirst: true, FC: "mtp.fc.weight", FinalNorm: "mtp.norm.weight", Eps: c.RMSNormEps,
	}
	for j := 0; j < m.MTPDepth; j++ {
		p := "mtp.layers." + strconv.Itoa(j) + "."
		sa, mp := p+"self_attn.", p+"mlp."
		f.Layers = append(f.Layers, model.ForwardLayer{
			Prefix: p, InputNorm: p + "input_layernorm.weight", PostAttentionNorm: p + "post_attention_layernorm.weight",
			Attention: model.Attention{
				Kind: model.AttnGatedFull, Prefix: sa,
				Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
				QNorm: sa + "q_norm.weight", KNorm: sa + "k_norm.weight",
				Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
				RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta, OutputGate: c.OutputGate(),
			},
			MLP: hybridMLP(c, p, mp),
		})
	}
	return f
}

// hybridMLP is a layer's MLP: the sparse MoE, or a dense SwiGLU.
func hybridMLP(c *model.Config, p, mp string) model.MLP {
	if c.Dense() {
		return model.MLP{Kind: model.MLPDense, Prefix: mp, Gate: mp + "gate_proj.weight", Up: mp + "up_proj.weight", Down: mp + "down_proj.weight"}
	}
	return model.MLP{
		Kind: model.MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight", Routing: model.RouteSoftmaxTopK,
		Gate: p + "mlp.switch_mlp.gate_proj.weight", Up: p + "mlp.switch_mlp.up_proj.weight", Down: p + "mlp.switch_mlp.down_proj.weight",
		Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: c.NormTopkProb == nil || *c.NormTopkProb,
		SharedPrefix: mp + "shared_expert.", SharedGate: mp + "shared_expert.gate_proj.weight",
		SharedUp: mp + "shared_expert.up_proj.weight", SharedDown: mp + "shared_expert.down_proj.weight",
		SharedExpertGate: mp + "shared_expert_gate.weight",
	}
}
