package quant

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Non-finite values (NaN, +Inf, -Inf) are those whose exponent bits are all
// ones. Adding one exponent unit to the masked exponent carries into the
// lane's top bit exactly then, and never into the next lane, so a 64-bit word
// counts four 16-bit (or two 32-bit) lanes at once.

// nonFiniteLanes describes one float dtype for the word-at-a-time count.
type nonFiniteLanes struct {
	size       int    // bytes per element
	mask, unit uint64 // exponent bits and one exponent unit, in every lane
	top        uint64 // the top bit of every lane
}

var nonFiniteDTypes = map[string]nonFiniteLanes{
	"BF16": {2, 0x7f807f807f807f80, 0x0080008000800080, 0x8000800080008000},
	"F16":  {2, 0x7c007c007c007c00, 0x0400040004000400, 0x8000800080008000},
	"F32":  {4, 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000},
}

// CountNonFinite counts the NaN and infinite values of little-endian src of
// a float dtype (BF16, F16, F32, F8_E4M3, whose only non-finite codes are
// its two NaNs, or F8_E8M0, whose only one is 0xff: the scales copied as
// an FP8 or FP4 release stores them).
func CountNonFinite(dtype string, src []byte) (int, error) {
	switch dtype {
	case "F8_E4M3":
		n := 0
		for _, b := range src {
			if b&0x7f == 0x7f {
				n++
			}
		}
		return n, nil
	case "F8_E8M0":
		n := 0
		for _, b := range src {
			if b == 0xff {
				n++
			}
		}
		return n, nil
	}
	l, ok := nonFiniteDTypes[dtype]
	if !ok {
		return 0, fmt.Errorf("count non-finite: dtype %s is not a float type this tool reads", dtype)
	}
	if len(src)%l.size != 0 {
		return 0, fmt.Errorf("count non-finite %s: %d bytes", dtype, len(src))
	}
	n := 0
	i := 0
	for ; i+32 <= len(src); i += 32 {
		b := src[i : i+32 : i+32]
		w0 := binary.LittleEndian.Uint64(b[0:])
		w1 := binary.LittleEndian.Uint64(b[8:])
		w2 := binary.LittleEndian.Uint64(b[16:])
		w3 := binary.LittleEndian.Uint64(b[24:])
		f := (w0&l.mask+l.unit)&l.top | (w1&l.mask+l.unit)&l.top>>1
		g := (w2&l.mask+l.unit)&l.top | (w3&l.mask+l.unit)&l.top>>1
		if f|g != 0 {
			n += bits.OnesCount64(f) + bits.OnesCount64(g)
		}
	}
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		n += bits.OnesCount64((w&l.mask + l.unit) & l.top)
	}
	if i < len(src) { // the last one to three elements, in a zero-padded word
		var tail [8]byte
		copy(tail[:], src[i:])
		w := binary.LittleEndian.Uint64(tail[:])
		n += bits.OnesCount64((w&l.mask + l.unit) & l.top)
	}
	return n, nil
}
