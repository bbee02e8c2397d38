package families

import "github.com/mtpconv/mtpconv/convert/model"

// The dense Qwen3.5 and Qwen3.6 models (Qwen3.5-27B, Qwen3.6-27B and the
// other dense sizes with an MTP head, Qwen3_5ForConditionalGeneration):
// config nested under text_config (model_type qwen3_5_text) or flat, weights
// under model.language_model. (or model.), the vision tower under
// model.visual., the MoE families' linear attention, and a dense SwiGLU MLP
// (intermediate_size) in every layer and in the MTP layer. The MoE family's
// names; dense by config.
var qwen35DenseFamily = hybridFamily(model.Family{
	Name: "qwen3_5", Title: "Qwen3.5/3.6 dense",
	Docs:       "docs/qwen.md",
	Layout:     "a dense SwiGLU MLP in every layer and the MTP layer, on the hybrid decoder of `qwen_hybrid.go`",
	ModelTypes: []string{"qwen3_5", "qwen3_5_text"}, Arch: "Qwen3_5For",
	Spec: specQwen35,
}, "qwen35", "qwen35", true, "qwen3_5_mtp")

func init() { model.RegisterFamily(qwen35DenseFamily) }
