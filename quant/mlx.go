package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// MLXRounding picks which MLX kernel to reproduce bit for bit.
type MLXRounding int

const (
	// MLXGPU is the Metal/CUDA kernel, what mlx_lm.convert produces on Apple
	// silicon: the group maximum starts at 0 and halves round away from zero.
	MLXGPU MLXRounding = iota
	// MLXCPU is MLX's CPU kernel: the true group maximum, halves to even.
	MLXCPU
)

func (r MLXRounding) String() string {
	if r == MLXCPU {
		return "cpu"
	}
	return "gpu"
}

// ParseMLXRounding reads "gpu" or "cpu".
func ParseMLXRounding(s string) (MLXRounding, error) {
	switch s {
	case "gpu", "":
		return MLXGPU, nil
	case "cpu":
		return MLXCPU, nil
	}
	return 0, fmt.Errorf("MLX rounding %q is not gpu or cpu", s)
}

// MLXAffineParams are the bits and group size of MLX affine quantization.
type MLXAffineParams struct {
	Bits      int
	GroupSize int
	Rounding  MLXRounding
}

// Validate checks the combination against what MLX accepts for a row of cols values.
func (p MLXAffineParams) Validate(cols int) error {
	switch p.Bits {
	case 1:
		if p.Rounding != MLXCPU {
			return fmt.Errorf("MLX affine 1-bit: only MLX's CPU kernel is reproduced (its Metal kernel's is not known here)")
		}
	case 2, 3, 4, 5, 6, 8:
	default:
		return fmt.Errorf("MLX affine bits %d: must be 1, 2, 3, 4, 5, 6 or 8", p.Bits)
	}
	switch p.GroupSize {
	case 32, 64, 128:
	default:
		return fmt.Errorf("MLX group size %d: must be 32, 64 or 128", p.GroupSize)
	}
	if cols%p.GroupSize != 0 {
		return fmt.Errorf("row length %d is not a multiple of the group size %d", cols, p.GroupSize)
	}
	return nil
}

// PackedWords is the number of uint32 words of one packed row.
func (p MLXAffineParams) PackedWords(cols int) int { return cols * p.Bits / 32 }

const mlxEps = float32(1e-7)

// QuantizeMLXAffine quantizes rows of cols float32 values exactly as MLX's
// affine kernel does. For each row it appends cols*bits/32 little-endian
// packed words to packed (as bytes) and one scale and one bias per group to
// scales and biases, as float32 values to be rounded to the weight's dtype
// by the caller. Arithmetic is float32 throughout, as in MLX.
func QuantizeMLXAffine(w []float32, cols int, p MLXAffineParams, packed []byte, scales, biases []float32) ([]byte, []float32, []float32) {
	return quantizeMLX(w, cols, p, packed, scales, biases, "", nil)
}

// QuantizeMLXAffineStats is QuantizeMLXAffine that also accumulates the error
// of the stored form: codes dequantized with the scale and bias rounded to
// dtype (the weight's BF16, F16 or F32), float32(sr*q) + br, summed as
// groupErr describes so that the result does not depend on the kernels used.
func QuantizeMLXAffineStats(w []float32, cols int, p MLXAffineParams, packed []byte, scales, biases []float32, dtype string, stats *ErrStats) ([]byte, []float32, []float32) {
	return quantizeMLX(w, cols, p, packed, scales, biases, dtype, stats)
}

func quantizeMLX(w []float32, cols int, p MLXAffineParams, packed []byte, scales, biases []float32, dtype string, stats *ErrStats) ([]byte, []float32, []float32) {
	nBins := float32(int(1)<<p.Bits - 1)
	gpu := p.Rounding == MLXGPU
	mode := 0
	if gpu {
		mode = kernGPU
	}
	codes := make([]uint8, p.GroupSize)
	rowBytes := cols * p.Bits / 8
	rows := len(w) / max(cols, 1)
	packed = slices.Grow(packed, rows*rowBytes)
	scales = slices.Grow(scales, rows*cols/p.GroupSize)
	biases = slices.Grow(biases, rows*cols/p.GroupSize)
	var e groupErr
	ep := &e
	if stats == nil {
		ep = nil
	}
	for r := 0; r+cols <= len(w); r += cols {
		row := w[r : r+cols]
		start := len(packed)
		packed = append(packed, make([]byte, rowBytes)...)
		out := packed[start:]
		// All the row's scales first: the groups' scalar divisions are
		// independent and overlap in this loop.
		first := len(scales)
		for g := 0; g < cols; g += p.GroupSize {
			s, b := mlxScaleBias(row[g:g+p.GroupSize], nBins, p.Rounding)
			scales = append(scales, s)
			biases = append(biases, b)
		}
		for j, g := first, 0; g < cols; j, g = j+1, g+p.GroupSize {
			grp := row[g : g+p.GroupSize]
			s, b := scales[j], biases[j]
			k := kernArgs{b: b, s: s, lo1: -1, hi1: nBins + 1, lo: 0, hi: nBins, dm: s, da: b, mask: 0xff}
			if stats != nil {
				// The error is that of the stored form: scale and bias in dtype.
				k.dm, k.da = roundTo(dtype, s), roundTo(dtype, b)
			}
			// The assembly quantizes the first i elements, writing packed
			// bytes for 4 and 8 bits (done = i), else one code a byte, and
			// sets e.
			i, done := 0, 0
			if !useAVX2 || len(grp) < 8 {
				e = groupErr{}
			} else {
				i = len(grp) &^ 7
				switch p.Bits {
				case 8:
					mlxKernelAVX2(&grp[0], i, &out[g], &k, &e, mode)
					done = i
				case 4:
					mlxKernelAVX2(&grp[0], i, &out[g/2], &k, &e, mode|kernNibbles)
					done = i
				default:
					mlxKernelAVX2(&grp[0], i, &codes[0], &k, &e, mode)
				}
			}
			mlxCodes(grp, i, &k, gpu, codes, ep)
			packCodes(out, g+done, codes[done:], p.Bits)
			if stats != nil {
				e.merge(stats, len(grp))
			}
		}
	}
	return packed, scales, biases
}

// mlxScaleBias computes one group's scale and bias. The codes are then
// clamp(round((v-b)/s), 0, nBins), rounding as the kernel does (mlxCode).
func mlxScaleBias(group []float32, nBins float32, rounding MLXRounding) (float32, float32) {
	if nBins == 1 {
		// 1 bit (MLX 0.32.4's CPU kernel, measured against mx.quantize):
		// the two codes are the group's minimum and maximum, no edge
		// rounded to a code. The minimum is taken in order, as
		// std::min does: of +0 and -0 the first one seen is the bias.
		wMin, wMax := float32(math.Inf(1)), float32(math.Inf(-1))
		for _, v := range group {
			if v < wMin {
				wMin = v
			}
			wMax = max(wMax, v)
		}
		return max(wMax-wMin, mlxEps), wMin
	}
	wMax := float32(math.Inf(-1))
	if rounding == MLXGPU {
		wMax = 0
	}
	wMin, wMax := minMax(group, float32(math.Inf(1)), wMax)
	s := max((wMax-wMin)/nBins, mlxEps)
	side := abs32(wMin) > abs32(wMax)
	if !side {
		s = -s
	}
	edge := wMax
	if side {
		edge = wMin
	}
	var q0 float32
	if rounding == MLXGPU {
		q0 = roundHalfAway(edge / s)
	} else {
		q0 = roundHalfEven(edge / s)
	}
	b := float32(0)
	if q0 != 0 {
		s = edge / q0
		b = edge
	}
	return s, b
}

// packCodes writes codes as a little-endian bit stream: element j of the row
// takes bits [j*bits, j*bits+bits). The row's bits from first*bits on must
// be zero (rows are packed group after group into zeroed bytes).
func packCodes(row []byte, first int, codes []uint8, bits int) {
	if bits < 8 && first*bits%8 == 0 {
		// Eight codes (a little-endian word of bytes) fill bits whole
		// bytes: join neighbouring bytes, then pairs, then quads, as
		// packNibbles8 does for 4 bits.
		b := uint64(bits)
		l1 := (uint64(1)<<b - 1) * 0x0001000100010001     // d = b bits in 16-bit lanes
		l2 := (uint64(1)<<(2*b) - 1) * 0x0000000100000001 // 2b bits in 32-bit lanes
		l3 := uint64(1)<<(4*b) - 1
		out := row[first*bits/8:]
		i := packCodesVec(out, codes, bits)
		out = out[i*bits/8:]
		for ; i+8 <= len(codes) && len(out) >= 8; i += 8 {
			x := binary.LittleEndian.Uint64(codes[i:])
			x = x&l1 | x>>(8-b)&(l1<<b)
			x = x&l2 | x>>(16-2*b)&(l2<<(2*b))
			x = x&l3 | x>>(32-4*b)&(l3<<(4*b))
			binary.LittleEndian.PutUint64(out, x) // its bytes past bits are zero, as the row is
			out = out[bits:]
		}
		first, codes = first+i, codes[i:]
	}
	packCodeBits(row, first, codes, bits)
}

// packCodeBits is packCodes one code at a time, for any first.
func packCodeBits(row []byte, first int, codes []uint8, bits int) {
	for i, c := range codes {
		bit := (first + i) * bits
		v := uint16(c) << (bit & 7)
		row[bit>>3] |= byte(v)
		if hi := byte(v >> 8); hi != 0 {
			row[bit>>3+1] |= hi
		}
	}
}

// DequantizeMLXAffine reverses QuantizeMLXAffine for one row: scale*q + bias.
func DequantizeMLXAffine(packedRow []byte, cols int, p MLXAffineParams, scales, biases []float32, out []float32) {
	mask := uint16(1)<<p.Bits - 1
	for j := 0; j < cols; j++ {
		bit := j * p.Bits
		v := uint16(packedRow[bit>>3])
		if bit>>3+1 < len(packedRow) {
			v |= uint16(packedRow[bit>>3+1]) << 8
		}
		q := float32((v >> (bit & 7)) & mask)
		g := j / p.GroupSize
		// The product is rounded before the sum, as MLX computes it: the
		// conversion keeps Go from fusing the two into one FMA on arm64.
		out[j] = float32(scales[g]*q) + biases[g]
	}
}

// DequantizeMLXAffineAs is mx.dequantize for one row of weights of dtype
// (BF16, F16 or F32): MLX computes in the weights' type, rounding the
// product scale*q to it and then the sum with the bias.
func DequantizeMLXAffineAs(packedRow []byte, cols int, p MLXAffineParams, scales, biases []float32, dtype string, out []float32) {
	DequantizeMLXAffine(packedRow, cols, p, scales, biases, out)
	if dtype == "F32" {
		return
	}
	mask := uint16(1)<<p.Bits - 1
	for j := 0; j < cols; j++ {
		bit := j * p.Bits
		v := uint16(packedRow[bit>>3])
		if bit>>3+1 < len(packedRow) {
			v |= uint16(packedRow[bit>>3+1]) << 8
		}
		q := float32((v >> (bit & 7)) & mask)
		g := j / p.GroupSize
		out[j] = roundTo(dtype, roundTo(dtype, scales[g]*q)+biases[g])
	}
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

func roundHalfEven(x float32) float32 { return float32(math.RoundToEven(float64(x))) }

// rneMagic is 1.5*2^23: adding and subtracting it rounds a float32 of
// magnitude below 2^22 to an integer, ties to even (the FPU's mode).
const rneMagic = float32(12582912)

// roundEvenSmall rounds x, |x| < 2^22, half to even.
func roundEvenSmall(x float32) float32 { return float32(float32(x+rneMagic) - rneMagic) }

func roundHalfAway(x float32) float32 { return float32(math.Round(float64(x))) }

// roundTo rounds one value to a float dtype as stored.
func roundTo(dtype string, v float32) float32 {
	switch dtype {
	case "BF16":
		return BF16ToF32(F32ToBF16(v))
	case "F16":
		h, _ := F32ToF16(v)
		return F16ToF32(h)
	}
	return v
}
