package gguf

import "testing"

// The table agrees with the reference converter's float32 rule (a name
// ending "_norm.weight", or FFN_GATE_INP, FFN_GATE_INP_SHEXP, INDEXER_PROJ)
// and every kind's tensors parse back to it.
func TestKindsTable(t *testing.T) {
	for k, info := range kinds {
		listed := k == KindFFNGateInp || k == KindFFNGateInpShexp || k == KindIndexerProj
		if info.ConverterF32 != listed {
			t.Errorf("%s: ConverterF32 %v, the converter lists it: %v", k, info.ConverterF32, listed)
		}
		for _, tn := range []TensorName{Weight(k), Bias(k), BareName(k)} {
			got, b, err := ParseTensorName(tn.In(7))
			if err != nil || got != tn || (info.Block && b != 7) || (!info.Block && b != -1) {
				t.Errorf("%s: parsed as %+v block %d (%v)", tn.In(7), got, b, err)
			}
		}
	}
}

func TestTypeRules(t *testing.T) {
	for _, c := range []struct {
		name      string
		dims      int
		converter string // for a BF16 output
		quantize  bool
	}{
		{"token_embd.weight", 2, "BF16", true},
		{"output_norm.weight", 1, "F32", false},
		{"blk.3.ffn_gate_inp.weight", 2, "F32", false},
		{"blk.3.ffn_gate_inp_shexp.weight", 2, "F32", true}, // llama-quantize quantizes what the converter kept float32
		{"blk.3.indexer.proj.weight", 2, "F32", true},
		{"blk.3.indexer.k_norm.weight", 1, "F32", false},
		{"blk.3.exp_probs_b.bias", 1, "F32", false},
		{"blk.3.exp_probs_b", 1, "F32", false}, // hy_v3's expert bias, named bare
		{"blk.3.attn_q.bias", 1, "F32", false},
		{"blk.3.nextn.eh_proj.weight", 2, "BF16", true},
		{"blk.3.attn_qkv.weight", 2, "BF16", true},
		{"blk.3.attn_sinks.weight", 1, "F32", false},
		{"blk.3.layer_output_norm.weight", 1, "F32", false},
		{"blk.3.attn_gate.weight", 2, "BF16", true},
		{"blk.3.attn_qkv.weight", 2, "BF16", true},
		{"blk.3.attn_sinks.weight", 1, "F32", false},
		{"blk.3.layer_output_norm.weight", 1, "F32", false},
		{"blk.3.nextn.enorm.weight", 1, "F32", false},
		{"blk.3.ffn_down_exps.weight", 3, "BF16", true},
		{"blk.3.ffn_latent_down.weight", 2, "BF16", true},
	} {
		ct, err := ConverterType(c.name, c.dims, "BF16", true)
		q := QuantizeAllowed(c.name, c.dims)
		if err != nil || ct != c.converter || q != c.quantize {
			t.Errorf("%s: converter %s quantizable %v (%v), want %s %v", c.name, ct, q, err, c.converter, c.quantize)
		}
	}
	// Matched in another block than the source name's, the kinds kept float32 are not.
	for name, want := range map[string]string{"blk.3.ffn_gate_inp.weight": "BF16", "blk.3.exp_probs_b.bias": "F32", "blk.3.attn_norm.weight": "F32"} {
		if ct, err := ConverterType(name, 2, "BF16", false); err != nil || ct != want {
			t.Errorf("%s unmatched: %s (%v), want %s", name, ct, err, want)
		}
	}
	for _, bad := range []string{"blk.3.attn_qq.weight", "blk.x.attn_q.weight", "attn_q.weight", "blk.3.attn_q.scale", "blk.3.token_embd.weight", "blk.3.attn_qq"} {
		if _, _, err := ParseTensorName(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

func TestQuantizeCategory(t *testing.T) {
	for name, want := range map[string]QuantCategory{
		"output.weight": CatOutput, "token_embd.weight": CatTokenEmbd, "blk.0.attn_qkv.weight": CatAttnQKV,
		"blk.0.attn_kv_b.weight": CatAttnKVB, "blk.0.attn_v.weight": CatAttnV, "blk.0.attn_k.weight": CatAttnK,
		"blk.0.indexer.attn_k.weight": CatAttnK, "blk.0.attn_k_b.weight": CatOther, "blk.0.attn_q_a.weight": CatOther,
		"blk.0.attn_output.weight": CatAttnOutput, "blk.0.ffn_up_shexp.weight": CatFFNUp, "blk.0.ffn_gate_inp_shexp.weight": CatFFNGate,
		"blk.0.ffn_down_exps.weight": CatFFNDown, "blk.0.nextn.shared_head_head.weight": CatOther, "blk.0.nextn.embed_tokens.weight": CatOther,
		"blk.0.attn_gate.weight": CatOther,
	} {
		if got := QuantizeCategory(name); got != want {
			t.Errorf("%s: category %d, want %d", name, got, want)
		}
	}
}
