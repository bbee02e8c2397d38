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
