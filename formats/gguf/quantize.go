package gguf

import "strings"

// llama-quantize's view of a tensor (src/llama-quant.cpp of the llama.cpp
// vendored by llama-cpp-python 0.3.36): it decides by the name alone, for
// every tensor of a file, including the tensors of a trunk whose kinds
// mtpconv never writes.

// QuantCategory is llama-quantize's tensor_get_category.
type QuantCategory uint8

// llama-quantize's categories.
const (
	CatOther QuantCategory = iota
	CatOutput
	CatTokenEmbd
	CatAttnQKV
	CatAttnKVB
	CatAttnV
	CatAttnK
	CatAttnQ
	CatAttnOutput
	CatFFNUp
	CatFFNGate
	CatFFNDown
)

// QuantizeCategory is tensor_get_category: exact names for the output and
// the embedding, else the first substring found, in its order.
func QuantizeCategory(name string) QuantCategory {
	switch name {
	case "output.weight":
		return CatOutput
	case "token_embd.weight", "per_layer_token_embd.weight":
		return CatTokenEmbd
	}
	for _, c := range quantCategories {
		if strings.Contains(name, c.sub) {
			return c.cat
		}
	}
	return CatOther
}

var quantCategories = []struct {
	sub string
	cat QuantCategory
}{
	{"attn_qkv.weight", CatAttnQKV}, {"attn_kv_b.weight", CatAttnKVB}, {"attn_v.weight", CatAttnV},
	{"attn_k.weight", CatAttnK}, {"attn_q.weight", CatAttnQ}, {"attn_output.weight", CatAttnOutput},
	{"ffn_up", CatFFNUp}, {"ffn_gate", CatFFNGate}, {"ffn_down", CatFFNDown},
}

// IsAttnV is category_is_attn_v: the categories counted as attn_v.
func (c QuantCategory) IsAttnV() bool { return c == CatAttnV || c == CatAttnQKV || c == CatAttnKVB }

// QuantizeAllowed is tensor_allows_quantization for the architectures of
// the supported families (no glm5-next exclusions): two or more
// dimensions, a name ending in "weight", no norm, not the MoE router (the
// shared-expert gate ffn_gate_inp_shexp is quantized), not Mamba's conv1d
// nor MiniMax's indexer projections; its exclusions for architectures
// outside these families (RWKV, Gemma-3n, T5, multimodal) are left out.
func QuantizeAllowed(name string, dims int) bool {
	if dims < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	for _, s := range []string{"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d", "indexer.k_proj.weight", "indexer.q_proj.weight"} {
		if strings.Contains(name, s) {
			return false
		}
	}
	return name != "position_embd.weight" && name != "token_types.weight"
}
