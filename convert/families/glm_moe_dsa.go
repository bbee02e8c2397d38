package families

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// GLM-5.2 (GlmMoeDsaForCausalLM, model_type glm_moe_dsa): DeepSeek-V3.2's
// layout (deepseek.go, deepseek_v32.go: MLA with q_lora, the DSA indexer,
// sigmoid group routing, the NextN layer at model.layers.78) under GLM's
// tokenizer, with per-layer indexer modes: a "full" layer runs its own
// indexer, a "shared" one reuses the previous full layer's choice and has
// no indexer tensors (indexer_types). The NextN layer always has its
// indexer (mlx-vlm's GlmMoeDsaMTP forces it full). llama.cpp runs it as its
// glm-dsa architecture, whose MTP graph runs dense MLA and leaves the
// indexer unused (src/models/glm-dsa.cpp); mlx-vlm as its glm_moe_dsa_mtp
// drafter. GLM-5.3 (non-Flash) is the same architecture in a block-FP8
// release and goes through this family. See docs/glm5.2.md.

// glmMoeDsaFamily is the family's descriptor.
var glmMoeDsaFamily = &model.Family{
	Name: "glm_moe_dsa", Title: "GLM-5.2/5.3",
	Docs:       "docs/glm5.2.md",
	Layout:     "MLA with the DSA indexer per `indexer_types`",
	ModelTypes: []string{"glm_moe_dsa"}, Arch: "GlmMoeDsaForCausalLM",
	ParseConfig: parseGLMMoeDsa, Spec: specGLMMoeDsa,
	MLX: model.MLXSpec{
		// mlx-vlm's glm_moe_dsa_mtp splitter: the NextN layer's tensors
		// under mtp. with their own names (shared_head.norm as
		// shared_head_norm), kv_b_proj absorbed (embed_q, unembed_out),
		// experts stacked; quantized, every matrix but mlp.gate by its last
		// dimension.
		DrafterModelType:    "glm_moe_dsa_mtp",
		DrafterName:         glmDsaDrafterName,
		DrafterBlockExtra:   1,
		DrafterKVB:          [2]string{"self_attn.embed_q.weight", "self_attn.unembed_out.weight"},
		DrafterRoutersFloat: true,
		CombinedRefusal: "stock mlx-lm's glm_moe_dsa builds a DSA indexer in every layer, so it loads no GLM-5.2 checkpoint with shared indexer layers, " +
			"and drops the NextN layer of the others (its sanitize keeps layers below num_hidden_layers only): a combined file would carry a head nothing runs.",
	},
	GGUF: model.GGUFSpec{
		Arch: "glm-dsa", PreTokenizer: "glm4",
		Top:           model.NextNGGUFTop,
		Layer:         dsaGGUFLayer,
		Hparams:       dsv3GGUFHparams, // GlmMoeDsaConfig's head_dim as V3's
		Metadata:      glmDsaGGUFMetadata,
		SpecialTokens: glmSpecialTokens,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: glmOpenVINORefusal},
	// vLLM maps glm_moe_dsa to its DeepSeek-V3.2 MTP (config/speculative.py hf_config_override)
	HF: dsaHF(),
}

func init() { model.RegisterFamily(glmMoeDsaFamily) }

// glm52 is the family as the lineage's files know it; its defaults are
// GlmMoeDsaConfig's (head_dim is qk_rope_head_dim, all rotary).
var glm52 = deepseekFamily{name: "GLM-5.2", defaults: model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000},
	mla: true, quantRefusal: func(string) string {
		return "this tool reads GLM-5.2 checkpoints in bf16 or in the block-FP8 layout (weight_scale_inv, weight_block_size) only"
	}}

func parseGLMMoeDsa(raw []byte) (*model.Config, error) {
	c, err := parseDeepSeekConfig(raw, glm52)
	if err != nil {
		return nil, err
	}
	ds := model.KeysOf[DeepSeekConfig](c)
	if err := checkDSAIndexer(ds); err != nil {
		return nil, err
	}
	if c.PartialRotaryFactor != 1 {
		// The reference writes rope.dimension_count = qk_rope_head_dim × the
		// factor, but glm-dsa's MLA and mlx-vlm rotate all qk_rope_head_dim
		// dimensions (kv_a_proj_with_mqa's rope part is that wide).
		return nil, fmt.Errorf("%s is %v: GLM-5.2 heads rotate all qk_rope_head_dim dimensions (1.0 only)", c.RotaryKey(), c.PartialRotaryFactor)
	}
	ds.IndexerTypesGiven = ds.IndexerTypes != nil
	types, err := glmIndexerTypes(c.TrunkLayers(), ds)
	if err != nil {
		return nil, err
	}
	ds.IndexerTypes = types
	c.HeadDim = ds.QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

// glmIndexerTypes is indexer_types as GlmMoeDsaConfig fills it: given, or
// from index_topk_pattern ("F"/"S" per layer, or a list), or else layer i
// is full when max(i - offset + 1, 0) is a multiple of index_topk_freq
// (defaults 1 and 2: every layer full).
func glmIndexerTypes(layers model.Layers, ds *DeepSeekConfig) ([]string, error) {
	types := ds.IndexerTypes
	if types == nil && len(ds.IndexTopkPattern) > 0 && string(ds.IndexTopkPattern) != "null" {
		var s string
		if json.Unmarshal(ds.IndexTopkPattern, &s) == nil {
			for _, r := range s {
				types = append(types, map[rune]string{'F': "full", 'S': "shared"}[r])
			}
		} else if err := json.Unmarshal(ds.IndexTopkPattern, &types); err != nil {
			return nil, fmt.Errorf("index_topk_pattern: %w", err)
		}
	}
	if types == nil {
		freq, offset := max(derefOr(ds.IndexTopkFreq, 1), 1), derefOr(ds.IndexSkipTopkOffset, 2)
		for i := range layers.N {
			types = append(types, map[bool]string{true: "full", false: "shared"}[max(i-offset+1, 0)%freq == 0])
		}
	}
	if err := model.CheckLayerLists(layers, false, model.LayerList{Key: "indexer_types", Len: len(types)}); err != nil {
		return nil, err
	}
	for i, t := range types {
		switch {
		case t != "full" && t != "shared":
			return nil, fmt.Errorf("indexer_types[%d] is %q: GLM-5.2's layers are \"full\" or \"shared\"", i, t)
		case t == "shared" && !slices.Contains(types[:i], "full"):
			return nil, fmt.Errorf("indexer_types[%d] is \"shared\" with no full layer before it to share", i)
		}
	}
	return types, nil
}

func specGLMMoeDsa(c *model.Config) *model.Spec {
	s := deepseekSpec(c, glm52)
	ds := model.KeysOf[DeepSeekConfig](c)
	indexer := dsaIndexer(c)
	layer := s.TrunkLayer
	s.TrunkLayer = func(i int) []model.Want {
		if i < len(ds.IndexerTypes) && ds.IndexerTypes[i] == "shared" {
			return layer(i)
		}
		return append(layer(i), indexer...)
	}
	s.HeadLayer = append(slices.Clone(s.HeadLayer), indexer...)
	s.Report.Dims["index_n_heads"], s.Report.Dims["index_head_dim"], s.Report.Dims["index_topk"] = ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk
	full := 0
	for _, t := range ds.IndexerTypes {
		if t == "full" {
			full++
		}
	}
	s.Report.Dims["indexer_full_layers"] = full
	s.Report.Attention += fmt.Sprintf(", with the DSA indexer (%d heads of %d, top %d; in %d of %d trunk layers, the others sharing; unused by llama.cpp's MTP graph)",
		ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk, full, len(ds.IndexerTypes))
	return s
}

// glmDsaGGUFMetadata is the keys GlmMoeDsaModel.set_gguf_parameters adds
// after DeepseekV2Model's: the rotary width again (qk_rope_head_dim ×
// partial_rotary_factor, in place), the NextN layer count, the DSA
// indexer's and, when config.json lists indexer_types, its per-layer modes
// (true for full). The converter reads config.json as stored under its
// pinned transformers (4.57.6 has no glm_moe_dsa configuration class), so
// a GLM-5 config without the list gets no key; llama.cpp then takes every
// layer of a model under 1M context as full, which GLM-5's are.
func glmDsaGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	if err := deepseek2GGUFMetadata(m, h, g); err != nil {
		return err
	}
	ds := model.KeysOf[DeepSeekConfig](m.Config)
	g.U32("rope.dimension_count", int(float64(ds.QKRopeHeadDim)*m.Config.PartialRotaryFactor))
	g.U32("attention.indexer.head_count", ds.IndexNHeads)
	g.U32("attention.indexer.key_length", ds.IndexHeadDim)
	g.U32("attention.indexer.top_k", ds.IndexTopk)
	if !ds.IndexerTypesGiven {
		return nil
	}
	full := make([]bool, len(ds.IndexerTypes))
	for i, t := range ds.IndexerTypes {
		full[i] = t == "full"
	}
	g.Set("attention.indexer.types", gg.Bools(full))
	return nil
}

// glmDsaDrafterName is mlx-vlm's glm_moe_dsa_mtp name of a NextN tensor
// (given as "layers.0.<suffix>", or the layer prefix for stacked experts).
func glmDsaDrafterName(rel string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(rel, "layers."), ".")
	if rest == "shared_head.norm.weight" {
		rest = "shared_head_norm.weight"
	}
	return "mtp." + rest
}
