package quant

import (
	"fmt"
	"math"
	"slices"
)

// MLXFPMode is one of MLX's microscaling quantization modes: E2M1 (fp4) or
// E4M3 (fp8) codes sharing one 8-bit scale per group, no bias.
type MLXFPMode int

const (
	// MXFP4 is OCP MX fp4: E2M1 codes, groups of 32, E8M0 (power of two) scales.
	MXFP4 MLXFPMode = iota
	// MXFP8 is OCP MX fp8: E4M3 codes, groups of 32, E8M0 scales.
	MXFP8
	// NVFP4 is NVIDIA's fp4: E2M1 codes, groups of 16, E4M3 scales (MLX
	// without a global scale, as mlx_lm.convert quantizes).
	NVFP4
)

func (m MLXFPMode) String() string {
	return [...]string{"mxfp4", "mxfp8", "nvfp4"}[m]
}

// Bits is the width of one code.
func (m MLXFPMode) Bits() int {
	if m == MXFP8 {
		return 8
	}
	return 4
}

// GroupSize is the one group size MLX allows for the mode.
func (m MLXFPMode) GroupSize() int {
	if m == NVFP4 {
		return 16
	}
	return 32
}

// MLXFPParams are a microscaling mode and the MLX kernel to reproduce.
type MLXFPParams struct {
	Mode     MLXFPMode
	Rounding MLXRounding
}

// Validate checks that rows of cols values can be quantized.
func (p MLXFPParams) Validate(cols int) error {
	if p.Mode < MXFP4 || p.Mode > NVFP4 {
		return fmt.Errorf("MLX microscaling mode %d", p.Mode)
	}
	if cols%p.Mode.GroupSize() != 0 {
		return fmt.Errorf("row length %d is not a multiple of %s's group size %d", cols, p.Mode, p.Mode.GroupSize())
	}
	return nil
}

// RowBytes is the number of packed code bytes of one row (stored as U32 words).
func (p MLXFPParams) RowBytes(cols int) int { return cols * p.Mode.Bits() / 8 }

// fp4Values are the E2M1 values of the 16 codes (bit 3 the sign).
var fp4Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// F32ToE4M3 rounds to E4M3 (fn) as MLX does on both its CPU and Metal
// backends (the PyTorch conversion): to nearest even, saturating at ±448
// (NaN too), subnormals through a float add.
func F32ToE4M3(f float32) uint8 {
	b := math.Float32bits(f)
	sign := b & 0x80000000
	b ^= sign
	var r uint8
	switch {
	case b >= 543<<21:
		r = 0x7E
	case b < 121<<23:
		r = uint8(math.Float32bits(math.Float32frombits(b)+math.Float32frombits(141<<23)) - 141<<23)
	default:
		odd := (b >> 20) & 1
		b += 0xC4000000 + 0x7FFFF // (7-127)<<23 mod 2^32, then the rounding bias
		b += odd
		r = uint8(b >> 20)
	}
	return r | uint8(sign>>24)
}

// b2u is 1 for true: comparisons summed without branches (random weights
// make a switch mispredict on every element).
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// fp4CPU is MLX's CPU choice of E2M1 code: the nearest value, ties to the
// first in code order (the smaller magnitude, and +0 for any value that
// rounds to zero), as argmin over |x - value| picks it.
func fp4CPU(x float32) uint8 {
	a := abs32f(x)
	m := b2u(a > 0.25) + b2u(a > 0.75) + b2u(a > 1.25) + b2u(a > 1.75) + b2u(a > 2.5) + b2u(a > 3.5) + b2u(a > 5)
	return m | b2u(x < 0 && m != 0)<<3
}

// fp4Metal is the Metal kernel's E2M1 rounding (fp4_e2m1): thresholds that
// round halves to the even code, the sign bit copied (so -0 and small
// negatives give 0x8), NaN to 0x7.
func fp4Metal(x float32) uint8 {
	if x != x {
		return 0x7
	}
	a := abs32f(x)
	m := b2u(a > 0.25) + b2u(a >= 0.75) + b2u(a > 1.25) + b2u(a >= 1.75) + b2u(a > 2.5) + b2u(a >= 3.5) + b2u(a > 5)
	return m | uint8(math.Float32bits(x)>>31)<<3
}

// pow2Ceil is the smallest e with 2^e >= x (x > 0, finite), clamped to
// E8M0's exponent range [-127, 127].
func pow2Ceil(x float32) int {
	frac, exp := math.Frexp(float64(x))
	e := exp
	if frac == 0.5 {
		e = exp - 1
	}
	return min(max(e, -127), 127)
}

// e8m0Value is the value of an E8M0 exponent e in [-127, 127] (MLX decodes
// code 0 as 2^-127).
func e8m0Value(e int) float32 { return float32(math.Ldexp(1, e)) }

// QuantizeMLXFP quantizes rows of cols float32 values (already rounded to
// dtype, the weight's float type) exactly as MLX 0.32's mx.quantize does in
// the mode: for each row it appends RowBytes packed code bytes (element j in
// bits [j*b, j*b+b) of the little-endian stream) to packed and one scale
// code per group to scales. stats, when not nil, accumulates the error of
// the stored form.
//
// CPU (MLX's CPU fallback, array ops in dtype): scale = amax/maxval rounded
// to dtype; mx: the smallest power of two at or above it (0 for an all-zero
// group), elements divided by it and rounded to dtype; nv: the scale to
// E4M3, elements divided by its value and rounded to dtype; codes: E4M3
// (fp8), or the nearest E2M1 value, ties to the smaller (fp4).
//
// GPU (the Metal fp_quantize kernel, float32): scale = amax/maxval in float32;
// mx: rounded up to a power of two (mx_scale_round_up; an all-zero group
// gives code 0, 2^-127); nv: to E4M3; elements multiplied by 1/scale and
// rounded by fp4_e2m1 (halves to even) or to E4M3.
func QuantizeMLXFP(w []float32, cols int, p MLXFPParams, dtype string, packed, scales []byte, stats *ErrStats) ([]byte, []byte) {
	bits, g := p.Mode.Bits(), p.Mode.GroupSize()
	maxv := float32(6)
	if p.Mode == MXFP8 {
		maxv = 448
	}
	cpu := p.Rounding == MLXCPU
	rowBytes := p.RowBytes(cols)
	rows := len(w) / max(cols, 1)
	packed = slices.Grow(packed, rows*rowBytes)
	scales = slices.Grow(scales, rows*cols/g)
	codes := make([]uint8, g)
	flags := fpFlags(p, cpu, dtype)
	for r := 0; r+cols <= len(w); r += cols {
		row := w[r : r+cols]
		start := len(packed)
		packed = append(packed, make([]byte, rowBytes)...)
		out := packed[start:]
		for g0 := 0; g0 < cols; g0 += g {
			grp := row[g0 : g0+g]
			amax, ok := absMaxVec(grp)
			if !ok {
				amax = 0
				for _, v := range grp {
					amax = max(amax, abs32f(v))
				}
			}
			x := amax / maxv
			if cpu {
				x = roundTo(dtype, x)
			}
			var sc uint8
			var sv float32 // the scale's value
			if p.Mode == NVFP4 {
				sc = F32ToE4M3(x)
				sv = e4m3[sc]
			} else {
				e := -127
				switch {
				case x > 0:
					e = pow2Ceil(x)
				case cpu:
					e = 0 // MLX's CPU: log2 of a zero scale is taken as 0
				}
				sc, sv = uint8(e+127), e8m0Value(e)
			}
			scales = append(scales, sc)
			inv := float32(0)
			if sv != 0 {
				inv = 1 / sv
			}
			if useAVX2 && !(cpu && sv == 0) {
				a := fpArgs{sv: sv, inv: inv, flags: flags}
				var e groupErr
				mlxfpKernelAVX2(&grp[0], g, &out[g0*bits/8], &a, &e, &e4m3[0])
				if stats != nil {
					e.merge(stats, g)
				}
				continue
			}
			for i, v := range grp {
				var c uint8
				switch {
				case cpu && sv == 0:
					c = 0 // x/0 is ±Inf or NaN: every |x - value| ties, argmin takes code 0
				case cpu:
					y := roundTo(dtype, v/sv)
					if bits == 8 {
						c = F32ToE4M3(y)
					} else {
						c = fp4CPU(y)
					}
				default:
					y := v * inv
					if bits == 8 {
						c = F32ToE4M3(y)
					} else {
						c = fp4Metal(y)
					}
				}
				codes[i] = c
			}
			if bits == 8 {
				copy(out[g0:], codes)
			} else {
				packNibbles(codes, out[g0/2:])
			}
			if stats != nil {
				var e groupErr
				for i, v := range grp {
					e.add(i, abs32f(v-sv*fpValue(codes[i], bits)))
				}
				e.merge(stats, g)
			}
		}
	}
	return packed, scales
}

// fpValue is the value of a code of the given width.
func fpValue(c uint8, bits int) float32 {
	if bits == 8 {
		return e4m3[c]
	}
	return fp4Values[c&15]
}

// DequantizeMLXFP reverses QuantizeMLXFP for one row: scale value × code value.
func DequantizeMLXFP(packedRow []byte, cols int, p MLXFPParams, scales []byte, out []float32) {
	bits, g := p.Mode.Bits(), p.Mode.GroupSize()
	for j := 0; j < cols; j++ {
		var c uint8
		if bits == 8 {
			c = packedRow[j]
		} else {
			c = packedRow[j/2] >> (4 * (j & 1)) & 15
		}
		sc := scales[j/g]
		var sv float32
		if p.Mode == NVFP4 {
			sv = e4m3[sc]
		} else {
			sv = e8m0Value(int(sc) - 127)
		}
		out[j] = sv * fpValue(c, bits)
	}
}

// fpArgs are one group's constants for mlxfpKernelAVX2.
type fpArgs struct {
	sv, inv float32 // the scale's value and, for gpu rounding, its inverse (0 for a zero scale)
	flags   int32   // fpCPU, fp8, fpBF16, fpF16
	_       int32
}

// The kernel's flags: cpu rounding (else gpu), E4M3 codes (else E2M1), and
// for cpu rounding the dtype the quotients are rounded to (else F32).
const (
	fpCPU  = 1
	fp8    = 2
	fpBF16 = 4
	fpF16  = 8
)

func fpFlags(p MLXFPParams, cpu bool, dtype string) int32 {
	var f int32
	if cpu {
		f |= fpCPU
		switch dtype {
		case "BF16":
			f |= fpBF16
		case "F16":
			f |= fpF16
		}
	}
	if p.Mode.Bits() == 8 {
		f |= fp8
	}
	return f
}
