package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// forEachPath runs f once with the portable Go kernels and, where the CPU
// has them, once with the vector assembly (AVX2 or NEON).
func forEachPath(t *testing.T, f func(t *testing.T)) {
	for _, p := range kernelPaths() {
		t.Run(p.name, func(t *testing.T) {
			setSIMD(t, p.simd)
			f(t)
		})
	}
}

// testDist names a distribution of test weights.
type testDist struct {
	name string
	gen  func(r *rand.Rand, n, group, bits int) []float32
}

func normalRow(r *rand.Rand, n int, scale float64) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64() * scale)
	}
	return w
}

// testDists are the weight distributions of the path comparison tests.
var testDists = []testDist{
	{"normal", func(r *rand.Rand, n, _, _ int) []float32 { return normalRow(r, n, 0.02) }},
	{"positive", func(r *rand.Rand, n, _, _ int) []float32 {
		w := normalRow(r, n, 0.3)
		for i, v := range w {
			w[i] = abs32(v) + 0.01
		}
		return w
	}},
	{"negative", func(r *rand.Rand, n, _, _ int) []float32 {
		w := normalRow(r, n, 0.3)
		for i, v := range w {
			w[i] = -abs32(v) - 0.01
		}
		return w
	}},
	{"constant", func(r *rand.Rand, n, group, _ int) []float32 {
		w := make([]float32, n)
		for g := 0; g < n; g += group {
			c := float32(r.NormFloat64())
			switch r.IntN(4) {
			case 0:
				c = 0
			case 1:
				c = float32(math.Copysign(0, -1))
			}
			for i := g; i < min(g+group, n); i++ {
				w[i] = c
			}
		}
		return w
	}},
	{"zeros", func(r *rand.Rand, n, _, _ int) []float32 {
		w := make([]float32, n)
		for i := range w {
			if r.IntN(3) == 0 {
				w[i] = float32(math.Copysign(0, -1))
			}
		}
		return w
	}},
	{"tiny", func(r *rand.Rand, n, _, _ int) []float32 {
		// Around the eps floors (1e-7 for MLX, 2^-23 for NNCF) and subnormals.
		w := make([]float32, n)
		for i := range w {
			switch r.IntN(4) {
			case 0:
				w[i] = float32(r.IntN(9)-4) * 1e-7
			case 1:
				w[i] = float32(r.NormFloat64() * 3e-7)
			case 2:
				w[i] = float32(r.NormFloat64() * 1e-40)
			default:
				w[i] = float32(r.IntN(33)-16) * (1.0 / (1 << 27))
			}
		}
		return w
	}},
	{"ties", func(r *rand.Rand, n, group, bits int) []float32 {
		// Groups spanning [-2^(bits-1), 2^(bits-1)-1] times a power of two,
		// so that the scale is that power of two for every quantizer here
		// (MLX, NNCF asym and sym), and half-integer values that quotient
		// to exact .5 ties.
		w := make([]float32, n)
		half := 1 << (bits - 1)
		for g := 0; g < n; g += group {
			p := float32(math.Ldexp(1, r.IntN(12)-6))
			end := min(g+group, n)
			for i := g; i < end; i++ {
				w[i] = (float32(r.IntN(2*half-1)-half) + 0.5) * p
				if r.IntN(4) == 0 {
					w[i] = float32(r.IntN(2*half)-half) * p
				}
			}
			if end-g >= 2 {
				w[g+r.IntN(end-g)] = -float32(half) * p
				i := g + r.IntN(end-g)
				for w[i] == -float32(half)*p && end-g > 2 {
					i = g + r.IntN(end-g)
				}
				w[i] = float32(half-1) * p
			}
		}
		return w
	}},
	{"large", func(r *rand.Rand, n, _, _ int) []float32 { return normalRow(r, n, 1e30) }},
	{"huge", func(r *rand.Rand, n, _, _ int) []float32 {
		w := normalRow(r, n, 1e4)
		for i := range w {
			if r.IntN(300) == 0 {
				// Ranges and errors may overflow to Inf (and sums to NaN).
				w[i] = float32(r.NormFloat64() * 1e37)
			}
		}
		return w
	}},
	{"outliers", func(r *rand.Rand, n, _, _ int) []float32 {
		w := normalRow(r, n, 0.01)
		for i := range w {
			if r.IntN(50) == 0 {
				w[i] *= 300
			}
		}
		return w
	}},
}

func sameF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// sameStats compares exactly, but any NaN sum (an error overflowed) equals
// any other: NaN payloads are not part of the scheme.
func sameStats(a, b ErrStats) bool {
	sameSq := math.Float64bits(a.SumSq) == math.Float64bits(b.SumSq) || math.IsNaN(a.SumSq) && math.IsNaN(b.SumSq)
	return math.Float64bits(a.Max) == math.Float64bits(b.Max) && sameSq && a.N == b.N
}

// withSIMD runs f with *simdFlag set to on.
func withSIMD(t *testing.T, on bool, f func()) {
	old := *simdFlag
	*simdFlag = on
	defer func() { *simdFlag = old }()
	f()
}

// TestMLXPathsAgree checks that the vector and Go kernels give the same packed
// weights, scales, biases and error statistics, bit for bit.
func TestMLXPathsAgree(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(7, 11))
	dtypes := []string{"BF16", "F16", "F32"}
	n := 0
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, gs := range []int{32, 64, 128} {
			for _, rounding := range []MLXRounding{MLXGPU, MLXCPU} {
				p := MLXAffineParams{Bits: bits, GroupSize: gs, Rounding: rounding}
				for _, d := range testDists {
					cols := 2 * 128
					rows := 3
					w := d.gen(r, rows*cols, gs, bits)
					dtype := dtypes[n%3]
					n++
					name := fmt.Sprintf("b%d.g%d.%v.%s.%s", bits, gs, rounding, d.name, dtype)
					mlxPathsAgree(t, name, w, cols, p, dtype)
				}
			}
		}
	}
}

// TestNNCFPathsAgree is TestMLXPathsAgree for NNCF: codes, scales, zero
// points and error statistics, and the packed nibbles.
func TestNNCFPathsAgree(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(3, 5))
	for _, bits := range []int{4, 8} {
		for _, sym := range []bool{false, true} {
			for _, shape := range []struct{ group, cols int }{
				{64, 256}, {128, 384}, {-1, 2048}, {-1, 512}, {-1, 72}, {-1, 40}, {-1, 37}, {-1, 13}, {-1, 5}, {-1, 1},
			} {
				p := NNCFParams{Bits: bits, Sym: sym, GroupSize: shape.group}
				for _, d := range testDists {
					rows := 3
					w := d.gen(r, rows*shape.cols, p.Group(shape.cols), bits)
					name := fmt.Sprintf("%s.g%d.c%d.%s", p.Name(), shape.group, shape.cols, d.name)
					nncfPathsAgree(t, name, w, shape.cols, p)
				}
			}
		}
	}
}

// mlxPathsAgree quantizes w with the Go and the vector kernels and reports
// any difference in the packed weights, scales, biases or error statistics.
func mlxPathsAgree(t *testing.T, name string, w []float32, cols int, p MLXAffineParams, dtype string) {
	t.Helper()
	type result struct {
		packed []byte
		s, b   []float32
		st     ErrStats
	}
	var res [2]result
	for k, on := range []bool{false, true} {
		withSIMD(t, on, func() {
			x := &res[k]
			x.packed, x.s, x.b = QuantizeMLXAffineStats(w, cols, p, nil, nil, nil, dtype, &x.st)
		})
	}
	g, a := res[0], res[1]
	if !bytes.Equal(g.packed, a.packed) {
		t.Errorf("%s: packed weights differ", name)
	}
	if !sameF32(g.s, a.s) || !sameF32(g.b, a.b) {
		t.Errorf("%s: scales or biases differ", name)
	}
	if !sameStats(g.st, a.st) {
		t.Errorf("%s: error stats differ: go %+v simd %+v", name, g.st, a.st)
	}
}

// nncfPathsAgree is mlxPathsAgree for NNCF: codes, scales, zero points,
// error statistics, and the codes packed as nibbles.
func nncfPathsAgree(t *testing.T, name string, w []float32, cols int, p NNCFParams) {
	t.Helper()
	type result struct {
		codes, zps, nib []byte
		s               []float32
		st              ErrStats
	}
	var res [2]result
	for k, on := range []bool{false, true} {
		withSIMD(t, on, func() {
			x := &res[k]
			x.codes, x.s, x.zps = QuantizeNNCFStats(w, cols, p, nil, nil, nil, &x.st)
			x.nib = PackNibbles(x.codes, []byte{0xaa})
		})
	}
	g, a := res[0], res[1]
	if !bytes.Equal(g.codes, a.codes) || !bytes.Equal(g.nib, a.nib) {
		t.Errorf("%s: codes differ", name)
	}
	if !sameF32(g.s, a.s) || !bytes.Equal(g.zps, a.zps) {
		t.Errorf("%s: scales or zero points differ", name)
	}
	if !sameStats(g.st, a.st) {
		t.Errorf("%s: error stats differ: go %+v simd %+v", name, g.st, a.st)
	}
}

// canonicalStats is the error statistics scheme written out plainly: per
// group, lanes i%8 of float32 squares, their float64 sum left to right.
func canonicalStats(w, deq []float32, group int) ErrStats {
	var st ErrStats
	for g := 0; g+group <= len(w); g += group {
		var lanes [8]float32
		var m float32
		for i := 0; i < group; i++ {
			d := float32(math.Abs(float64(deq[g+i] - w[g+i])))
			m = max(m, d)
			lanes[i%8] += float32(d * d)
		}
		sum := 0.0
		for _, l := range lanes {
			sum += float64(l)
		}
		st.Max = max(st.Max, float64(m))
		st.SumSq += sum
		st.N += int64(group)
	}
	return st
}

// TestErrStatsCanonical checks the statistics of both paths against the
// scheme computed from the dequantized output.
func TestErrStatsCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	forEachPath(t, func(t *testing.T) {
		for _, d := range testDists[:3] {
			cols := 256
			w := d.gen(r, 4*cols, 64, 4)
			for _, dtype := range []string{"BF16", "F16"} {
				p := MLXAffineParams{Bits: 4, GroupSize: 64, Rounding: MLXCPU}
				var st ErrStats
				packed, s, b := QuantizeMLXAffineStats(w, cols, p, nil, nil, nil, dtype, &st)
				for i := range s {
					s[i], b[i] = roundTo(dtype, s[i]), roundTo(dtype, b[i])
				}
				deq := make([]float32, len(w))
				rowBytes := cols * p.Bits / 8
				for row := 0; row < 4; row++ {
					g := cols / p.GroupSize
					DequantizeMLXAffine(packed[row*rowBytes:], cols, p, s[row*g:], b[row*g:], deq[row*cols:(row+1)*cols])
				}
				if want := canonicalStats(w, deq, p.GroupSize); !sameStats(st, want) {
					t.Errorf("MLX %s %s: stats %+v, want %+v", d.name, dtype, st, want)
				}
			}
			for _, p := range []NNCFParams{{8, false, -1}, {4, true, 64}} {
				var st ErrStats
				codes, s, zps := QuantizeNNCFStats(w, cols, p, nil, nil, nil, &st)
				deq := make([]float32, len(w))
				g := p.Group(cols)
				for i, c := range codes {
					var zp uint8
					if !p.Sym {
						zp = zps[i/g]
					}
					h, _ := F32ToF16(s[i/g])
					deq[i] = DequantizeNNCF(c, zp, F16ToF32(h), p)
				}
				if want := canonicalStats(w, deq, g); !sameStats(st, want) {
					t.Errorf("NNCF %s %s: stats %+v, want %+v", p.Name(), d.name, st, want)
				}
			}
		}
	})
}

func TestPackNibblesLengths(t *testing.T) { forEachPath(t, testPackNibblesLengths) }

func testPackNibblesLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for n := 0; n < 200; n++ {
		codes := make([]uint8, n)
		for i := range codes {
			codes[i] = uint8(r.IntN(256))
		}
		want := []byte{0x55}
		for i := 0; i < n; i += 2 {
			b := codes[i] & 0xf
			if i+1 < n {
				b |= codes[i+1] << 4
			}
			want = append(want, b)
		}
		if got := PackNibbles(codes, []byte{0x55}); !bytes.Equal(got, want) {
			t.Fatalf("n=%d: % x, want % x", n, got, want)
		}
	}
}

// TestAbsMaxVec: the vector maximum of |x| is the scalar one, and ok is
// false exactly when x holds a NaN (the smallest NaNs included), whichever
// lane holds the special value.
func TestAbsMaxVec(t *testing.T) {
	needSIMD(t)
	r := rand.New(rand.NewPCG(4, 4))
	specials := []uint32{0, 0x80000000, 1, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0x7fc00000, 0xffffffff}
	for _, n := range []int{8, 16, 32, 64} {
		for _, sp := range specials {
			for lane := range n {
				x := normalRow(r, n, 1)
				x[lane] = math.Float32frombits(sp)
				var want uint32
				nan := false
				for _, v := range x {
					a := math.Float32bits(v) &^ (1 << 31)
					nan = nan || a > 0x7f800000
					want = max(want, a)
				}
				m, ok := absMaxVec(x)
				if ok == nan || ok && math.Float32bits(m) != want {
					t.Fatalf("n %d, %#08x in lane %d: %#08x %v, want %#08x and ok %v", n, sp, lane, math.Float32bits(m), ok, want, !nan)
				}
			}
		}
	}
}
