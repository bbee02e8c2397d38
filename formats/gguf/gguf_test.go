package gguf

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	kvs := []KV{
		Pair("general.architecture", Str("qwen35moe")),
		Pair("qwen35moe.block_count", U32(5)),
		Pair("qwen35moe.rope.freq_base", Float(1e7)),
		Pair("qwen35moe.rope.dimension_sections", Int32s([]int32{3, 3, 2, 0})),
		Pair("qwen35moe.attention.recurrent_layers", Bools([]bool{true, false})),
		Pair("tokenizer.ggml.tokens", Strings([]string{"a", "", "<|im_end|>"})),
		Pair("tokenizer.ggml.add_bos_token", Bool(false)),
	}
	sizes := []int64{4 * 128, 34 * 4 * 2, 2 * 7}
	offs, total := Place(sizes, DefaultAlignment)
	if want := []int64{0, 512, 800}; !reflect.DeepEqual(offs, want) || total != 832 {
		t.Fatalf("Place = %v %d, want %v 832", offs, total, want)
	}
	ts := []TensorInfo{
		{Name: "output_norm.weight", Dims: []int64{128}, Type: F32, Offset: offs[0]},
		{Name: "blk.4.attn_k.weight", Dims: []int64{128, 2}, Type: Q8_0, Offset: offs[1]},
		{Name: "odd", Dims: []int64{7}, Type: BF16, Offset: offs[2]},
	}
	hdr, err := EncodeHeader(kvs, ts)
	if err != nil {
		t.Fatal(err)
	}
	if len(hdr)%DefaultAlignment != 0 || !bytes.HasPrefix(hdr, []byte("GGUF\x03\x00\x00\x00")) {
		t.Fatalf("header of %d bytes starts %q", len(hdr), hdr[:8])
	}
	file := append(hdr, make([]byte, total)...)
	f, err := Read(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Tensors, ts) || f.DataOffset != int64(len(hdr)) {
		t.Fatalf("tensors %+v at %d, want %+v at %d", f.Tensors, f.DataOffset, ts, len(hdr))
	}
	if len(f.KV) != len(kvs) {
		t.Fatalf("%d keys, want %d", len(f.KV), len(kvs))
	}
	for i := range kvs {
		if !reflect.DeepEqual(f.KV[i], kvs[i]) {
			t.Errorf("key %d: %+v, want %+v", i, f.KV[i], kvs[i])
		}
	}
	if n, _ := f.Uint("qwen35moe.block_count"); n != 5 || f.String("general.architecture") != "qwen35moe" {
		t.Errorf("lookups: %d %q", n, f.String("general.architecture"))
	}
	// A tensor past the end of the file is refused.
	cut := len(hdr) + 810 // the last tensor ends at 814
	if _, err := Read(bytes.NewReader(file[:cut]), int64(cut)); err == nil || !strings.Contains(err.Error(), "odd") {
		t.Errorf("truncated file: %v", err)
	}
	if _, err := EncodeHeader(append(kvs, kvs[0]), ts); err == nil {
		t.Error("a duplicate key was accepted")
	}
}

func TestReadRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{[]byte("GGML...."), []byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00")} {
		if _, err := Read(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%q was accepted", b)
		}
	}
}

func TestTypeSizes(t *testing.T) {
	for _, c := range []struct {
		t    GGMLType
		n, b int64
	}{{F32, 3, 12}, {BF16, 3, 6}, {Q8_0, 64, 68}, {Q4_0, 32, 18}, {Q4_K, 256, 144}, {Q6_K, 512, 420}} {
		if b, err := c.t.RowBytes(c.n); err != nil || b != c.b {
			t.Errorf("%s: %d values = %d bytes (%v), want %d", c.t, c.n, b, err, c.b)
		}
	}
	if _, err := Q8_0.RowBytes(33); err == nil {
		t.Error("33 values made whole Q8_0 blocks")
	}
}
