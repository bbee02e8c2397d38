// Package quant holds the numeric kernels: bf16/f16/f32 decoding and
// encoding (round to nearest even, f16 overflows counted) and the one-pass
// bf16 to f16 cast (float.go); MLX affine quantization, bit-identical to
// MLX's gpu or cpu kernel at 2 to 8 bits (mlx.go); NNCF int8/int4 weight
// compression, asymmetric or symmetric, per channel or grouped (nncf.go);
// nibble packing; and the quantization error statistics in a form that does
// not depend on the CPU. On amd64 with AVX2 and F16C the inner loops run as
// assembly (*_amd64.s); on arm64 the integer parts (casts, packing, group
// maxima) run as NEON assembly (*_arm64.s); the rest is portable Go. All
// paths give the same bits.
// It knows nothing of models or files.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// BF16ToF32 decodes a bfloat16 bit pattern exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds to the nearest bfloat16, ties to even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and non-zero
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// f16Table holds every half-precision value decoded (x448/float16 fills it once).
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// F16ToF32 decodes an IEEE half-precision bit pattern exactly.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// F32ToF16 rounds to the nearest half, ties to even, and reports whether a
// finite input overflowed to infinity. (Bit arithmetic; the tests check it
// against x448/float16.)
func F32ToF16(f float32) (h uint16, overflow bool) {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: keep it quiet
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff, false
	case abs == 0x7f800000:
		return sign | 0x7c00, false
	case abs >= 0x38800000: // at least 2^-14: a normal half, unless it rounds past the top
		r := abs - (112 << 23) // rebias the exponent from 127 to 15
		r += 0x0fff + (r>>13)&1
		if r >= 0x0f800000 { // 65520 and above round to infinity
			return sign | 0x7c00, true
		}
		return sign | uint16(r>>13), false
	default: // a subnormal half (or zero): scale by 2^24 exactly and round to even
		v := math.Float32frombits(abs) * (1 << 24)
		return sign | uint16(math.RoundToEven(float64(v))), false
	}
}

// DecodeF32 decodes little-endian src of the named dtype (BF16, F16, F32,
// or F8_E4M3 codes) into dst, which must have one slot per element.
func DecodeF32(dtype string, src []byte, dst []float32) error {
	switch dtype {
	case "BF16":
		if len(src) != 2*len(dst) {
			return fmt.Errorf("decode BF16: %d bytes for %d elements", len(src), len(dst))
		}
		for i := decodeBF16Vec(dst, src); i < len(dst); i++ {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "F16":
		if len(src) != 2*len(dst) {
			return fmt.Errorf("decode F16: %d bytes for %d elements", len(src), len(dst))
		}
		for i := decodeF16Vec(dst, src); i < len(dst); i++ {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "F32":
		if len(src) != 4*len(dst) {
			return fmt.Errorf("decode F32: %d bytes for %d elements", len(src), len(dst))
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "F8_E4M3":
		// The codes' own values (an FP8 weight copied as stored, compared as
		// such), not dequantized: rows.Reader applies the block scales.
		if len(src) != len(dst) {
			return fmt.Errorf("decode F8_E4M3: %d bytes for %d elements", len(src), len(dst))
		}
		for i, c := range src {
			dst[i] = F8E4M3ToF32(c)
		}
	case "F8_E8M0":
		// Microscaling block scales: 2^(e − 127), 0xFF NaN (OCP MX).
		if len(src) != len(dst) {
			return fmt.Errorf("decode F8_E8M0: %d bytes for %d elements", len(src), len(dst))
		}
		for i, e := range src {
			dst[i] = E8M0ToF32(e)
		}
	default:
		return fmt.Errorf("decode: dtype %s is not a float type this tool reads", dtype)
	}
	return nil
}

// EncodeF32 encodes src as little-endian dtype (BF16, F16 or F32) into dst
// and returns how many finite values overflowed (only F16 can overflow).
func EncodeF32(dtype string, src []float32, dst []byte) (overflows int, err error) {
	switch dtype {
	case "BF16":
		if len(dst) != 2*len(src) {
			return 0, fmt.Errorf("encode BF16: %d bytes for %d elements", len(dst), len(src))
		}
		for i := encodeBF16Vec(dst, src); i < len(src); i++ {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(src[i]))
		}
	case "F16":
		if len(dst) != 2*len(src) {
			return 0, fmt.Errorf("encode F16: %d bytes for %d elements", len(dst), len(src))
		}
		done, vecOverflows := encodeF16Vec(dst, src)
		overflows = vecOverflows
		for i := done; i < len(src); i++ {
			h, of := F32ToF16(src[i])
			if of {
				overflows++
			}
			binary.LittleEndian.PutUint16(dst[2*i:], h)
		}
	case "F32":
		if len(dst) != 4*len(src) {
			return 0, fmt.Errorf("encode F32: %d bytes for %d elements", len(dst), len(src))
		}
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	default:
		return 0, fmt.Errorf("encode: dtype %s is not a float type this tool writes", dtype)
	}
	return overflows, nil
}

// CastBF16ToF16 converts little-endian bf16 src to f16 dst in one pass, the
// same bits as DecodeF32 then EncodeF32 without the float32 buffer, and
// returns how many finite values overflowed to infinity.
func CastBF16ToF16(src, dst []byte) (overflows int, err error) {
	if len(src) != len(dst) || len(src)%2 != 0 {
		return 0, fmt.Errorf("cast BF16 to F16: %d bytes in, %d out", len(src), len(dst))
	}
	done, overflows := castBF16F16Vec(dst, src)
	for i := done; i < len(src)/2; i++ {
		h, of := F32ToF16(BF16ToF32(binary.LittleEndian.Uint16(src[2*i:])))
		if of {
			overflows++
		}
		binary.LittleEndian.PutUint16(dst[2*i:], h)
	}
	return overflows, nil
}
