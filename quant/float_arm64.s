//go:build arm64

#include "textflag.h"

// NEON kernels for the bf16 casts in float.go, integer operations only: Go's
// arm64 assembler has no vector floating-point arithmetic or conversions
// (FCVTL/FCVTN/FADD ...), and the only float vector ops it has are fused.
// Each processes n elements, n a multiple of 8; the Go caller does the tail.
// Go's operand order is ARM's reversed: VZIP1 Vm, Vn, Vd is zip1 vd, vn, vm.

// func decodeBF16NEON(dst *float32, src *byte, n int)
// A bf16 is the top half of its float32: interleave zero halves below it.
TEXT ·decodeBF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ  R2, decdone
	VEOR V31.B16, V31.B16, V31.B16

decloop:
	VLD1.P 16(R1), [V0.H8]
	VZIP1  V0.H8, V31.H8, V1.H8 // lanes 0-3: h<<16
	VZIP2  V0.H8, V31.H8, V2.H8 // lanes 4-7
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $8, R2
	BNE    decloop

decdone:
	RET

// func encodeBF16NEON(dst *byte, src *float32, n int)
// F32ToBF16 per 32-bit lane u: a NaN (|u| > 0x7f800000) keeps its top half
// with the quiet bit set, anything else is u + 0x7fff + (bit 16 of u) (round
// to nearest even, carries into the exponent included); the top halves of
// the lanes are the result.
TEXT ·encodeBF16NEON(SB), NOSPLIT, $0-24
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	CBZ   R2, encdone
	MOVW  $0x7fffffff, R3
	VDUP  R3, V20.S4              // |u| mask
	MOVW  $0x007fffff, R3
	VDUP  R3, V21.S4              // |u| + this has bit 31 set exactly when |u| > 0x7f800000
	MOVW  $0x00400000, R3
	VDUP  R3, V22.S4              // the bf16 quiet bit (0x40 of the top half)
	MOVW  $0x7fff, R3
	VDUP  R3, V23.S4              // rounding bias
	MOVW  $1, R3
	VDUP  R3, V24.S4
	VEOR  V25.B16, V25.B16, V25.B16

encloop:
	VLD1.P 32(R1), [V0.S4, V1.S4]

	VAND  V20.B16, V0.B16, V4.B16
	VADD  V21.S4, V4.S4, V4.S4
	VUSHR $31, V4.S4, V4.S4
	VSUB  V4.S4, V25.S4, V4.S4    // all ones in NaN lanes
	VORR  V22.B16, V0.B16, V5.B16 // NaN: quieted
	VUSHR $16, V0.S4, V6.S4
	VAND  V24.B16, V6.B16, V6.B16 // the bf16's lowest bit
	VADD  V23.S4, V0.S4, V2.S4
	VADD  V6.S4, V2.S4, V2.S4     // rounded
	VBIT  V4.B16, V5.B16, V2.B16  // NaN lanes take the quieted value

	VAND  V20.B16, V1.B16, V4.B16
	VADD  V21.S4, V4.S4, V4.S4
	VUSHR $31, V4.S4, V4.S4
	VSUB  V4.S4, V25.S4, V4.S4
	VORR  V22.B16, V1.B16, V5.B16
	VUSHR $16, V1.S4, V6.S4
	VAND  V24.B16, V6.B16, V6.B16
	VADD  V23.S4, V1.S4, V3.S4
	VADD  V6.S4, V3.S4, V3.S4
	VBIT  V4.B16, V5.B16, V3.B16

	VUZP2  V3.H8, V2.H8, V7.H8    // the top halves, lanes 0-7 in order
	VST1.P [V7.H8], 16(R0)
	SUBS   $8, R2
	BNE    encloop

encdone:
	RET
