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

// With exactly 8 experts llama-quantize raises attn_v and attn_k to Q8_0 and,
// at Q4_K_M/Q4_K_S, attn_output to Q5_K; with 256 it does not.
func TestEightExperts(t *testing.T) {
	ts := []plannedTensor{
		{"blk.4.attn_k.weight", []int64{256, 256}, "BF16"},
		{"blk.4.attn_output.weight", []int64{256, 256}, "BF16"},
		{"blk.4.attn_v.weight", []int64{256, 256}, "BF16"},
	}
	for _, c := range []struct {
		ft      gg.FileType
		nExpert int
		want    [3]string
	}{
		{gg.FileQ4_K_M, 8, [3]string{"Q8_0", "Q5_K", "Q8_0"}},
		{gg.FileQ4_K_S, 8, [3]string{"Q8_0", "Q5_K", "Q8_0"}},
		{gg.FileQ5_K_M, 8, [3]string{"Q8_0", "Q5_K", "Q8_0"}},
		{gg.FileQ4_K_M, 256, [3]string{"Q4_K", "Q4_K", "Q6_K"}},
	} {
		got := llamaQuantizeTypes(ts, c.ft, 5, c.nExpert)
		for i, want := range c.want {
			if got[ts[i].name] != want {
				t.Errorf("%v, %d experts: %s is %s, want %s", c.ft, c.nExpert, ts[i].name, got[ts[i].name], want)
			}
		}
	}
}

// gguf-py's size label: E x (shared + one expert) for MoE, else the count,
// with two significant digits at least.
func TestSizeLabel(t *testing.T) {
	for _, c := range []struct {
		ts   []paramCount
		want string
	}{
		{[]paramCount{{elems: 999}}, "1.0K"},
		{[]paramCount{{elems: 349_123}}, "349K"},
		{[]paramCount{{elems: 1_234_567}}, "1.2M"},
		{[]paramCount{{elems: 27_400_000_000}}, "27B"},
		{[]paramCount{{elems: 2_000_000_000}, {elems: 256 * 10_000_000, experts: 256}, {elems: 256 * 5_000_000, experts: 256}}, "256x2.0B"},
	} {
		if got := sizeLabel(c.ts); got != c.want {
			t.Errorf("%v: %s, want %s", c.ts, got, c.want)
		}
	}
	if c := countOf("blk.4.ffn_up_exps.weight", []int64{8, 64, 32}); c.experts != 8 || c.elems != 8*64*32 {
		t.Errorf("countOf: %+v", c)
	}
}
