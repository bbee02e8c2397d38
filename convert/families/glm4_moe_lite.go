package families

import (
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// GLM-4.7-Flash (Glm4MoeLiteForCausalLM): the DeepSeek-V3 lineage's layout
// (deepseek.go) with DeepSeek-V2's multi-head latent attention (q_a_proj,
// q_a_layernorm, q_b_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj),
// which llama.cpp runs as its deepseek2 architecture. See docs/glm.md.

// glm4MoeLiteFamily is the family's descriptor.
var glm4MoeLiteFamily = &model.Family{
	Name: "glm4_moe_lite", Title: glm47Flash.name,
	Docs:       "docs/glm.md",
	Layout:     "a `deepseekFamily` with MLA (deepseek2's GGUF layout), mlx-vlm's `glm4_moe_lite_mtp` drafter",
	ModelTypes: []string{"glm4_moe_lite"}, Arch: "Glm4MoeLiteForCausalLM",
	ParseConfig: parseGLM4MoeLite, Spec: specGLM4MoeLite,
	MLX: model.MLXSpec{
		// mlx-vlm's glm4_moe_lite_mtp splitter: the NextN layer's own
		// tensors at the top, the decoder layer as model.mtp_block, the
		// shared head as lm_head, kv_b_proj absorbed (embed_q, unembed_out).
		DrafterModelType:  "glm4_moe_lite_mtp",
		DrafterUnrunnable: "mlx-vlm 0.7.10's `load_drafter` has no `glm4_moe_lite_mtp` model (the package holds the splitter and config only)",
		DrafterName:       glmLiteDrafterName,
		DrafterBlockExtra: 1,
		DrafterKVB:        [2]string{"self_attn.embed_q.weight", "self_attn.unembed_out.weight"},
		// Quantized, the splitter keeps mlp.gate float and quantizes
		// every other matrix (embedding and lm_head included) by its
		// last dimension, the absorbed halves as stored.
		DrafterRoutersFloat: true,
		CombinedRefusal:     deepseekCombinedRefusal(glm47Flash.name),
	},
	GGUF: model.GGUFSpec{
		Arch: "deepseek2", PreTokenizer: "glm4",
		Top:           model.NextNGGUFTop,
		Layer:         deepseek2GGUFLayer,
		Hparams:       deepseek2GGUFHparams,
		Metadata:      deepseek2GGUFMetadata,
		SpecialTokens: glmSpecialTokens,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: glmOpenVINORefusal},
	HF:       deepseekHF("glm4_moe_lite_mtp"),
}

func init() { model.RegisterFamily(glm4MoeLiteFamily) }

// glm47Flash is the family as the lineage's files know it; its defaults
// are Glm4MoeLiteConfig's (head_dim is qk_rope_head_dim, all rotary).
var glm47Flash = deepseekFamily{name: "GLM-4.7-Flash", defaults: model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000},
	mla: true, quantRefusal: glmQuantRefusal}

func parseGLM4MoeLite(raw []byte) (*model.Config, error) {
	c, err := parseDeepSeekConfig(raw, glm47Flash)
	if err != nil {
		return nil, err
	}
	c.HeadDim = model.KeysOf[DeepSeekConfig](c).QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

func specGLM4MoeLite(c *model.Config) *model.Spec {
	return deepseekSpec(c, glm47Flash)
}

// glmLiteDrafterName is mlx-vlm's flat drafter name of a NextN tensor
// (given as "layers.0.<suffix>", or the layer prefix for stacked experts).
func glmLiteDrafterName(rel string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(rel, "layers."), ".")
	switch rest {
	case "embed_tokens.weight", "enorm.weight", "hnorm.weight", "eh_proj.weight":
		return "model." + rest
	case "shared_head.norm.weight":
		return "model.shared_head_norm.weight"
	case "shared_head.head.weight":
		return "lm_head.weight"
	}
	return "model.mtp_block." + rest
}
