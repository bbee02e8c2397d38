package families

import "github.com/mtpconv/mtpconv/convert/model"

// GLM-4.5, 4.6 and 4.7 with the Air models (Glm4MoeForCausalLM): the
// DeepSeek-V3 lineage's layout (deepseek.go) with GQA attention: q/k/v
// biases (attention_bias), partial rotary and, in the 355B models, q/k
// norms (use_qk_norm); llama.cpp's glm4moe architecture. See docs/glm.md.

// glm4MoeFamily is the family's descriptor.
var glm4MoeFamily = &model.Family{
	Name: "glm4_moe", Title: glm45.name,
	Docs:       "docs/glm.md",
	Layout:     "a `deepseekFamily` (GQA, the NextN layer in the layer list)",
	ModelTypes: []string{"glm4_moe"}, Arch: "Glm4MoeForCausalLM",
	ParseConfig: parseGLM4Moe, Spec: specGLM4Moe,
	MLX: model.MLXSpec{CombinedRefusal: deepseekCombinedRefusal(glm45.name)},
	GGUF: model.GGUFSpec{
		Arch: "glm4moe", PreTokenizer: "glm4",
		Top:           model.NextNGGUFTop,
		Layer:         deepseekGGUFLayer,
		Metadata:      glmGGUFMetadata,
		SpecialTokens: glmSpecialTokens,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: glmOpenVINORefusal},
	HF:       deepseekHF("glm4_moe_mtp"),
}

func init() { model.RegisterFamily(glm4MoeFamily) }

// glm45 is the family as the lineage's files know it; its defaults are Glm4MoeConfig's.
var glm45 = deepseekFamily{name: "GLM-4.5/4.6/4.7", defaults: model.ConfigDefaults{PartialRotaryFactor: 0.5, RMSNormEps: 1e-5, RopeTheta: 10000},
	quantRefusal: glmQuantRefusal}

func parseGLM4Moe(raw []byte) (*model.Config, error) { return parseDeepSeekConfig(raw, glm45) }

func specGLM4Moe(c *model.Config) *model.Spec {
	return deepseekSpec(c, glm45)
}

// glmOpenVINORefusal names the consumer that does not run these heads.
const glmOpenVINORefusal = "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."

// glmQuantRefusal is why an FP8 GLM release in another layout is not read.
func glmQuantRefusal(string) string {
	return "GLM's FP8 releases store per-channel FP8 weights with weight_scale (compressed-tensors), not the block-FP8 layout (weight_scale_inv, weight_block_size) this tool reads"
}

// glmSpecialTokens are the ids the reference converter's GLM vocabulary
// sets over tokenizer_config.json's (_set_vocab_glm), by token text.
var glmSpecialTokens = []model.SpecialToken{{Type: "bos", Content: "[gMASK]"}, {Type: "eot", Content: "<|user|>"}, {Type: "unk", Content: "<|endoftext|>"}, {Type: "eom", Content: "<|observation|>"}}

// glmGGUFMetadata is the keys Glm4MoeModel.set_gguf_parameters adds
// after TextModel's (the routed expert count set again, from n_routed_experts).
func glmGGUFMetadata(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
	g.U32("rope.dimension_count", m.Config.RotaryDim())
	for _, k := range [][2]string{{"expert_count", "n_routed_experts"}, {"expert_feed_forward_length", "moe_intermediate_size"},
		{"expert_shared_count", "n_shared_experts"}, {"leading_dense_block_count", "first_k_dense_replace"}} {
		if err := g.U32FromHparams(h, k[0], k[1]); err != nil {
			return err
		}
	}
	g.U32("expert_gating_func", model.GGUFExpertGating["sigmoid"])
	deepseekGGUFRouting(g, h, false)
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
}
