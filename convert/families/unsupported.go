package families

import "github.com/mtpconv/mtpconv/convert/model"

// unsupportedFamilies are the families with an MTP head that mtpconv knows
// and does not convert yet, by their Hugging Face architectures (prefixes,
// as MatchesIdentity takes them): a config
// of one is refused naming the family as its users know it and what it
// lacks, not as an unknown model_type. (The llama.cpp vendored by
// llama-cpp-python 0.3.36 has a draft graph for most; see issue 30.)
var unsupportedFamilies = []model.Unsupported{
	{Architectures: []string{"DeepseekV2ForCausalLM"}, Name: "DeepSeek-V2", Why: "its routing (softmax, greedy groups) has no MTP head in any release"},
	{Architectures: []string{"KimiK25ForConditionalGeneration"}, Name: "Kimi-K2.5", Why: "its head is not written yet (llama.cpp's reference converter drops it)"},
	{Architectures: []string{"Cohere2MoeForCausalLM"}, Name: "Cohere2-MoE", Why: "no public checkpoint ships its MTP layer"},
	{Architectures: []string{"Dots3Note"}, Name: "dots3", Why: "llama.cpp keeps its MTP tensors but has no draft graph for them"},
}

func init() {
	for _, u := range unsupportedFamilies {
		model.RegisterUnsupported(u)
	}
}
