package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var ggmlTypes = []string{GGMLQ8_0, GGMLQ4_0, GGMLQ5_0, GGMLQ5_1, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K}

// ggmlPathsAgree quantizes w with the Go and the vector kernels and compares
// the blocks and the error statistics bit for bit.
func ggmlPathsAgree(t *testing.T, name, typ string, w []float32, cols int) {
	t.Helper()
	var out [2][]byte
	var stats [2]ErrStats
	for i, on := range []bool{false, true} {
		withSIMD(t, on, func() {
			var err error
			if out[i], err = QuantizeGGML(typ, w, cols, nil, &stats[i]); err != nil {
				t.Fatal(err)
			}
			// Without statistics (as the verifier quantizes) the blocks are the same.
			if plain, _ := QuantizeGGML(typ, w, cols, nil, nil); !bytes.Equal(plain, out[i]) {
				t.Fatalf("%s: blocks without statistics differ (simd %v)", name, on)
			}
		})
	}
	if !bytes.Equal(out[0], out[1]) {
		qk, bs, _ := GGMLBlock(typ)
		for b := 0; b < len(out[0]); b += bs {
			if !bytes.Equal(out[0][b:b+bs], out[1][b:b+bs]) {
				t.Fatalf("%s: block %d differs: x %v\ngo   %x\navx2 %x", name, b/bs, w[b/bs*qk:b/bs*qk+qk], out[0][b:b+bs], out[1][b:b+bs])
			}
		}
	}
	if !sameStats(stats[0], stats[1]) {
		t.Errorf("%s: error statistics differ: go %+v, simd %+v (max %#x %#x)", name, stats[0], stats[1], math.Float64bits(stats[0].Max), math.Float64bits(stats[1].Max))
	}
}

// TestGGMLPathsAgree: every ggml type, every test distribution (which
// includes groups of equal values, zeros, subnormals and sums that overflow).
func TestGGMLPathsAgree(t *testing.T) {
	skipWithoutSIMD(t)
	r := rand.New(rand.NewPCG(23, 5))
	for _, typ := range ggmlTypes {
		for _, d := range testDists {
			for _, group := range []int{16, 32, 256} {
				const cols = 512
				w := d.gen(r, 32*cols, group, 4)
				ggmlPathsAgree(t, fmt.Sprintf("%s/%s/%d", typ, d.name, group), typ, w, cols)
			}
		}
	}
}

// legacyEdgeBlocks are 32-value blocks at the edges of Q4_0, Q5_0 and Q5_1:
// ties of the largest magnitude, zero extremes of either sign, scales whose
// inverse or f16 overflows, infinities and NaNs.
func legacyEdgeBlocks() map[string][]float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	ramp := func(f func(i int) float32) []float32 {
		b := make([]float32, 32)
		for i := range b {
			b[i] = f(i)
		}
		return b
	}
	set := func(b []float32, kv ...float32) []float32 {
		for i := 0; i < len(kv); i += 2 {
			b[int(kv[i])] = kv[i+1]
		}
		return b
	}
	small := func(i int) float32 { return float32(i%7-3) * 0.1 }
	return map[string][]float32{
		"tie +first":    set(ramp(small), 3, 2, 9, -2),
		"tie -first":    set(ramp(small), 3, -2, 9, 2),
		"zeros +first":  ramp(func(i int) float32 { return []float32{0, negZero}[i%2] }),
		"zeros -first":  ramp(func(i int) float32 { return []float32{negZero, 0}[i%2] }),
		"min -0 first":  set(ramp(func(i int) float32 { return float32(i + 1) }), 5, negZero, 7, 0),
		"min +0 first":  set(ramp(func(i int) float32 { return float32(i + 1) }), 5, 0, 7, negZero),
		"max -0 first":  set(ramp(func(i int) float32 { return -float32(i + 1) }), 20, negZero, 30, 0),
		"max +0 first":  set(ramp(func(i int) float32 { return -float32(i + 1) }), 20, 0, 30, negZero),
		"subnormal":     ramp(func(i int) float32 { return float32(i-16) * 1e-40 }),
		"subnormal+0":   set(ramp(func(i int) float32 { return float32(i%5) * 3e-41 }), 0, negZero),
		"halves":        ramp(func(i int) float32 { return float32(i-16) / 2 }),
		"f16 overflow":  ramp(func(i int) float32 { return float32(i-15) * 1e5 }),
		"max float":     set(ramp(small), 1, math.MaxFloat32, 2, -math.MaxFloat32),
		"inf":           set(ramp(small), 4, inf),
		"-inf and inf":  set(ramp(small), 4, -inf, 8, inf),
		"nan":           set(ramp(small), 6, nan),
		"nan at max":    set(ramp(small), 0, nan, 1, 5, 2, nan),
		"all nan":       ramp(func(int) float32 { return nan }),
		"nan and zeros": set(ramp(func(int) float32 { return negZero }), 0, nan),
	}
}

// TestGGMLLegacyEdges: each edge block alone, and after and before ordinary
// blocks (a kernel stops at a NaN error and resumes after it), gives the
// same bits in both paths; and the scalar rules the kernels follow hold.
func TestGGMLLegacyEdges(t *testing.T) {
	skipWithoutSIMD(t)
	r := rand.New(rand.NewPCG(3, 9))
	ordinary := normalRow(r, 64, 0.02)
	for name, b := range legacyEdgeBlocks() {
		for _, typ := range []string{GGMLQ8_0, GGMLQ4_0, GGMLQ5_0, GGMLQ5_1} {
			ggmlPathsAgree(t, typ+"/"+name, typ, b, 32)
			w := append(append(append([]float32{}, ordinary...), b...), ordinary...)
			ggmlPathsAgree(t, typ+"/"+name+"/among", typ, w, 32)
		}
	}
	blocks := legacyEdgeBlocks()
	f16At := func(typ string, b []float32, off int) uint16 {
		y, err := QuantizeGGML(typ, b, 32, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return uint16(y[off]) | uint16(y[off+1])<<8
	}
	forEachPath(t, func(t *testing.T) {
		for _, c := range []struct {
			typ, block string
			off        int
			want       uint16
		}{
			{GGMLQ4_0, "tie +first", 0, 0xb400},   // d = 2 / -8
			{GGMLQ4_0, "tie -first", 0, 0x3400},   // d = -2 / -8
			{GGMLQ5_0, "zeros -first", 0, 0x8000}, // mx stays +0: d = +0 / -16
			{GGMLQ5_1, "min -0 first", 2, 0x8000}, // m: the first zero, its sign kept
			{GGMLQ5_1, "min +0 first", 2, 0x0000},
			{GGMLQ5_1, "zeros -first", 2, 0x8000},
			{GGMLQ5_1, "zeros +first", 2, 0x0000},
		} {
			if got := f16At(c.typ, blocks[c.block], c.off); got != c.want {
				t.Errorf("%s %s: f16 at %d is %#04x, want %#04x", c.typ, c.block, c.off, got, c.want)
			}
		}
	})
}

func FuzzGGML(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s, i%2 == 0, uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, bf16 bool, typSel uint8) {
		typ := ggmlTypes[int(typSel)%len(ggmlTypes)]
		qk, _, _ := GGMLBlock(typ)
		w := fuzzRow(fuzzFloats(data, bf16), qk)
		skipWithoutSIMD(t)
		ggmlPathsAgree(t, typ, typ, w, qk)
	})
}

// mlxfpPathsAgree quantizes w in a microscaling mode with the Go and the
// vector kernels and compares codes, scales and statistics bit for bit.
func mlxfpPathsAgree(t *testing.T, name string, w []float32, cols int, p MLXFPParams, dtype string) {
	t.Helper()
	var packed, scales [2][]byte
	var stats [2]ErrStats
	for i, on := range []bool{false, true} {
		withSIMD(t, on, func() {
			packed[i], scales[i] = QuantizeMLXFP(w, cols, p, dtype, nil, nil, &stats[i])
		})
	}
	if !bytes.Equal(scales[0], scales[1]) {
		t.Fatalf("%s: scales differ", name)
	}
	if !bytes.Equal(packed[0], packed[1]) {
		for i := range packed[0] {
			if packed[0][i] != packed[1][i] {
				j := i * 8 / p.Mode.Bits()
				t.Fatalf("%s: code byte %d differs (value %v): go %#x, simd %#x", name, i, w[j], packed[0][i], packed[1][i])
			}
		}
	}
	if !sameStats(stats[0], stats[1]) {
		t.Errorf("%s: error statistics differ: go %+v, simd %+v (max %#x %#x)", name, stats[0], stats[1], math.Float64bits(stats[0].Max), math.Float64bits(stats[1].Max))
	}
}

var mlxfpCases = func() (ps []MLXFPParams) {
	for _, m := range []MLXFPMode{MXFP4, MXFP8, NVFP4} {
		for _, r := range []MLXRounding{MLXGPU, MLXCPU} {
			ps = append(ps, MLXFPParams{Mode: m, Rounding: r})
		}
	}
	return ps
}()

func TestMLXFPPathsAgree(t *testing.T) {
	skipWithoutSIMD(t)
	r := rand.New(rand.NewPCG(29, 31))
	for _, p := range mlxfpCases {
		for _, d := range testDists {
			for _, dtype := range []string{"BF16", "F16", "F32"} {
				const cols = 256
				w := d.gen(r, 8*cols, p.Mode.GroupSize(), 4)
				for i := range w {
					w[i] = roundTo(dtype, w[i])
				}
				mlxfpPathsAgree(t, fmt.Sprintf("%s-%s/%s/%s", p.Mode, p.Rounding, d.name, dtype), w, cols, p, dtype)
			}
		}
	}
}

func FuzzMLXFP(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s, i%2 == 0, uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, bf16 bool, sel uint8) {
		p := mlxfpCases[int(sel)%len(mlxfpCases)]
		dtype := []string{"BF16", "F16", "F32"}[int(sel>>3)%3]
		w := fuzzRow(fuzzFloats(data, bf16), p.Mode.GroupSize())
		skipWithoutSIMD(t)
		mlxfpPathsAgree(t, fmt.Sprintf("%s-%s %s", p.Mode, p.Rounding, dtype), w, p.Mode.GroupSize(), p, dtype)
	})
}
