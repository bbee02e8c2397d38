package gguf_test

import (
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Ling-3.0's sidecar holds the gated MLA layer (attn_gate, attn_k_b /
// attn_v_b split from kv_b_proj), the expert bias as exp_probs_b.bias,
// final_layernorm as layer_output_norm, the per-layer key-value head counts
// and SwiGLU clamps padded over the MTP block. Its reference trunk (and the
// rigged twin's) is a KDA layer and a gated-MLA layer.
func ling3Sidecar(t *testing.T, prec string, f *gg.File) {
	if v, ok := f.Lookup("bailingmoe3.swiglu_clamp_exp"); !ok || v.Len() != 3 {
		t.Errorf("swiglu_clamp_exp %v", v)
	}
	tensorTypes(t, f, prec, map[string]gg.GGMLType{"blk.2.layer_output_norm.weight": gg.F32, "blk.2.attn_gate.weight": gg.BF16,
		"blk.2.exp_probs_b.bias": gg.F32, "blk.2.ffn_gate_inp.weight": gg.F32})
}
