package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The vector kernels (AVX2, NEON) must give the same bits as the Go loops.
// These tests run every conversion both ways by switching *simdFlag and
// compare.

// needSIMD skips when the vector kernels cannot run and restores the flag
// after the test, whatever the test left it at.
func needSIMD(t *testing.T) {
	t.Helper()
	if !*simdFlag {
		t.Skip("no vector kernels on this machine")
	}
	saved := *simdFlag
	t.Cleanup(func() { *simdFlag = saved })
}

// halfPatterns returns every 16-bit pattern, little-endian, in a scrambled
// order (odd multiplier mod 2^16) so short windows mix NaNs, subnormals and
// normals.
func halfPatterns() []byte {
	b := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(i*40503+12345))
	}
	return b
}

func f32Specials() []float32 {
	bits := []uint32{
		0, 1, 0x007fffff, 0x00800000, // zero, f32 subnormals, smallest normal
		0x7f800000, 0x7f7fffff, // inf, max finite
		0x7f800001, 0x7f801fff, 0x7f802000, 0x7f803fff, 0x7fa00000, 0x7fbfffff, // signalling NaNs
		0x7fc00000, 0x7fc00001, 0x7fe00000, 0x7fffe000, 0x7fffffff, 0x7fc12345, // quiet NaNs
		0x477fe000, // 65504
		0x477fefff, // 65519.996: the largest value that stays finite
		0x477ff000, // 65520: rounds to inf
		0x477ff001, 0x47800000, 0x4f800000,
		0x387fc000,                         // largest subnormal half
		0x387fdfff, 0x387fe000, 0x387fe001, // around its midpoint to 2^-14
		0x38800000, 0x387fffff, // 2^-14 and just below
		0x33800000, 0x33000000, 0x33000001, 0x32ffffff, // 2^-24, 2^-25 (tie to 0), either side
		0x33c00000, 0x33a00000, // 1.5 * 2^-24, 1.25 * 2^-24
		0x3f800000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, // bf16 ties
		0x3f801000, 0x3f803000, 0x3f800fff, 0x3f801001, // f16 ties
		0x7f7f8000, 0x7f7fffff, 0x7f7f7fff, // bf16 rounding up to inf
	}
	// Every half subnormal step k*2^-24, its midpoint and the floats beside it.
	for k := 0; k <= 1024; k++ {
		e := math.Float32bits(float32(k) * 0x1p-24)
		m := math.Float32bits((float32(k) + 0.5) * 0x1p-24)
		bits = append(bits, e, m-1, m, m+1)
	}
	var out []float32
	for _, b := range bits {
		out = append(out, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}
	return out
}

// f32Sweep hits every exponent with many mantissas: a prime-stride walk over
// all 2^32 patterns, every top-19-bit value with the low bits that decide f16
// rounding, every top-16-bit value with the low bits that decide bf16
// rounding, random patterns, and the specials.
func f32Sweep() []float32 {
	out := make([]float32, 0, 5<<20)
	for b := uint64(0); b < 1<<32; b += 4099 {
		out = append(out, math.Float32frombits(uint32(b)))
	}
	for hi := uint32(0); hi < 1<<19; hi++ {
		for _, lo := range []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff} {
			out = append(out, math.Float32frombits(hi<<13|lo))
		}
	}
	for hi := uint32(0); hi < 1<<16; hi++ {
		for _, lo := range []uint32{0x7fff, 0x8000, 0x8001, 0xffff} {
			out = append(out, math.Float32frombits(hi<<16|lo))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1 << 18 {
		out = append(out, math.Float32frombits(r.Uint32()))
	}
	return append(out, f32Specials()...)
}

func decodeBoth(t *testing.T, dtype string, src []byte, n int) (goOut, vecOut []float32) {
	t.Helper()
	goOut, vecOut = make([]float32, n), make([]float32, n)
	*simdFlag = false
	if err := DecodeF32(dtype, src, goOut); err != nil {
		t.Fatal(err)
	}
	*simdFlag = true
	if err := DecodeF32(dtype, src, vecOut); err != nil {
		t.Fatal(err)
	}
	return goOut, vecOut
}

func testDecode(t *testing.T, dtype string, scalar func(uint16) float32) {
	needSIMD(t)
	src := halfPatterns()
	goOut, vecOut := decodeBoth(t, dtype, src, 1<<16)
	for i := range goOut {
		h := binary.LittleEndian.Uint16(src[2*i:])
		if want := math.Float32bits(scalar(h)); math.Float32bits(goOut[i]) != want {
			t.Fatalf("%s go %#04x: %#08x, want %#08x", dtype, h, math.Float32bits(goOut[i]), want)
		}
		if got := math.Float32bits(vecOut[i]); got != math.Float32bits(goOut[i]) {
			t.Fatalf("%s simd %#04x: %#08x, want %#08x", dtype, h, got, math.Float32bits(goOut[i]))
		}
	}
	// Short lengths (tails) at odd element and byte offsets, with guards
	// after the end of dst.
	const guard = 0x5a5a5a5a
	for _, off := range []int{0, 1, 3} {
		for _, shift := range []int{0, 1} {
			for n := 0; n <= 40; n++ {
				s := src[2*off+shift+100*n:][:2*n]
				var bufs [2][]float32
				for k, simd := range []bool{false, true} {
					buf := make([]float32, off+n+9)
					for i := range buf {
						buf[i] = math.Float32frombits(guard)
					}
					*simdFlag = simd
					if err := DecodeF32(dtype, s, buf[off:off+n]); err != nil {
						t.Fatal(err)
					}
					bufs[k] = buf
				}
				for i := range bufs[0] {
					g, v := math.Float32bits(bufs[0][i]), math.Float32bits(bufs[1][i])
					if g != v {
						t.Fatalf("%s off %d shift %d n %d: [%d] simd %#08x, go %#08x", dtype, off, shift, n, i, v, g)
					}
					if (i < off || i >= off+n) && v != guard {
						t.Fatalf("%s off %d n %d: wrote outside dst at %d", dtype, off, n, i)
					}
				}
			}
		}
	}
}

func TestDecodeBF16SIMD(t *testing.T) { testDecode(t, "BF16", BF16ToF32) }
func TestDecodeF16SIMD(t *testing.T)  { testDecode(t, "F16", F16ToF32) }

func encodeOnce(t *testing.T, dtype string, simd bool, src []float32, dst []byte) int {
	t.Helper()
	*simdFlag = simd
	of, err := EncodeF32(dtype, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return of
}

func testEncode(t *testing.T, dtype string) {
	needSIMD(t)
	src := f32Sweep()
	goOut, vecOut := make([]byte, 2*len(src)), make([]byte, 2*len(src))
	goOF := encodeOnce(t, dtype, false, src, goOut)
	vecOF := encodeOnce(t, dtype, true, src, vecOut)
	for i, v := range src {
		g := binary.LittleEndian.Uint16(goOut[2*i:])
		w := F32ToBF16(v)
		if dtype == "F16" {
			w, _ = F32ToF16(v)
		}
		if g != w {
			t.Fatalf("%s go %#08x: %#04x, want %#04x", dtype, math.Float32bits(v), g, w)
		}
		if a := binary.LittleEndian.Uint16(vecOut[2*i:]); a != g {
			t.Fatalf("%s simd %#08x: %#04x, want %#04x", dtype, math.Float32bits(v), a, g)
		}
	}
	if goOF != vecOF {
		t.Fatalf("%s overflows: simd %d, go %d", dtype, vecOF, goOF)
	}
	if dtype == "F16" && goOF == 0 {
		t.Fatal("the sweep has no overflows: it tests nothing")
	}

	// Overflow counts block by block, each block wholly in the assembly,
	// so compensating errors cannot hide.
	var blk [16]byte
	for i := 0; i+8 <= len(src); i += 8 {
		want := 0
		for _, v := range src[i : i+8] {
			if _, of := F32ToF16(v); of && dtype == "F16" {
				want++
			}
		}
		if got := encodeOnce(t, dtype, true, src[i:i+8], blk[:]); got != want {
			t.Fatalf("%s overflows in %v: simd %d, want %d", dtype, src[i:i+8], got, want)
		}
	}
	// Each special repeated across a whole vector, in every lane.
	for _, v := range f32Specials() {
		var in [32]float32
		for i := range in {
			in[i] = v
		}
		var g, a [64]byte
		gof := encodeOnce(t, dtype, false, in[:], g[:])
		aof := encodeOnce(t, dtype, true, in[:], a[:])
		if g != a || gof != aof {
			t.Fatalf("%s %#08x x32: simd %x (%d overflows), go %x (%d)", dtype, math.Float32bits(v), a, aof, g, gof)
		}
	}

	// Short lengths (tails) at odd offsets, odd byte starts in dst, and
	// guards after the end. The inputs mix specials with the sweep.
	mix := append(f32Specials(), src[:4096]...)
	r := rand.New(rand.NewPCG(5, 6))
	r.Shuffle(len(mix), func(i, j int) { mix[i], mix[j] = mix[j], mix[i] })
	for _, off := range []int{0, 1, 3} {
		for _, shift := range []int{0, 1} {
			for n := 0; n <= 40; n++ {
				s := mix[off+50*n:][:n]
				var bufs [2][]byte
				var ofs [2]int
				for k, simd := range []bool{false, true} {
					buf := make([]byte, 2*(off+n)+shift+17)
					for i := range buf {
						buf[i] = 0xa5
					}
					ofs[k] = encodeOnce(t, dtype, simd, s, buf[2*off+shift:][:2*n])
					bufs[k] = buf
				}
				if ofs[0] != ofs[1] {
					t.Fatalf("%s off %d n %d: overflows simd %d, go %d", dtype, off, n, ofs[1], ofs[0])
				}
				for i := range bufs[0] {
					if bufs[0][i] != bufs[1][i] {
						t.Fatalf("%s off %d shift %d n %d: byte %d simd %#02x, go %#02x", dtype, off, shift, n, i, bufs[1][i], bufs[0][i])
					}
					if lo := 2*off + shift; (i < lo || i >= lo+2*n) && bufs[1][i] != 0xa5 {
						t.Fatalf("%s off %d n %d: wrote outside dst at byte %d", dtype, off, n, i)
					}
				}
			}
		}
	}
}

func TestEncodeF16SIMD(t *testing.T)  { testEncode(t, "F16") }
func TestEncodeBF16SIMD(t *testing.T) { testEncode(t, "BF16") }

// The fused bf16 -> f16 cast gives the bits and overflow count of decoding to
// float32 and encoding, on both paths, for every bf16 pattern and for short
// lengths at odd offsets.
func TestCastBF16ToF16(t *testing.T) {
	needSIMD(t)
	src := halfPatterns()
	for _, off := range []int{0, 1, 3, 7} {
		lengths := []int{1<<16 - off}
		for n := 0; n <= 40; n++ {
			lengths = append(lengths, n)
		}
		for _, n := range lengths {
			s := src[2*off:][:2*n]
			vals := make([]float32, n)
			want := make([]byte, 2*n)
			*simdFlag = false
			DecodeF32("BF16", s, vals)
			wantOF, _ := EncodeF32("F16", vals, want)
			for _, simd := range []bool{false, true} {
				*simdFlag = simd
				got := make([]byte, 2*n+3)
				got[2*n], got[2*n+1], got[2*n+2] = 0xa5, 0xa5, 0xa5
				of, err := CastBF16ToF16(s, got[:2*n])
				if err != nil {
					t.Fatal(err)
				}
				if of != wantOF || string(got[:2*n]) != string(want) {
					t.Fatalf("simd %v off %d n %d: %d overflows (want %d) or bits differ", simd, off, n, of, wantOF)
				}
				if got[2*n] != 0xa5 || got[2*n+1] != 0xa5 || got[2*n+2] != 0xa5 {
					t.Fatalf("simd %v off %d n %d: wrote past the end", simd, off, n)
				}
			}
		}
	}
}
