package quant

import (
	"fmt"
	"math"
)

// FP4 as the DeepSeek-V4 releases store their routed experts (and OCP MX
// fp4): E2M1 codes two to a byte, value 2i in the low nibble, with one E8M0
// power-of-two scale per block of values. Decoding is exact in float32.

// E8M0ToF32 is the value of an E8M0 scale byte: 2^(e − 127), 0xFF NaN.
func E8M0ToF32(e uint8) float32 {
	if e == 0xFF {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(1, int(e)-127))
}

// DecodeE2M1 decodes rows of packed E2M1 codes (two values a byte), each
// block of values of a row scaled by its value in scales (already decoded),
// into dst: len(dst) values, len(dst)/block scales.
func DecodeE2M1(codes []byte, block int64, scales, dst []float32) error {
	n := int64(len(dst))
	if block <= 0 || block%2 != 0 || n%block != 0 || int64(len(codes))*2 != n || int64(len(scales))*block != n {
		return fmt.Errorf("decode E2M1: %d code bytes and %d scales do not make %d values in blocks of %d", len(codes), len(scales), n, block)
	}
	for i, b := range codes {
		s := scales[int64(2*i)/block]
		dst[2*i] = fp4Values[b&0xF] * s
		dst[2*i+1] = fp4Values[b>>4] * s
	}
	return nil
}

// MXFP4BlockBytes is the size of one ggml MXFP4 block of 32 values: the
// E8M0 scale byte, then 16 bytes of codes.
const MXFP4BlockBytes = 17

// GGMLMXFP4 is ggml's name of those blocks.
const GGMLMXFP4 = "MXFP4"

// RepackMXFP4 moves rows of packed E2M1 codes (two a byte, value 2i low)
// with one E8M0 scale byte per 32 values into ggml's MXFP4 blocks, byte for
// byte (no value changes: ggml's MXFP4 is e2m1 × 2^(e − 127) too, its
// kvalues doubled and its scale halved): per block the scale, then byte j
// holding value j in the low nibble and value j + 16 in the high one
// (convert_hf_to_gguf.py's repack_mxfp4_blocks). dst holds
// len(scales) × 17 bytes.
func RepackMXFP4(codes, scales, dst []byte) error {
	if len(codes) != 16*len(scales) || len(dst) != MXFP4BlockBytes*len(scales) {
		return fmt.Errorf("repack MXFP4: %d code bytes and %d scales do not make %d-byte blocks of 32 values in %d bytes", len(codes), len(scales), MXFP4BlockBytes, len(dst))
	}
	for b, e := range scales {
		in, out := codes[16*b:16*b+16], dst[MXFP4BlockBytes*b:MXFP4BlockBytes*b+MXFP4BlockBytes]
		out[0] = e
		for j := range 16 {
			// value v of the block is nibble v%2 of in[v/2].
			lo := in[j/2] >> (4 * (j % 2)) & 0xF
			hi := in[(j+16)/2] >> (4 * (j % 2)) & 0xF
			out[1+j] = lo | hi<<4
		}
	}
	return nil
}
