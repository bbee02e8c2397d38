package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DequantizeGGML decodes ggml blocks of typ into dst (one slot per value),
// as ggml-quants.c's dequantize_row_* reference functions compute them, in
// float32 and in their order (no fused multiply-adds: every product is
// rounded by an explicit conversion). It is the decoder behind head-health
// checks of GGUF files: a block type this package quantizes, or F32, F16 or
// BF16, or MXFP4 (the blocks RepackMXFP4 fills).
func DequantizeGGML(typ string, src []byte, dst []float32) error {
	switch typ {
	case "F32", "F16", "BF16":
		return DecodeF32(typ, src, dst)
	}
	qk, bs, err := GGMLDecodeBlock(typ)
	if err != nil {
		return err
	}
	if len(dst)%qk != 0 || len(src) != len(dst)/qk*bs {
		return fmt.Errorf("%s: %d bytes do not hold %d values", typ, len(src), len(dst))
	}
	for i := 0; i < len(dst)/qk; i++ {
		x, y := src[i*bs:(i+1)*bs], dst[i*qk:(i+1)*qk]
		switch typ {
		case GGMLQ8_0:
			d := F16ToF32(binary.LittleEndian.Uint16(x))
			for j := range y {
				y[j] = float32(float32(int8(x[2+j])) * d)
			}
		case GGMLQ4_0:
			d := F16ToF32(binary.LittleEndian.Uint16(x))
			for j := 0; j < 16; j++ {
				y[j] = float32(float32(int(x[2+j]&0x0f)-8) * d)
				y[j+16] = float32(float32(int(x[2+j]>>4)-8) * d)
			}
		case GGMLQ5_0:
			d := F16ToF32(binary.LittleEndian.Uint16(x))
			qh := binary.LittleEndian.Uint32(x[2:])
			for j := 0; j < 16; j++ {
				h0, h1 := (qh>>j)<<4&0x10, qh>>(j+12)&0x10
				y[j] = float32(float32(int(uint32(x[6+j]&0x0f)|h0)-16) * d)
				y[j+16] = float32(float32(int(uint32(x[6+j]>>4)|h1)-16) * d)
			}
		case GGMLQ5_1:
			d := F16ToF32(binary.LittleEndian.Uint16(x))
			m := F16ToF32(binary.LittleEndian.Uint16(x[2:]))
			qh := binary.LittleEndian.Uint32(x[4:])
			for j := 0; j < 16; j++ {
				h0, h1 := (qh>>j)<<4&0x10, qh>>(j+12)&0x10
				y[j] = float32(float32(uint32(x[8+j]&0x0f)|h0)*d) + m
				y[j+16] = float32(float32(uint32(x[8+j]>>4)|h1)*d) + m
			}
		case GGMLQ4_K, GGMLQ5_K:
			dequantizeQK(typ == GGMLQ5_K, x, y)
		case GGMLQ6_K:
			dequantizeQ6K(x, y)
		case GGMLMXFP4:
			// dequantize_row_mxfp4: kvalues_mxfp4 are twice the E2M1
			// values, so the scale is half of 2^(e − 127).
			d := e8m0Half(x[0])
			for j := 0; j < 16; j++ {
				y[j] = float32(mxfp4KValues[x[1+j]&0x0f]) * d
				y[j+16] = float32(mxfp4KValues[x[1+j]>>4]) * d
			}
		}
	}
	return nil
}

// dequantizeQK is dequantize_row_q4_K (or q5_K) for one super-block:
// d, dmin (f16), scales[12], [qh[32]], qs[128]; each 32 values have a 6-bit
// scale and min.
func dequantizeQK(five bool, x []byte, y []float32) {
	d := F16ToF32(binary.LittleEndian.Uint16(x))
	dmin := F16ToF32(binary.LittleEndian.Uint16(x[2:]))
	sc := x[4:16]
	var qh, q []byte
	if five {
		qh, q = x[16:48], x[48:]
	} else {
		q = x[16:]
	}
	u1, u2 := uint8(1), uint8(2)
	for j, is := 0, 0; j < 256; j, is = j+64, is+2 {
		s1, m1 := getScaleMinK4(is, sc)
		s2, m2 := getScaleMinK4(is+1, sc)
		d1, dm1 := float32(d*float32(s1)), float32(dmin*float32(m1))
		d2, dm2 := float32(d*float32(s2)), float32(dmin*float32(m2))
		for l := 0; l < 32; l++ {
			lo, hi := q[l]&0x0f, q[l]>>4
			if five {
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
			}
			y[j+l] = float32(d1*float32(lo)) - dm1
			y[j+32+l] = float32(d2*float32(hi)) - dm2
		}
		q = q[32:]
		u1, u2 = u1<<2, u2<<2
	}
}

// dequantizeQ6K is dequantize_row_q6_K for one super-block: ql[128],
// qh[64], scales[16] (int8), d (f16); each 16 values have a scale.
func dequantizeQ6K(x []byte, y []float32) {
	d := F16ToF32(binary.LittleEndian.Uint16(x[208:]))
	ql, qh, sc := x[0:128], x[128:192], x[192:208]
	for n := 0; n < 256; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&0x0f|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0x0f|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			y[n+l] = float32(float32(d*float32(int8(sc[is]))) * float32(q1))
			y[n+l+32] = float32(float32(d*float32(int8(sc[is+2]))) * float32(q2))
			y[n+l+64] = float32(float32(d*float32(int8(sc[is+4]))) * float32(q3))
			y[n+l+96] = float32(float32(d*float32(int8(sc[is+6]))) * float32(q4))
		}
		ql, qh, sc = ql[64:], qh[32:], sc[8:]
	}
}

// GGMLDecodeBlock is the block (values, bytes) of a ggml type
// DequantizeGGML decodes: those GGMLBlock knows and MXFP4, which mtpconv
// moves from a release's FP4 codes (RepackMXFP4) and never quantizes.
func GGMLDecodeBlock(typ string) (values, bytes int, err error) {
	if typ == GGMLMXFP4 {
		return 32, MXFP4BlockBytes, nil
	}
	qk, bs, err := GGMLBlock(typ)
	if err != nil {
		return 0, 0, fmt.Errorf("ggml type %q is not one mtpconv decodes", typ)
	}
	return qk, bs, nil
}

// mxfp4KValues is ggml's kvalues_mxfp4 (ggml-common.h): twice the E2M1
// value of each code.
var mxfp4KValues = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is ggml_e8m0_to_fp32_half (ggml-impl.h): 2^(e − 128), the two
// smallest bytes as the subnormals 2^-128 and 2^-127, 0xFF not NaN.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}
