package quant

import (
	"fmt"
	"math"
)

// e4m3 is every float8 e4m3fn code decoded to float32: sign, 4 exponent bits
// (bias 7), 3 mantissa bits, subnormals at exponent 0, no infinities, and
// 0x7F / 0xFF the only NaNs. Each value is exact in float32.
var e4m3 = func() (t [256]float32) {
	for c := range 256 {
		sign := float32(1)
		if c&0x80 != 0 {
			sign = -1
		}
		exp, man := (c>>3)&0xF, c&0x7
		switch {
		case exp == 0xF && man == 0x7:
			t[c] = float32(math.NaN())
		case exp == 0:
			t[c] = sign * float32(man) / 8 * float32(math.Ldexp(1, -6))
		default:
			t[c] = sign * (1 + float32(man)/8) * float32(math.Ldexp(1, exp-7))
		}
	}
	return t
}()

// F8E4M3ToF32 decodes one float8 e4m3fn code.
func F8E4M3ToF32(c byte) float32 { return e4m3[c] }

// DequantizeF8E4M3Blocks decodes rows of an FP8 weight [R, C] stored in
// blocks of b0 × b1 with one float32 scale each (scales [ceil(R/b0),
// ceil(C/b1)], the last block of a dimension partial): dst[i, j] =
// e4m3(src[i, j]) × scale[(row0+i)/b0, j/b1], one float32 multiply.
// src holds rows [row0, row0+rows) whole; scales holds the scale rows from
// row0/b0 on.
func DequantizeF8E4M3Blocks(src []byte, cols, rows, row0, b0, b1 int64, scales []float32, dst []float32) error {
	if b0 <= 0 || b1 <= 0 || cols <= 0 || rows < 0 || row0 < 0 {
		return fmt.Errorf("dequantize F8_E4M3: bad block %dx%d for %d columns", b0, b1, cols)
	}
	if int64(len(src)) != rows*cols || int64(len(dst)) != rows*cols {
		return fmt.Errorf("dequantize F8_E4M3: %d codes and %d outputs for %d rows of %d", len(src), len(dst), rows, cols)
	}
	scaleCols := (cols + b1 - 1) / b1
	first := row0 / b0
	for i := int64(0); i < rows; i++ {
		sr := (row0+i)/b0 - first
		if (sr+1)*scaleCols > int64(len(scales)) {
			return fmt.Errorf("dequantize F8_E4M3: row %d needs scale row %d of %d", row0+i, sr+first, int64(len(scales))/scaleCols+first)
		}
		srow := scales[sr*scaleCols : (sr+1)*scaleCols]
		in, out := src[i*cols:(i+1)*cols], dst[i*cols:(i+1)*cols]
		for j := range in {
			out[j] = e4m3[in[j]] * srow[int64(j)/b1]
		}
	}
	return nil
}
