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
