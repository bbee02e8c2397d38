package model

import (
	"fmt"
	"strings"
)

// unsupportedFamilies are the families with an MTP head that mtpconv knows
// and does not convert yet, by their Hugging Face architectures (prefixes,
// as MatchesIdentity takes them): a config
// of one is refused naming the family as its users know it and what it
// lacks, not as an unknown model_type. (The llama.cpp vendored by
// llama-cpp-python 0.3.36 has a draft graph for most; see issue 30.)
var unsupportedFamilies = []struct {
	architectures []string
	name, why     string
}{
	{[]string{"DeepseekV2ForCausalLM"}, "DeepSeek-V2", "its routing (softmax, greedy groups) has no MTP head in any release"},
	{[]string{"KimiK25ForConditionalGeneration"}, "Kimi-K2.5", "its head is not written yet (llama.cpp's reference converter drops it)"},
	{[]string{"DeepseekV4ForCausalLM"}, "DeepSeek-V4", "its head (llama.cpp's deepseek4: hyper-connections, hash routing) is not written yet"},
	{[]string{"Cohere2MoeForCausalLM"}, "Cohere2-MoE", "no public checkpoint ships its MTP layer"},
	{[]string{"Dots3Note"}, "dots3", "llama.cpp keeps its MTP tensors but has no draft graph for them"},
	{[]string{"Gemma4AssistantForCausalLM"}, "the Gemma-4 assistant", "it is a separate drafter model, not a head inside the checkpoint"},
}

// Unsupported is a family mtpconv knows and refuses by name: the name its
// users know and what it lacks.
type Unsupported struct{ Name, Why string }

// UnsupportedFamilies lists the families refused by name, in the order of
// the table (the docs render it).
func UnsupportedFamilies() []Unsupported {
	var out []Unsupported
	for _, f := range unsupportedFamilies {
		out = append(out, Unsupported{f.name, f.why})
	}
	return out
}

// unsupportedFamily is the refusal of a known family mtpconv does not convert.
func unsupportedFamily(id Identity) error {
	for _, f := range unsupportedFamilies {
		for _, a := range id.Architectures {
			for _, want := range f.architectures {
				if strings.HasPrefix(a, want) {
					return fmt.Errorf("%s (architectures %v) is not supported yet: %s; mtpconv converts %s", f.name, id.Architectures, f.why, strings.Join(Families(), ", "))
				}
			}
		}
	}
	return nil
}
