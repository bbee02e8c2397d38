package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The word-at-a-time count agrees with decoding each value, for every 16-bit
// pattern and for float32 edge values, at every length (tails included).
func TestCountNonFinite(t *testing.T) {
	isBad := func(f float32) bool { return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) }
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		dtype string
		size  int
		gen   func(i int) []byte
	}{
		{"BF16", 2, func(i int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(i)) }},
		{"F16", 2, func(i int) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(i)) }},
		{"F32", 4, func(i int) []byte {
			specials := []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0, 0x80000000, 1}
			if i < len(specials) {
				return binary.LittleEndian.AppendUint32(nil, specials[i])
			}
			return binary.LittleEndian.AppendUint32(nil, r.Uint32())
		}},
	}
	for _, c := range cases {
		var all []byte
		n := 1 << 16
		for i := 0; i < n; i++ {
			all = append(all, c.gen(i)...)
		}
		// Shuffle elements so non-finite patterns land in every lane.
		for i := n - 1; i > 0; i-- {
			j := r.IntN(i + 1)
			a, b := all[i*c.size:(i+1)*c.size], all[j*c.size:(j+1)*c.size]
			for k := range a {
				a[k], b[k] = b[k], a[k]
			}
		}
		vals := make([]float32, n)
		if err := DecodeF32(c.dtype, all, vals); err != nil {
			t.Fatal(err)
		}
		for _, elems := range []int{0, 1, 2, 3, 4, 5, 7, 9, 1000, n} {
			want := 0
			for _, v := range vals[:elems] {
				if isBad(v) {
					want++
				}
			}
			got, err := CountNonFinite(c.dtype, all[:elems*c.size])
			if err != nil || got != want {
				t.Errorf("%s, %d elements: %d non-finite (%v), want %d", c.dtype, elems, got, err, want)
			}
		}
	}
	if _, err := CountNonFinite("I8", []byte{1}); err == nil {
		t.Error("an integer dtype was counted")
	}
}

// F8_E8M0 (an FP8 or FP4 release's power-of-two scales, copied as stored)
// has one non-finite code, 0xff; every other byte is 2^(e − 127).
func TestCountNonFiniteE8M0(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if n, err := CountNonFinite("F8_E8M0", all); err != nil || n != 1 {
		t.Errorf("every E8M0 code: %d non-finite (%v), want 1", n, err)
	}
	if n, err := CountNonFinite("F8_E8M0", all[:255]); err != nil || n != 0 {
		t.Errorf("every finite E8M0 code: %d non-finite (%v), want 0", n, err)
	}
}
