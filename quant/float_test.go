package quant

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

func TestF16MatchesX448(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		want := float16.Frombits(uint16(i)).Float32()
		got := F16ToF32(uint16(i))
		if math.Float32bits(got) != math.Float32bits(want) && !(want != want && got != got) {
			t.Fatalf("F16ToF32(%#x) = %v, want %v", i, got, want)
		}
	}
	// Every float32 exponent and high mantissa, with the low bits that decide rounding.
	lows := []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x17ff}
	for hi := uint32(0); hi < 1<<19; hi++ {
		for _, lo := range lows {
			b := hi<<13 | lo
			for _, bits := range []uint32{b, b | 0x80000000} {
				f := math.Float32frombits(bits)
				want := float16.Fromfloat32(f)
				got, of := F32ToF16(f)
				if f != f {
					if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
						t.Fatalf("NaN %#x became %#x", bits, got)
					}
					continue
				}
				if got != want.Bits() {
					t.Fatalf("F32ToF16(%v = %#x) = %#x, want %#x", f, bits, got, want.Bits())
				}
				if wantOF := want.IsInf(0) && !math.IsInf(float64(f), 0); of != wantOF {
					t.Fatalf("F32ToF16(%v) overflow %v, want %v", f, of, wantOF)
				}
			}
		}
	}
}
