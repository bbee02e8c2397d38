package model

import (
	"encoding/json"
	"strings"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// GLM-4.7-Flash (Glm4MoeLiteForCausalLM): the GLM-4.x layout of
// glm4_moe.go with DeepSeek-V2's multi-head latent attention (q_a_proj,
// q_a_layernorm, q_b_proj; kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj),
// which llama.cpp runs as its deepseek2 architecture. See docs/glm.md.

func init() { RegisterFamily(glm4MoeLite{}) }

type glm4MoeLite struct{}

func (glm4MoeLite) Name() string { return "glm4_moe_lite" }

func (glm4MoeLite) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"glm4_moe_lite"}, "Glm4MoeLiteForCausalLM")
}

// Glm4MoeLiteConfig's defaults (head_dim is qk_rope_head_dim, all rotary).
var glm4MoeLiteDefaults = ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-5, RopeTheta: 10000}

func (glm4MoeLite) ParseConfig(raw []byte) (*Config, error) {
	c, err := parseGLMConfig(raw, glm4MoeLiteDefaults, true)
	if err != nil {
		return nil, err
	}
	c.HeadDim = c.QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

func (glm4MoeLite) Spec(c *Config) *Spec {
	s := glmSpec(c, true)
	s.MLX = MLXSpec{
		// mlx-vlm's glm4_moe_lite_mtp splitter: the NextN layer's own
		// tensors at the top, the decoder layer as model.mtp_block, the
		// shared head as lm_head, kv_b_proj absorbed (embed_q, unembed_out).
		DrafterModelType:  "glm4_moe_lite_mtp",
		DrafterName:       glmLiteDrafterName,
		DrafterBlockExtra: 1,
		DrafterKVB:        [2]string{"self_attn.embed_q.weight", "self_attn.unembed_out.weight"},
		// Quantized, the splitter keeps mlp.gate float and quantizes
		// every other matrix (embedding and lm_head included) by its
		// last dimension, the absorbed halves as stored.
		DrafterRoutersFloat: true,
		CombinedRefusal:     glmCombinedRefusal,
	}
	s.GGUF = GGUFSpec{
		Arch: "deepseek2", PreTokenizer: "glm4",
		Top:           s.GGUF.Top,
		Layer:         glmLiteGGUFLayer,
		Hparams:       glmLiteGGUFHparams,
		Metadata:      glmLiteGGUFMetadata,
		SpecialTokens: glmSpecialTokens,
	}
	return s
}

// glmLiteGGUFLayer is gguf-py's deepseek2 tensor map for GLM-4.7-Flash's
// layers (kv_b_proj becomes attn_k_b and attn_v_b, split by the target).
var glmLiteGGUFLayer = func() map[string]gg.TensorName {
	m := map[string]gg.TensorName{
		"post_attention_layernorm.weight":     gg.Weight(gg.KindFFNNorm),
		"self_attn.q_proj.weight":             gg.Weight(gg.KindAttnQ),
		"self_attn.q_a_proj.weight":           gg.Weight(gg.KindAttnQA),
		"self_attn.q_a_layernorm.weight":      gg.Weight(gg.KindAttnQANorm),
		"self_attn.q_b_proj.weight":           gg.Weight(gg.KindAttnQB),
		"self_attn.kv_a_proj_with_mqa.weight": gg.Weight(gg.KindAttnKVAMQA),
		"self_attn.kv_a_layernorm.weight":     gg.Weight(gg.KindAttnKVANorm),
	}
	for k, v := range glmGGUFLayer {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return m
}()

// glmLiteGGUFHparams is DeepseekV2Model's change to the values before
// TextModel's keys: MLA runs as MQA (one key-value head). (Its
// rms_norm_eps default of 1e-6 never applies: the configuration class has one.)
func glmLiteGGUFHparams(m *Model, h Hparams) { h["num_key_value_heads"] = json.Number("1") }

// glmLiteGGUFMetadata is the keys DeepseekV2Model.set_gguf_parameters adds
// after TextModel's (MLA as MQA: one key-value head of kv_lora_rank +
// qk_rope_head_dim), then the NextN layer count.
func glmLiteGGUFMetadata(m *Model, h Hparams, g *GGUFKeys) error {
	c := m.Config
	dense := 0 // first_k_dense_replace's default: none with routed experts, all without
	if _, ok := h["n_routed_experts"]; !ok {
		dense = c.NumHiddenLayers
	}
	if n, ok := h.Int("first_k_dense_replace"); ok {
		dense = int(n)
	}
	g.U32("leading_dense_block_count", dense)
	g.U32("vocab_size", c.VocabSize)
	if c.QLoraRank != nil {
		g.U32("attention.q_lora_rank", *c.QLoraRank)
	}
	g.U32("attention.kv_lora_rank", c.KVLoraRank)
	g.U32("attention.key_length", c.KVLoraRank+c.QKRopeHeadDim)
	g.U32("attention.value_length", c.KVLoraRank)
	g.U32("attention.key_length_mla", c.QKNopeHeadDim+c.QKRopeHeadDim)
	g.U32("attention.value_length_mla", c.VHeadDim)
	if err := g.intOf(h, "expert_feed_forward_length", "moe_intermediate_size", "intermediate_size"); err != nil {
		return err
	}
	if err := g.intOf(h, "expert_count", "n_routed_experts"); err != nil {
		return err
	}
	g.U32("expert_shared_count", c.NSharedExperts)
	glmGGUFRouting(g, h, true)
	g.U32("rope.dimension_count", c.QKRopeHeadDim)
	if v, ok := ropeParameters(h)["mscale_all_dim"].(json.Number); ok {
		f, _ := v.Float64()
		g.F32("rope.scaling.yarn_log_multiplier", 0.1*f)
	}
	g.U32("nextn_predict_layers", m.MTPDepth)
	return nil
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
