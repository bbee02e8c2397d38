package quant

import (
	"bytes"
	"math"
	"testing"
)

// TestMLXFPGoldenCPU compares our microscaling quantizer, in cpu rounding,
// with vectors produced by real MLX (interop/golden_mlx_fp.py), byte for
// byte: packed codes and scales, for every mode.
func TestMLXFPGoldenCPU(t *testing.T) {
	read := goldenReader(t, "mlx_fp_cpu.safetensors")
	for _, mode := range []MLXFPMode{MXFP4, MXFP8, NVFP4} {
		raw, in := read(mode.String() + ".input")
		cols := int(in.Shape[1])
		w := make([]float32, int(in.Shape[0])*cols)
		if err := DecodeF32(string(in.DType), raw, w); err != nil {
			t.Fatal(err)
		}
		p := MLXFPParams{Mode: mode, Rounding: MLXCPU}
		var stats ErrStats
		packed, scales := QuantizeMLXFP(w, cols, p, string(in.DType), nil, nil, &stats)
		wantQ, _ := read(mode.String() + ".weight")
		wantS, _ := read(mode.String() + ".scales")
		if !bytes.Equal(packed, wantQ) {
			t.Errorf("%s: packed codes differ", mode)
		}
		if !bytes.Equal(scales, wantS) {
			t.Errorf("%s: scales differ", mode)
		}
		// The error recorded is that of the stored form: dequantize and compare.
		deq := make([]float32, len(w))
		rb, g := p.RowBytes(cols), cols/mode.GroupSize()
		for r := 0; r*cols < len(w); r++ {
			DequantizeMLXFP(packed[r*rb:(r+1)*rb], cols, p, scales[r*g:(r+1)*g], deq[r*cols:(r+1)*cols])
		}
		var worst float64
		for i := range w {
			worst = max(worst, math.Abs(float64(w[i]-deq[i])))
		}
		if stats.N != int64(len(w)) || stats.Max != worst {
			t.Errorf("%s: stats %+v, max error of the stored form %g", mode, stats, worst)
		}
	}
}

// TestMLXFPGPUVariant covers where the Metal kernel differs from MLX's CPU:
// halves between fp4 codes go to the even code (CPU: the smaller), small
// negatives keep their sign bit, an all-zero mx group gets scale code 0 (CPU
// 127), and the mx scale is rounded up from the float32 quotient (CPU: from
// the quotient rounded to the weight's dtype).
func TestMLXFPGPUVariant(t *testing.T) {
	q := func(mode MLXFPMode, r MLXRounding, w []float32) ([]byte, []byte) {
		return QuantizeMLXFP(w, len(w), MLXFPParams{Mode: mode, Rounding: r}, "BF16", nil, nil, nil)
	}
	// Scale 1 (maximum 6): 0.75 and 1.75, 3.5 are halves.
	w := make([]float32, 32)
	w[0], w[1], w[2], w[3], w[4] = 6, 0.75, 1.75, 3.5, -0.125
	gq, gs := q(MXFP4, MLXGPU, w)
	cq, cs := q(MXFP4, MLXCPU, w)
	if gs[0] != 127+0 || cs[0] != 127 {
		t.Fatalf("scales gpu %d cpu %d, want 127", gs[0], cs[0])
	}
	// codes: 6 -> 7; 0.75 -> gpu 2 (1.0) cpu 1 (0.5); 1.75 -> gpu 4, cpu 3; 3.5 -> gpu 6, cpu 5; -0.125 -> gpu 8, cpu 0
	if gq[0] != 7|2<<4 || gq[1] != 4|6<<4 || gq[2] != 8 {
		t.Errorf("gpu codes % x", gq[:3])
	}
	if cq[0] != 7|1<<4 || cq[1] != 3|5<<4 || cq[2] != 0 {
		t.Errorf("cpu codes % x", cq[:3])
	}
	zero := make([]float32, 32)
	if _, s := q(MXFP4, MLXGPU, zero); s[0] != 0 {
		t.Errorf("gpu all-zero scale %d, want 0", s[0])
	}
	if _, s := q(MXFP8, MLXCPU, zero); s[0] != 127 {
		t.Errorf("cpu all-zero scale %d, want 127", s[0])
	}
	// A maximum whose quotient by 6 lies just above 2^-3 in float32 but
	// rounds to 2^-3 in bf16: the gpu takes 2^-2, the cpu 2^-3.
	m := float32(0.75 * (1 + 1.0/128)) // bf16-exact; m/6 = 0.125*(1+2^-7)... in float32
	w2 := make([]float32, 32)
	w2[0] = BF16ToF32(F32ToBF16(m))
	_, g2 := q(MXFP4, MLXGPU, w2)
	_, c2 := q(MXFP4, MLXCPU, w2)
	if want := uint8(pow2Ceil(w2[0]/6) + 127); g2[0] != want {
		t.Errorf("gpu scale %d, want %d", g2[0], want)
	}
	if want := uint8(pow2Ceil(BF16ToF32(F32ToBF16(w2[0]/6))) + 127); c2[0] != want {
		t.Errorf("cpu scale %d, want %d", c2[0], want)
	}
	// nvfp4 on the gpu multiplies by the float32 reciprocal of the scale.
	w3 := make([]float32, 16)
	w3[0], w3[1] = 6, float32(math.Copysign(0, -1)) // a Go constant -0.0 is +0
	q3, s3 := q(NVFP4, MLXGPU, w3)
	if F8E4M3ToF32(s3[0]) != 1 || q3[0] != 7|8<<4 {
		t.Errorf("nvfp4 gpu: scale %v codes % x", F8E4M3ToF32(s3[0]), q3[:1])
	}
}

// F32ToE4M3 against an independent rounding: the nearest E4M3 value, ties
// to the even code, saturating at 448, for every float32 around each code.
func TestE4M3RoundTrip(t *testing.T) {
	for c := 0; c < 256; c++ {
		v := F8E4M3ToF32(uint8(c))
		if c&127 == 127 {
			continue
		}
		if got := F32ToE4M3(v); got != uint8(c) && !(v == 0 && got&127 == 0) {
			t.Errorf("code %#x (%g) -> %#x", c, v, got)
		}
	}
	nearest := func(x float32) uint8 {
		best, bd := uint8(0), math.Inf(1)
		for c := 0; c < 256; c++ {
			if c&127 == 127 || (c&128 != 0) != math.Signbit(float64(x)) {
				continue
			}
			d := math.Abs(float64(F8E4M3ToF32(uint8(c))) - float64(x))
			if d < bd || (d == bd && c&1 == 0) {
				best, bd = uint8(c), d
			}
		}
		return best
	}
	for i := 0; i < 200000; i++ {
		x := float32(math.Ldexp(float64(i%1000)/997+0.001, i%22-12))
		if i&1 == 1 {
			x = -x
		}
		want := nearest(x)
		if math.Abs(float64(x)) >= 448 {
			want = 0x7E | uint8(b2i(x < 0)<<7)
		}
		if got := F32ToE4M3(x); got != want {
			t.Fatalf("%g -> %#x, want %#x", x, got, want)
		}
	}
}
