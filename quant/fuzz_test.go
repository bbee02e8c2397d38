package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// Fuzz tests: for arbitrary bytes read as float32 or bf16 values (NaN, Inf,
// subnormals and -0 included), the vector kernels (AVX2, NEON) and the
// portable Go code must give the same bits. In a plain `go test` only the seeds below run;
// `go test ./quant -run '^$' -fuzz '^FuzzFloatCasts$'` (and likewise
// FuzzMLXAffine, FuzzNNCF) searches further. testdata/fuzz keeps the inputs
// that once failed (a group of equal huge values, whose scale underflows to
// 0 so that every quotient is 0/0: the AVX2 MLX kernel counted a NaN error).

// fuzzFloats reads data as values: little-endian bf16 pairs when bf16 is
// set (what checkpoints hold), else raw little-endian float32 patterns.
func fuzzFloats(data []byte, bf16 bool) []float32 {
	if bf16 {
		v := make([]float32, len(data)/2)
		for i := range v {
			v[i] = BF16ToF32(binary.LittleEndian.Uint16(data[2*i:]))
		}
		return v
	}
	v := make([]float32, len(data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return v
}

// f32Bytes is the little-endian encoding of v.
func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bf16Bytes is v rounded to bf16, little-endian.
func bf16Bytes(v ...float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(x))
	}
	return b
}

// fuzzSeeds are short inputs mixing specials with ordinary weights; each is
// long enough (≥ 16 values either way) to reach the vector kernels.
func fuzzSeeds() [][]byte {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	weights := make([]float32, 160)
	for i := range weights {
		weights[i] = float32(math.Sin(float64(i)*0.7)) * 0.02
	}
	specials := f32Specials()
	mixed := append([]float32{nan, -inf, inf, negZero, 1e-40, -1e-45, 65520, 3e38}, weights[:72]...)
	return [][]byte{
		nil,
		f32Bytes(specials[:64]...),
		f32Bytes(specials[len(specials)-64:]...),
		halfPatterns()[:256],
		bf16Bytes(weights...),
		f32Bytes(weights[:64]...),
		bf16Bytes(mixed...),
		f32Bytes(mixed...),
		bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80}, 40),
	}
}

// skipWithoutSIMD skips where there are no vector kernels to compare with.
func skipWithoutSIMD(t *testing.T) {
	if !*simdFlag {
		t.Skip("no vector kernels on this machine")
	}
}

// bothPaths runs f with the Go kernels, then with the vector ones.
func bothPaths(t *testing.T, f func(simd bool)) {
	skipWithoutSIMD(t)
	for _, on := range []bool{false, true} {
		withSIMD(t, on, func() { f(on) })
	}
}

func FuzzFloatCasts(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		halves := data[:len(data)&^1]
		n16 := len(halves) / 2
		vals := fuzzFloats(data, false)
		type result struct {
			bf16, f16           []float32 // decoded
			encBF16, encF16     []byte
			cast                []byte
			encOverflows, castO int
		}
		var res [2]result
		bothPaths(t, func(simd bool) {
			r := &res[b2i(simd)]
			r.bf16, r.f16 = make([]float32, n16), make([]float32, n16)
			if err := DecodeF32("BF16", halves, r.bf16); err != nil {
				t.Fatal(err)
			}
			if err := DecodeF32("F16", halves, r.f16); err != nil {
				t.Fatal(err)
			}
			r.encBF16, r.encF16 = make([]byte, 2*len(vals)), make([]byte, 2*len(vals))
			if _, err := EncodeF32("BF16", vals, r.encBF16); err != nil {
				t.Fatal(err)
			}
			var err error
			if r.encOverflows, err = EncodeF32("F16", vals, r.encF16); err != nil {
				t.Fatal(err)
			}
			r.cast = make([]byte, len(halves))
			if r.castO, err = CastBF16ToF16(halves, r.cast); err != nil {
				t.Fatal(err)
			}
		})
		g, a := res[0], res[1]
		if !sameF32(g.bf16, a.bf16) || !sameF32(g.f16, a.f16) {
			t.Errorf("decoding differs")
		}
		if !bytes.Equal(g.encBF16, a.encBF16) {
			t.Errorf("bf16 encoding differs")
		}
		if !bytes.Equal(g.encF16, a.encF16) || g.encOverflows != a.encOverflows {
			t.Errorf("f16 encoding differs (overflows go %d, simd %d)", g.encOverflows, a.encOverflows)
		}
		if !bytes.Equal(g.cast, a.cast) || g.castO != a.castO {
			t.Errorf("bf16 to f16 cast differs (overflows go %d, simd %d)", g.castO, a.castO)
		}
		// The one-pass cast is decode then encode.
		twoPass := make([]byte, len(halves))
		if of, _ := EncodeF32("F16", g.bf16, twoPass); !bytes.Equal(twoPass, g.cast) || of != g.castO {
			t.Errorf("the one-pass cast differs from decode + encode")
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fuzzRow pads (by repetition) or cuts vals to a positive multiple of n values.
func fuzzRow(vals []float32, n int) []float32 {
	rows := max(1, len(vals)/n)
	w := make([]float32, rows*n)
	for i := range w {
		if len(vals) > 0 {
			w[i] = vals[i%len(vals)]
		}
	}
	return w
}

func FuzzMLXAffine(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s, i%2 == 0, uint8(i), uint8(i/2), uint8(i/3))
	}
	f.Fuzz(func(t *testing.T, data []byte, bf16 bool, bitsSel, groupSel, mode uint8) {
		p := MLXAffineParams{
			Bits:      []int{2, 3, 4, 5, 6, 8}[int(bitsSel)%6],
			GroupSize: []int{32, 64, 128}[int(groupSel)%3],
			Rounding:  []MLXRounding{MLXGPU, MLXCPU}[mode&1],
		}
		dtype := []string{"BF16", "F16", "F32"}[int(mode>>1)%3]
		cols := p.GroupSize * (1 + int(mode>>3)%2)
		w := fuzzRow(fuzzFloats(data, bf16), cols)
		skipWithoutSIMD(t)
		mlxPathsAgree(t, fmt.Sprintf("%+v %s", p, dtype), w, cols, p, dtype)
	})
}

func FuzzNNCF(f *testing.F) {
	for i, s := range fuzzSeeds() {
		f.Add(s, i%2 == 1, uint8(i), uint8(i/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, bf16 bool, mode, shape uint8) {
		p := NNCFParams{Bits: []int{4, 8}[mode&1], Sym: mode&2 != 0, GroupSize: -1}
		vals := fuzzFloats(data, bf16)
		var cols int
		switch shape % 4 {
		case 0: // one channel: the whole input, any length
			cols = max(1, len(vals))
		case 1: // short channels, mostly tails of the 8-wide kernels
			cols = 1 + int(shape>>2)%40
		case 2:
			p.GroupSize, cols = 64, 128
		default:
			p.GroupSize, cols = 128, 128
		}
		w := fuzzRow(vals, cols)
		skipWithoutSIMD(t)
		nncfPathsAgree(t, fmt.Sprintf("%s group %d cols %d", p.Name(), p.GroupSize, cols), w, cols, p)
	})
}
