package quant

import (
	"fmt"
	"math"
	"slices"
)

// NNCFParams selects one of NNCF's integer weight compression modes:
// INT8_ASYM / INT8_SYM per output channel (GroupSize <= 0), INT4_ASYM /
// INT4_SYM group-wise.
type NNCFParams struct {
	Bits      int // 8 or 4
	Sym       bool
	GroupSize int // <= 0: per output channel (the whole row is one group)
}

// Name is NNCF's mode name.
func (p NNCFParams) Name() string {
	s := "ASYM"
	if p.Sym {
		s = "SYM"
	}
	return fmt.Sprintf("INT%d_%s", p.Bits, s)
}

// Group returns the group length for rows of cols values.
func (p NNCFParams) Group(cols int) int {
	if p.GroupSize <= 0 {
		return cols
	}
	return p.GroupSize
}

// Validate checks the mode against a row length.
func (p NNCFParams) Validate(cols int) error {
	if p.Bits != 8 && p.Bits != 4 {
		return fmt.Errorf("NNCF bits %d: must be 8 or 4", p.Bits)
	}
	if cols%p.Group(cols) != 0 {
		return fmt.Errorf("row length %d is not a multiple of the group size %d", cols, p.GroupSize)
	}
	return nil
}

// nncfEps is float32 machine epsilon, NNCF's floor for a scale's magnitude.
const nncfEps = float32(1.0 / (1 << 23))

// QuantizeNNCF compresses rows of cols float32 values as NNCF does, bit for
// bit: float32 arithmetic with every operation rounded to float32, real
// division, rounding half to even, q computed with the float32 scale. It
// appends the codes (one byte each for 8 bits, two per byte for 4 bits,
// element 0 in the low nibble), one float32 scale per group (the caller
// stores it as f16) and, for asymmetric modes, one zero point per group.
func QuantizeNNCF(w []float32, cols int, p NNCFParams, codes []uint8, scales []float32, zps []uint8) ([]uint8, []float32, []uint8) {
	return QuantizeNNCFStats(w, cols, p, codes, scales, zps, nil)
}

// QuantizeNNCFStats is QuantizeNNCF that also accumulates, when stats is not
// nil, the error of the stored form: codes dequantized with the f16 scale,
// float32((q - zp) * scale), summed as groupErr describes.
func QuantizeNNCFStats(w []float32, cols int, p NNCFParams, codes []uint8, scales []float32, zps []uint8, stats *ErrStats) ([]uint8, []float32, []uint8) {
	g := p.Group(cols)
	if g <= 0 {
		return codes, scales, zps
	}
	lo, hi := float32(0), float32(int(1)<<p.Bits-1)
	if p.Sym {
		lo, hi = -float32(int(1)<<(p.Bits-1)), float32(int(1)<<(p.Bits-1)-1)
	}
	mask := int32(1)<<p.Bits - 1
	codes = slices.Grow(codes, len(w)-len(w)%g)
	scales = slices.Grow(scales, len(w)/g)
	if !p.Sym {
		zps = slices.Grow(zps, len(w)/g)
	}
	var e groupErr
	for start := 0; start+g <= len(w); start += g {
		grp := w[start : start+g]
		var s, zp, mn float32
		if p.Sym {
			mn, mx := minMax(grp, grp[0], grp[0])
			a := abs32(mn)
			if a >= mx {
				s = a / -lo
			} else {
				s = -mx / -lo
			}
		} else {
			var mx float32
			mn, mx = minMax(grp, 0, 0) // the range always includes 0
			s = (mx - mn) / hi
		}
		if abs32(s) < nncfEps {
			s = nncfEps
		}
		if !p.Sym {
			zp = min(max(0-roundHalfEven(float32(mn/s)), 0), hi)
			zps = append(zps, uint8(zp))
		}
		scales = append(scales, s)
		n := len(codes)
		codes = append(codes, make([]uint8, len(grp))...)
		out := codes[n:]
		h, _ := F32ToF16(s)
		stored := F16ToF32(h)
		// q = clamp(roundHalfEven(clamp(v/s + zp, lo-1, hi+1)), lo, hi), the
		// code its low bits, and the error that of (q - zp) * stored.
		k := kernArgs{b: zp, s: s, lo1: lo - 1, hi1: hi + 1, lo: lo, hi: hi, dm: stored, da: zp, mask: mask}
		i := 0
		if !useAVX2 || len(grp) < 8 {
			e = groupErr{}
		} else { // the assembly sets e
			i = len(grp) &^ 7
			nncfKernelAVX2(&grp[0], i, &out[0], &k, &e)
		}
		nncfCodes(grp, i, &k, out, &e)
		if stats != nil {
			e.merge(stats, len(grp))
		}
	}
	return codes, scales, zps
}

// PackNibbles packs 4-bit codes two per byte, element 2k in the low nibble.
// An odd count leaves the last high nibble zero.
func PackNibbles(codes []uint8, out []byte) []byte {
	start := len(out)
	out = slices.Grow(out, (len(codes)+1)/2)[:start+(len(codes)+1)/2]
	packNibbles(codes, out[start:])
	return out
}

// packNibbles is PackNibbles into dst, which has (len(codes)+1)/2 bytes.
func packNibbles(codes []uint8, dst []byte) {
	n := packNibblesVec(codes, dst)
	n8 := len(codes) &^ 7
	packNibbles8(codes[n:n8], dst[n/2:])
	for i := n8; i < len(codes); i += 2 {
		b := codes[i] & 0xf
		if i+1 < len(codes) {
			b |= (codes[i+1] & 0xf) << 4
		}
		dst[i/2] = b
	}
}

// DequantizeNNCF reconstructs one code: (q - zp) * scale, or q * scale for
// symmetric modes (codes are the raw stored bits).
func DequantizeNNCF(code uint8, zp uint8, scale float32, p NNCFParams) float32 {
	if p.Sym {
		q := int(code)
		if p.Bits == 4 && q >= 8 {
			q -= 16
		} else if p.Bits == 8 && q >= 128 {
			q -= 256
		}
		return float32(q) * scale
	}
	return (float32(code) - float32(zp)) * scale
}

// ErrStats accumulates the quantization error of stored against input values.
type ErrStats struct {
	Max   float64
	SumSq float64
	N     int64
}

// RMS is the root mean square error.
func (s *ErrStats) RMS() float64 {
	if s.N == 0 {
		return 0
	}
	return math.Sqrt(s.SumSq / float64(s.N))
}

// clamp limits x to [lo, hi] with plain comparisons (the min and max
// builtins handle NaN and signed zeros, which costs in hot loops).
func clamp(x, lo, hi float32) float32 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

func (s *ErrStats) mergeGroup(emax float32, sq float64, n int) {
	s.Max = max(s.Max, float64(emax))
	s.SumSq += sq
	s.N += int64(n)
}

// abs32f is |x| without a float64 round trip.
func abs32f(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
