package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The quantizers' error statistics are computed from ggml's dequantization
// formulas (the reference quantize_row_* functions' own), so decoding their
// blocks must give the same largest error and the same sum of squares. The
// interop suite compares the decoder with libggml's bit for bit.
func TestDequantizeGGMLAgreesWithQuantizer(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	inputs := map[string][]float32{}
	normal, sparse, scaled := make([]float32, 256*16), make([]float32, 256*16), make([]float32, 256*16)
	for i := range normal {
		normal[i] = float32(r.NormFloat64())
		if r.Float32() < 0.1 {
			sparse[i] = normal[i]
		}
		scaled[i] = normal[i]
		if i%512 < 256 {
			scaled[i] /= 25 // an embedding half 25x smaller than the hidden half
		}
	}
	inputs["normal"], inputs["sparse"], inputs["scaled"], inputs["zeros"] = normal, sparse, scaled, make([]float32, 512)
	for _, typ := range []string{GGMLQ8_0, GGMLQ4_0, GGMLQ5_0, GGMLQ5_1, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K} {
		for name, x := range inputs {
			var qe ErrStats
			blocks, err := QuantizeGGML(typ, x, 256, nil, &qe)
			if err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, len(x))
			if err := DequantizeGGML(typ, blocks, deq); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			var mx, sum float64
			for i, v := range x {
				e := math.Abs(float64(v) - float64(deq[i]))
				mx = max(mx, e)
				sum += e * e
			}
			if mx != qe.Max || math.Abs(sum-qe.SumSq) > 1e-9*max(sum, 1e-30) {
				t.Errorf("%s on %s: decoded max %g sum %g, the quantizer's %g %g", typ, name, mx, sum, qe.Max, qe.SumSq)
			}
		}
	}
}

func TestDequantizeGGMLRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		typ   string
		bytes int
		vals  int
	}{{"Q4_K", 143, 256}, {"Q8_0", 34, 31}, {"IQ3_S", 110, 256}, {"F16", 3, 2}} {
		if err := DequantizeGGML(c.typ, make([]byte, c.bytes), make([]float32, c.vals)); err == nil {
			t.Errorf("%s: %d bytes for %d values decoded", c.typ, c.bytes, c.vals)
		}
	}
	vals := make([]float32, 2)
	if err := DequantizeGGML("F16", []byte{0, 0x3c, 0, 0xc0}, vals); err != nil || vals[0] != 1 || vals[1] != -2 {
		t.Errorf("F16: %v %v", vals, err)
	}
}

// TestDequantizeMXFP4 decodes ggml MXFP4 blocks as dequantize_row_mxfp4
// does: the values gguf-py's quants.dequantize prints for the same blocks
// (a normal scale, the subnormal 2^-127 scale, and 0xFF, which ggml takes
// as 2^127, not NaN: its products overflow), and, for every scale byte but
// 0xFF, the values of the FP4 codes RepackMXFP4 moved there.
func TestDequantizeMXFP4(t *testing.T) {
	blk := []byte{130}
	for j := range 16 {
		blk = append(blk, byte(16*j))
	}
	blk = append(blk, 1)
	for range 16 {
		blk = append(blk, 0x9f)
	}
	blk = append(blk, 0xff)
	for range 16 {
		blk = append(blk, 0x7f)
	}
	got := make([]float32, 96)
	if err := DequantizeGGML(GGMLMXFP4, blk, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 96)
	copy(want[16:32], []float32{0, 4, 8, 12, 16, 24, 32, 48, 0, -4, -8, -12, -16, -24, -32, -48})
	inf := float32(math.Inf(1))
	for j := range 16 {
		want[32+j], want[48+j] = -7.052966104933725e-38, -5.877471754111438e-39
		want[64+j], want[80+j] = -inf, inf
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: %g, want %g (gguf-py)", i, got[i], want[i])
		}
	}

	r := rand.New(rand.NewPCG(3, 9))
	codes, scales := make([]byte, 16*255), make([]byte, 255)
	for i := range codes {
		codes[i] = byte(r.UintN(256))
	}
	fs := make([]float32, len(scales))
	for i := range scales {
		scales[i] = byte(i) // every byte but 0xFF
		fs[i] = E8M0ToF32(scales[i])
	}
	blocks := make([]byte, MXFP4BlockBytes*len(scales))
	if err := RepackMXFP4(codes, scales, blocks); err != nil {
		t.Fatal(err)
	}
	ref, out := make([]float32, 32*len(scales)), make([]float32, 32*len(scales))
	if err := DecodeE2M1(codes, 32, fs, ref); err != nil {
		t.Fatal(err)
	}
	if err := DequantizeGGML(GGMLMXFP4, blocks, out); err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if out[i] != ref[i] { // ggml's code 8 is +0 where E2M1's is -0: equal values
			t.Fatalf("value %d (scale byte %d): %g from the MXFP4 block, %g from the FP4 codes", i, scales[i/32], out[i], ref[i])
		}
	}
	if err := DequantizeGGML(GGMLMXFP4, blocks[:16], make([]float32, 32)); err == nil {
		t.Fatal("a short MXFP4 block decoded")
	}
}
