package model

// qwen35Dense is the dense Qwen3.5 and Qwen3.6 models (Qwen3.5-27B,
// Qwen3.6-27B and the other dense sizes with an MTP head,
// Qwen3_5ForConditionalGeneration): config nested under text_config
// (model_type qwen3_5_text) or flat, weights under model.language_model. (or
// model.), the vision tower under model.visual., the MoE families' linear
// attention, and a dense SwiGLU MLP (intermediate_size) in every layer and
// in the MTP layer.
type qwen35Dense struct{ hybridConfig }

func init() { RegisterFamily(qwen35Dense{}) }

func (qwen35Dense) Name() string { return "qwen3_5" }

func (qwen35Dense) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"qwen3_5", "qwen3_5_text"}, "Qwen3_5For")
}

func (qwen35Dense) Spec(c *Config) *Spec { return qwen35Spec(c, "qwen35") } // the MoE family's names; dense by config
