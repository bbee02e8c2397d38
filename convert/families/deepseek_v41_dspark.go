package families

import (
	"fmt"
	"slices"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// DeepSeek DSpark stages: the checkpoints whose mtp.* holds DSpark stages in
// place of a classic MTP head. Two releases carry them:
//
//   - DeepSeek-V4-Flash-0731: model_type deepseek_v4 (DeepseekV4ForCausalLM,
//     the V4 trunk), told apart from V4 by its dspark_* keys;
//   - DeepSeek-V4.1-Flash: model_type deepseek_v41, another trunk (Engram
//     tables, shared compressors) with its own DSpark stages.
//
// A DSpark head drafts a whole block per forward: stage 0 projects the
// target's hidden states at dspark_target_layer_ids (main_proj, main_norm),
// every stage is a full DeepSeek-V4 block (hyper-connections, MLA with
// o_groups, sqrtsoftplus MoE with FP4 routed experts), the last stage
// collapses the streams (hc_head_*, norm) and carries the Markov head
// (markov_head.markov_w1/w2: a low-rank bias on each position's logits keyed
// on the previous token) and the confidence head (confidence_head.proj).
// There are no e_proj/h_proj/enorm/hnorm: nothing of the NextN machinery
// applies. --target gguf writes 0731's stages as llama.cpp's converter
// (convert_hf_to_gguf.py --dspark, DeepseekV4DSparkModel) writes them: a
// dflash draft, stage s as block s, stage 0's main_proj/main_norm and the
// last stage's norm, hc_head, Markov and confidence heads at the root, each
// tensor in its stored type (FP8 dequantized to Q8_0, FP4 experts repacked
// MXFP4: DeepSeek-V4's rules), the vocabulary the source folder's own (the
// stages live in the target's checkpoint, so it is --target-model-dir).
// --target mlx writes 0731's deepseek_v4_dspark folder as mlx-vlm's splitter
// does (deepseek_v41_dspark_mlx.go). Every other target, and V4.1
// everywhere, is refused naming the tool that writes what the runtime
// drafts with (see docs/deepseek-v4-dspark.md).

// deepseekV41Family is the family's descriptor.
var deepseekV41Family = &model.Family{
	Name: "deepseek_v41", Title: dsparkName,
	Docs:        "docs/deepseek-v4-dspark.md",
	Layout:      "DSpark stages under `mtp.{s}.*` (V4-Flash-0731: `deepseek_v4` with `dspark_*` keys, told apart by `Identity.HasKey`; V4.1: `deepseek_v41`), their config keys as the typed `DSparkConfig` over `DeepSeekV4Config`; 0731's stages as DeepSeek-V4 blocks (`Spec.HeadLayersNumbered`, per-stage wants by `HeadLayerAt`), its GGUF a `dflash` drafter file (`GGUFSpec.Drafter`, `StoredTypes`, `TokenizerKeys`), its MLX drafter the splitter's `deepseek_v4_dspark` folder (`MLXSpec.DrafterStageFiles`, block-FP8 moved mxfp8), V4.1 refused (`GGUFSpec.Refuse`, `MLXSpec.Refuse`)",
	Match:       matchDSpark,
	ParseConfig: parseDSpark, Spec: specDSpark,
	MLX: dsparkMLX, // deepseek_v41_dspark_mlx.go
	// DeepseekV4DSparkModel (conversion/deepseek.py:929 of the llama.cpp
	// vendored by llama-cpp-python 0.3.36): architecture dflash, the mtp.*
	// tensors only, stage s as block s, DeepseekV4Model's types (stored,
	// FP8 → Q8_0, FP4 experts → MXFP4) and keys with block_count the
	// stages, compress_ratios zeros and no hash layers, then block_size and
	// target_layers; set_vocab reads --target-model-dir's tokenizer and adds
	// the mask token.
	GGUF: model.GGUFSpec{
		Arch: "dflash", PreTokenizer: "deepseek-v3", Drafter: true,
		Refuse:            dsparkGGUFRefuse,
		Layer:             dsparkGGUFLayer(),
		StoredTypes:       true,
		ChatTemplateFirst: true,
		Metadata:          dsparkGGUFMetadata,
		TokenizerKeys:     dsparkTokenizerKeys,
		SpecType:          "draft-dspark",
		DrafterCard: model.GGUFDrafterCard{
			What:    "its stages (DeepSeek-V4-Flash-0731's) as the `dflash` draft llama.cpp drafts blocks with: stage s as block s, the Markov and confidence heads at the root",
			MLP:     "DeepSeek-V4's MoE in every stage: sqrtsoftplus-routed experts (MXFP4, the release's FP4 bytes) and a shared expert",
			Pairing: "It pairs with a GGUF of its target model (`{base}`), the DeepSeek-V4 trunk converted without its stages (`convert_hf_to_gguf.py --no-mtp`): it reads the trunk's hidden states at `dflash.target_layers` and its token embedding and LM head, having none of its own.",
		},
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI has no DSpark (block-drafting) pipeline; llama.cpp (`--spec-type draft-dspark`) and mlx-vlm (`deepseek_v4_dspark`) run DSpark stages."},
	HF: model.HFSpec{Refusal: "vLLM drafts DSpark stages straight from the release checkpoint (speculative method `dspark`, vllm/config/speculative.py:1164 in 0.32.0) " +
		"and rejects method `mtp` on DeepSeek-V4.1 (:1365), so there is no head repo to write."},
}

func init() { model.RegisterFamily(deepseekV41Family) }

const dsparkName = "DeepSeek-V4.1 / V4-Flash-0731 (DSpark)"

// dsparkKey is the key only a checkpoint with DSpark stages sets.
const dsparkKey = "dspark_target_layer_ids"

// matchDSpark recognises DeepSeek-V4.1, and DeepSeek-V4 with DSpark stages (0731).
func matchDSpark(id model.Identity) bool {
	if model.MatchesIdentity(id, []string{"deepseek_v41"}, "DeepseekV41") {
		return true
	}
	return model.MatchesIdentity(id, []string{"deepseek_v4"}, "DeepseekV4ForCausalLM") && id.HasKey(dsparkKey)
}

// DSparkConfig is the family's own config keys (KeysOf[DSparkConfig]):
// the DeepSeek-V4 block the stages are made of and the DSpark contract.
type DSparkConfig struct {
	DeepSeekV4Config

	TargetLayerIDs []int `json:"dspark_target_layer_ids"`
	BlockSize      int   `json:"dspark_block_size"`
	NoiseTokenID   *int  `json:"dspark_noise_token_id"`
	MarkovRank     *int  `json:"dspark_markov_rank"`

	// Stages is 0731's stage count: its compress_ratios lists the stages
	// (0, uncompressed) after the trunk's layers, and the last stage holds
	// the heads. V41: model_type deepseek_v41 (no llama.cpp architecture).
	Stages int  `json:"-"`
	V41    bool `json:"-"`
}

// applyDefaults fills the keys config.json may leave out with
// DeepseekV4Config's and the DSpark splitters' defaults.
func (d *DSparkConfig) applyDefaults() {
	if d.MarkovRank == nil {
		d.MarkovRank = ptr(256)
	}
	if d.ScoringFunc == "" {
		d.ScoringFunc = "sqrtsoftplus"
	}
	if d.HCMult == 0 {
		d.HCMult = 4
	}
}

// dsparkDefaults are DeepseekV4Config's (transformers, mlx-vlm) for the shared keys.
var dsparkDefaults = model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 10000}

func parseDSpark(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, dsparkDefaults)
	if err != nil {
		return nil, err
	}
	var d DSparkConfig
	if err := c.DecodeText(&d); err != nil {
		return nil, err
	}
	d.applyDefaults()
	d.V41 = c.ModelType == "deepseek_v41" || c.TextModelType == "deepseek_v41"
	model.SetKeys(c, &d)
	c.NumExperts = d.NRoutedExperts // the shared keys under V4's names, for inspect
	c.SharedExpertIntermed = d.NSharedExperts * c.MoeIntermediateSize
	if err := model.CheckPositive(
		model.PositiveKey{Name: "hidden_size", Value: c.HiddenSize}, model.PositiveKey{Name: "num_hidden_layers", Value: c.NumHiddenLayers},
		model.PositiveKey{Name: "vocab_size", Value: c.VocabSize}, model.PositiveKey{Name: "num_attention_heads", Value: c.NumAttentionHeads},
		model.PositiveKey{Name: "head_dim", Value: c.HeadDim}, model.PositiveKey{Name: "q_lora_rank", Value: d.QLoraRank},
		model.PositiveKey{Name: "o_lora_rank", Value: d.OLoraRank}, model.PositiveKey{Name: "o_groups", Value: d.OGroups},
		model.PositiveKey{Name: "n_routed_experts", Value: d.NRoutedExperts}, model.PositiveKey{Name: "moe_intermediate_size", Value: c.MoeIntermediateSize},
		model.PositiveKey{Name: "sliding_window", Value: d.SlidingWindow}, model.PositiveKey{Name: "hc_mult", Value: d.HCMult},
		model.PositiveKey{Name: "dspark_block_size", Value: d.BlockSize}, model.PositiveKey{Name: "dspark_markov_rank", Value: *d.MarkovRank},
	); err != nil {
		return nil, err
	}
	switch {
	case len(d.TargetLayerIDs) == 0:
		return nil, fmt.Errorf("%s is missing or empty: %s drafts from the trunk's hidden states at those layers", dsparkKey, dsparkName)
	case !slices.IsSorted(d.TargetLayerIDs) || len(slices.Compact(slices.Clone(d.TargetLayerIDs))) != len(d.TargetLayerIDs):
		return nil, fmt.Errorf("%s is %v: the layers are distinct and increasing", dsparkKey, d.TargetLayerIDs)
	case d.TargetLayerIDs[0] < 0 || d.TargetLayerIDs[len(d.TargetLayerIDs)-1] >= c.NumHiddenLayers:
		return nil, fmt.Errorf("%s is %v: the layers are 0..%d (num_hidden_layers %d)", dsparkKey, d.TargetLayerIDs, c.NumHiddenLayers-1, c.NumHiddenLayers)
	case d.NoiseTokenID == nil:
		return nil, fmt.Errorf("dspark_noise_token_id is missing: %s fills a block's positions after the anchor with it", dsparkName)
	case *d.NoiseTokenID < 0 || *d.NoiseTokenID >= c.VocabSize:
		return nil, fmt.Errorf("dspark_noise_token_id is %d: outside the vocabulary of %d", *d.NoiseTokenID, c.VocabSize)
	case d.ScoringFunc != "sqrtsoftplus":
		return nil, fmt.Errorf("scoring_func is %q: %s's MoE scores with sqrtsoftplus", d.ScoringFunc, dsparkName)
	case d.HCMult < 2:
		return nil, fmt.Errorf("hc_mult is %d: %s has at least two hyper-connection streams", d.HCMult, dsparkName)
	case c.NumAttentionHeads*c.HeadDim%d.OGroups != 0:
		return nil, fmt.Errorf("o_groups %d does not divide num_attention_heads × head_dim = %d", d.OGroups, c.NumAttentionHeads*c.HeadDim)
	case d.QKRopeHeadDim <= 0 || d.QKRopeHeadDim > c.HeadDim:
		return nil, fmt.Errorf("qk_rope_head_dim is %d: the rotary part of the %d-wide heads", d.QKRopeHeadDim, c.HeadDim)
	}
	if d.V41 {
		return c, nil
	}
	// 0731: the stages are counted by compress_ratios (the release lists
	// theirs after the trunk's); num_nextn_predict_layers is V4's classic
	// head's key, which the converter's --dspark never reads (the release
	// says 1 beside its three stages).
	d.Stages = len(d.CompressRatios) - c.NumHiddenLayers
	if d.Stages < 1 {
		return nil, fmt.Errorf("compress_ratios has %d entries for num_hidden_layers %d: %s lists the DSpark stages' after the trunk layers'", len(d.CompressRatios), c.NumHiddenLayers, dsparkName)
	}
	for i, r := range d.CompressRatios[c.NumHiddenLayers:] {
		if r != 0 {
			return nil, fmt.Errorf("compress_ratios[%d] is %d: the DSpark stages do not compress (0)", c.NumHiddenLayers+i, r)
		}
	}
	c.NumNextnPredictLayers, c.MTPNumHiddenLayers = nil, nil
	return c, nil
}

// specDSpark is what the checkpoints hold: the trunk's root tensors under
// their release names (no "model." prefix) and, for 0731, the stages at
// mtp.{s}. (HeadLayersNumbered), each a DeepSeek-V4 block with routed
// experts, stage 0 with the projection of the target's hidden states, the
// last with the final norm, the streams' collapse and the Markov and
// confidence heads (a config built in code, which counts no stages, has
// stage 0's: Family.HeadOwn reads them). Of V4.1's stages (other expert
// counts, other head names) stage 0's projection alone is described:
// every target refuses it first.
func specDSpark(c *model.Config) *model.Spec {
	var d DSparkConfig // a config built in code has no keys: the defaults
	if k := model.KeysOf[DSparkConfig](c); k != nil {
		d = *k
	}
	d.applyDefaults()
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	hc, r := int64(d.HCMult), int64(*d.MarkovRank)
	w := func(suffix string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: suffix, Shape: shape, Role: role}
	}
	s := &model.Spec{
		TextPrefixes: []string{""}, VisionPrefixes: []string{"vision.", "aligner.", "image_"},
		HeadPrefix: "mtp.",
		TrunkTop:   append([]model.Want{w("embed.weight", 0, v, h), w("norm.weight", 0, h)}, dsv4HCHead(h, hc)...),
		LMHead:     &model.Want{Suffix: "head.weight", Shape: []int64{v, h}},
		TrunkLayer: func(int) []model.Want { return nil },
		Report: model.ReportSpec{
			Dims: map[string]any{"hc_mult": d.HCMult, "o_groups": d.OGroups, "o_lora_rank": d.OLoraRank, "q_lora_rank": d.QLoraRank,
				dsparkKey: d.TargetLayerIDs, "dspark_block_size": d.BlockSize, "dspark_markov_rank": *d.MarkovRank, "dspark_noise_token_id": derefOr(d.NoiseTokenID, 0)},
			Attention: fmt.Sprintf("multi-head latent attention (one key-value head of %d, q_lora %d, %d output groups of rank %d), sliding window %d, attention sinks; %d hyper-connection streams",
				c.HeadDim, d.QLoraRank, d.OGroups, d.OLoraRank, d.SlidingWindow, d.HCMult),
			Layers:  fmt.Sprintf("%d trunk layers; DSpark stages under mtp.{s} drafting blocks of %d from layers %v", c.NumHiddenLayers, d.BlockSize, d.TargetLayerIDs),
			Routing: fmt.Sprintf("sqrtsoftplus scores, top-%d of %d routed experts (+%d shared), scaled by %v", c.NumExpertsPerTok, d.NRoutedExperts, d.NSharedExperts, d.RoutedScalingFactor),
		},
	}
	s.HeadLayersNumbered = true
	stage0 := []model.Want{w("main_proj.weight", 0, h, int64(len(d.TargetLayerIDs))*h), w("main_norm.weight", 0, h)}
	if d.V41 {
		s.HeadLayerAt = func(j int) []model.Want { // stage 0's projection only
			if j == 0 {
				return stage0
			}
			return nil
		}
		s.HeadLayer = stage0
		return s
	}
	s.MoE, s.Experts = dsv4Experts(c)
	s.MoELayer = func(i int) bool { return i >= c.NumHiddenLayers } // the trunk's layers are not described
	s.HeadLayerAt = func(j int) []model.Want {
		ws := dsv4BlockWants(c, &d.DeepSeekV4Config, 0, false)
		if j == 0 {
			ws = append(ws, stage0...)
		}
		if j == d.Stages-1 {
			ws = append(append(ws, w("norm.weight", 0, h)), dsv4HCHead(h, hc)...)
			ws = append(ws, w("markov_head.markov_w1.weight", 0, v, r), w("markov_head.markov_w2.weight", 0, v, r),
				w("confidence_head.proj.weight", 0, 1, h+r))
		}
		return ws
	}
	s.HeadLayer = s.HeadLayerAt(0)
	return s
}

// dsparkGGUFLayer is a stage's tensors under the dflash names: a
// DeepSeek-V4 block's (dsv4GGUFLayer, without the NextN tensors) and the
// converter's _DSPARK_ROOT_MAP and root names, which it writes outside the
// blocks: main_proj as fc, main_norm as enc.output_norm, the last stage's
// norm as output_norm and its hc_head as output_hc_*, the Markov and
// confidence heads.
func dsparkGGUFLayer() map[string]gg.TensorName {
	l := map[string]gg.TensorName{}
	for k, n := range dsv4GGUFLayer {
		if !n.Kind.NextN() {
			l[k] = n
		}
	}
	l["norm.weight"] = gg.Weight(gg.KindOutputNorm)
	l["main_proj.weight"] = gg.Weight(gg.KindFC)
	l["main_norm.weight"] = gg.Weight(gg.KindEncOutputNorm)
	l["markov_head.markov_w1.weight"] = gg.Weight(gg.KindMarkovW1)
	l["markov_head.markov_w2.weight"] = gg.Weight(gg.KindMarkovW2)
	l["confidence_head.proj.weight"] = gg.Weight(gg.KindConfProj)
	return l
}

// dsparkGGUFRefuse refuses DeepSeek-V4.1, which llama.cpp has no architecture for.
func dsparkGGUFRefuse(c *model.Config) string {
	if model.KeysOf[DSparkConfig](c).V41 {
		return "llama.cpp 0.3.36 has no DeepSeek-V4.1 (deepseek_v41) architecture at all (its converter: \"Model DeepseekV41ForCausalLM is not supported\", " +
			"convert_hf_to_gguf.py:252, with or without --dspark), so no llama.cpp drafts its DSpark stages."
	}
	return ""
}

// dsparkGGUFMetadata is DeepseekV4Model.set_gguf_parameters's keys as the
// DSpark class sets them up (a block per stage, compress_ratios zeros, no
// hash layers; not mtp_only, so no nextn_predict_layers, and dflash, so no
// embedding_length_out), then its own: block_size, target_layers one past
// each target layer id.
func dsparkGGUFMetadata(m *model.Model, _ model.Hparams, g *model.GGUFKeys) error {
	d := model.KeysOf[DSparkConfig](m.Config)
	ds := d.DeepSeekV4Config
	ds.CompressRatios, ds.NumHashLayers = make([]int, m.MTPDepth), 0
	dsv4ArchKeys(m.Config, &ds, m.MTPDepth, g)
	g.U32("block_size", d.BlockSize)
	targets := make([]int32, len(d.TargetLayerIDs))
	for i, l := range d.TargetLayerIDs {
		targets[i] = int32(l + 1)
	}
	g.Set("target_layers", gg.Int32s(targets))
	return nil
}

// dsparkTokenizerKeys is what the converter's set_vocab adds after the
// target's vocabulary: the noise token as the mask token.
func dsparkTokenizerKeys(m *model.Model) []gg.KV {
	return []gg.KV{gg.Pair("tokenizer.ggml.mask_token_id", gg.U32(uint32(derefOr(model.KeysOf[DSparkConfig](m.Config).NoiseTokenID, 0))))}
}
