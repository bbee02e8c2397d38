package gguf

import (
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// llama-quantize takes an ffn_down's layer from its name only with more than
// one expert; a dense sidecar's one ffn_down (block 4 of 5) counts as layer 0,
// where use_more_bits is false: Q4_K, which a 384-wide row falls back to Q5_0.
// The MoE down experts of block 4 are in the last eighth: Q6_K, then Q8_0.
func TestFFNDownLayer(t *testing.T) {
	ts := []plannedTensor{{"blk.4.ffn_down.weight", []int64{128, 384}, "BF16"}}
	for _, c := range []struct {
		ft      gg.FileType
		nExpert int
		want    string
	}{
		{gg.FileQ4_K_M, 0, "Q5_0"}, {gg.FileQ5_K_M, 0, "Q5_1"}, {gg.FileQ4_K_S, 0, "Q5_0"},
		{gg.FileQ4_K_M, 4, "Q8_0"}, {gg.FileQ5_K_M, 4, "Q8_0"},
	} {
		if got := llamaQuantizeTypes(ts, c.ft, 5, c.nExpert)[ts[0].name]; got != c.want {
			t.Errorf("%v, %d experts: %s, want %s", c.ft, c.nExpert, got, c.want)
		}
	}
}
