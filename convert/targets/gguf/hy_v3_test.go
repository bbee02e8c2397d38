package gguf_test

import (
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Hy3's sidecar holds its three chained MTP layers blk.2..4,
// final_layernorm as nextn.shared_head_norm, the expert bias named bare
// (blk.N.exp_probs_b) and float32, the router float32.
func hy3Sidecar(t *testing.T, prec string, f *gg.File) {
	tensorTypes(t, f, prec, map[string]gg.GGMLType{"blk.4.exp_probs_b": gg.F32, "blk.4.ffn_gate_inp.weight": gg.F32,
		"blk.4.nextn.shared_head_norm.weight": gg.F32, "blk.3.nextn.eh_proj.weight": gg.BF16})
}
