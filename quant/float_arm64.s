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

// func encodeF16NEON(dst *byte, src *byte, n int, fromBF16 bool) (overflows int)
// F32ToF16 on n values (a multiple of 4): float32 bits, or bf16 widened to
// them (the one-pass cast), with integer operations only. Per lane, from
// |x| (the sign is ORed in last):
//   - below 2^-14 (a subnormal half or zero): M = mantissa | 2^23 shifted
//     right by 126 - exponent, rounded to even. The shift is 13 plus
//     t = min(112 - exponent, 15), done in conditional steps of 8, 4, 2 and 1
//     that collect the lost bits into a sticky mask, then one more for the
//     rounding bit; a shift of 28 leaves 0, which is also every smaller
//     input's result (and zero's). Skipped when no lane needs it.
//   - 2^-14 up: rebias the exponent and round to nearest even, as F32ToF16;
//   - |x| >= 0x477ff000 (65520 and up, and Inf/NaN): infinity, counted as an
//     overflow when finite; NaN: quiet, the payload's top ten bits.
// The unsigned comparisons a >= K add 2^31 - K and test bit 31 (a < 2^31).
// SHIFT_STICKY(bit, low, k): where t (V4) has bit set, shift M (V1) right by
// k, ORing into the sticky mask (V6) whether the k bits shifted out (low)
// were non-zero. Uses V0, V7, V8.
#define SHIFT_STICKY(bit, low, k) \
	VCMTST bit.S4, V4.S4, V7.S4; \
	VCMTST low.S4, V1.S4, V8.S4; \
	VAND   V7.B16, V8.B16, V8.B16; \
	VORR   V8.B16, V6.B16, V6.B16; \
	VUSHR  $(k), V1.S4, V0.S4; \
	VBIT   V7.B16, V0.B16, V1.B16

TEXT ·encodeF16NEON(SB), NOSPLIT, $0-40
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	MOVBU fromBF16+24(FP), R3
	VEOR  V10.B16, V10.B16, V10.B16 // finite overflows, per lane
	VEOR  V11.B16, V11.B16, V11.B16 // zero
	CBZ   R2, f16done
	MOVW  $0x7fffffff, R4
	VDUP  R4, V12.S4
	MOVW  $0x8000, R4
	VDUP  R4, V13.S4
	MOVW  $0x38000000, R4
	VDUP  R4, V14.S4
	MOVW  $1, R4
	VDUP  R4, V15.S4
	MOVW  $0x0fff, R4
	VDUP  R4, V16.S4
	MOVW  $0x47800000, R4
	VDUP  R4, V17.S4                // + this: >= 0x38800000 (2^-14)
	MOVW  $0x80000000, R4
	VDUP  R4, V18.S4
	MOVW  $0x38801000, R4
	VDUP  R4, V19.S4                // >= 0x477ff000 (65520)
	MOVW  $0x00800000, R4
	VDUP  R4, V20.S4                // >= 0x7f800000 (Inf); also the implicit bit
	MOVW  $0x007fffff, R4
	VDUP  R4, V21.S4                // >= 0x7f800001 (NaN); also the mantissa mask
	MOVW  $0x7c00, R4
	VDUP  R4, V22.S4
	MOVW  $0x3ff, R4
	VDUP  R4, V23.S4
	MOVW  $0x7e00, R4
	VDUP  R4, V24.S4
	MOVW  $112, R4
	VDUP  R4, V25.S4
	MOVW  $15, R4
	VDUP  R4, V26.S4
	MOVW  $0x1fff, R4
	VDUP  R4, V27.S4
	MOVW  $8, R4
	VDUP  R4, V28.S4
	MOVW  $4, R4
	VDUP  R4, V29.S4
	MOVW  $2, R4
	VDUP  R4, V30.S4
	MOVW  $0xff, R4
	VDUP  R4, V31.S4
	MOVW  $3, R4
	VDUP  R4, V9.S4

f16loop:
	CBZ    R3, f16f32
	VLD1.P 8(R1), [V0.H4]
	VZIP1  V0.H8, V11.H8, V0.H8 // bf16 to float32 bits
	B      f16conv

f16f32:
	VLD1.P 16(R1), [V0.S4]

f16conv:
	VAND   V12.B16, V0.B16, V2.B16 // |x|
	VUSHR  $16, V0.S4, V3.S4
	VAND   V13.B16, V3.B16, V3.B16 // sign
	VADD   V17.S4, V2.S4, V5.S4
	VCMTST V18.S4, V5.S4, V5.S4    // normal halves (and up)
	VEOR   V1.B16, V1.B16, V1.B16
	VCMEQ  V11.S4, V2.S4, V6.S4
	VORR   V6.B16, V5.B16, V6.B16  // lanes that need no subnormal rounding
	VMOV   V6.D[0], R4
	VMOV   V6.D[1], R5
	AND    R5, R4, R4
	CMN    $1, R4
	BEQ    f16normal

	VUSHR  $23, V2.S4, V4.S4
	VSUB   V4.S4, V25.S4, V4.S4   // 112 - exponent
	VUMIN  V26.S4, V4.S4, V4.S4   // t
	VAND   V21.B16, V2.B16, V1.B16
	VORR   V20.B16, V1.B16, V1.B16 // M
	VCMTST V27.S4, V1.S4, V6.S4    // sticky: the 13 bits always shifted out
	VUSHR  $13, V1.S4, V1.S4
	SHIFT_STICKY(V28, V31, 8)
	SHIFT_STICKY(V29, V26, 4)
	SHIFT_STICKY(V30, V9, 2)
	SHIFT_STICKY(V15, V15, 1)
	VAND   V15.B16, V1.B16, V7.B16 // the rounding bit
	VUSHR  $1, V1.S4, V1.S4
	VAND   V15.B16, V1.B16, V8.B16 // odd
	VAND   V15.B16, V6.B16, V6.B16
	VORR   V8.B16, V6.B16, V6.B16
	VAND   V7.B16, V6.B16, V6.B16  // round up: above the half, or a tie to odd
	VADD   V6.S4, V1.S4, V1.S4

f16normal:
	VSUB   V14.S4, V2.S4, V4.S4    // rebiased
	VUSHR  $13, V4.S4, V6.S4
	VAND   V15.B16, V6.B16, V6.B16
	VADD   V16.S4, V4.S4, V4.S4
	VADD   V6.S4, V4.S4, V4.S4
	VUSHR  $13, V4.S4, V4.S4
	VBIT   V5.B16, V4.B16, V1.B16
	VADD   V19.S4, V2.S4, V5.S4
	VCMTST V18.S4, V5.S4, V5.S4    // 65520 and up
	VBIT   V5.B16, V22.B16, V1.B16
	VADD   V20.S4, V2.S4, V6.S4
	VCMTST V18.S4, V6.S4, V6.S4    // Inf or NaN
	VEOR   V6.B16, V5.B16, V5.B16  // finite overflows
	VSUB   V5.S4, V10.S4, V10.S4   // each counts one (the mask is -1)
	VADD   V21.S4, V2.S4, V6.S4
	VCMTST V18.S4, V6.S4, V6.S4    // NaN
	VUSHR  $13, V2.S4, V7.S4
	VAND   V23.B16, V7.B16, V7.B16
	VORR   V24.B16, V7.B16, V7.B16
	VBIT   V6.B16, V7.B16, V1.B16
	VORR   V3.B16, V1.B16, V1.B16
	VUZP1  V1.H8, V1.H8, V2.H8     // the low halves
	VST1.P [V2.H4], 8(R0)
	SUBS   $4, R2
	BNE    f16loop

f16done:
	VUADDLV V10.S4, V10
	VMOV    V10.D[0], R4
	MOVD    R4, overflows+32(FP)
	RET

// func decodeF16NEON(dst *float32, src *byte, n int)
// F16ToF32 on n values (a multiple of 4), integer operations only. Per lane,
// from |h| (the sign moves to bit 31): the bits shifted up by 13 with the
// exponent rebiased (+112) are every normal; Inf and NaN get 112 more, NaN
// the quiet bit (as x448/float16, whose table the Go code reads); zero stays
// zero; a subnormal is normalized first (shifted left until bit 10 is set,
// in conditional steps of 8, 4, 2 and 1, the exponent lowered by as much).
// The normalization is skipped when no lane is subnormal.
// NORMALIZE(high, k, dec): where v (V1) has no bit in high, shift it left by
// k and add dec (k << 23) to the exponent's decrease (V7). Uses V8, V9.
#define NORMALIZE(high, k, dec) \
	VCMTST high.S4, V1.S4, V8.S4; \
	VSHL   $(k), V1.S4, V9.S4; \
	VBIF   V8.B16, V9.B16, V1.B16; \
	VADD   dec.S4, V7.S4, V9.S4; \
	VBIF   V8.B16, V9.B16, V7.B16

TEXT ·decodeF16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ  R2, h16done
	VEOR V31.B16, V31.B16, V31.B16 // zero
	MOVW $0x7fff, R4
	VDUP R4, V16.S4
	MOVW $0x8000, R4
	VDUP R4, V17.S4
	MOVW $0x38000000, R4
	VDUP R4, V18.S4                // 112 << 23
	MOVW $0x7c00, R4
	VDUP R4, V19.S4
	MOVW $0x3ff, R4
	VDUP R4, V20.S4
	MOVW $0x00400000, R4
	VDUP R4, V21.S4
	MOVW $0xfffffff8, R4
	VDUP R4, V22.S4                // below 8: shift by 8
	MOVW $0xffffff80, R4
	VDUP R4, V23.S4                // below 128: by 4
	MOVW $0xfffffe00, R4
	VDUP R4, V24.S4                // below 512: by 2
	MOVW $0xfffffc00, R4
	VDUP R4, V25.S4                // below 1024: by 1
	MOVW $0x04000000, R4
	VDUP R4, V26.S4                // 8 << 23
	MOVW $0x02000000, R4
	VDUP R4, V27.S4
	MOVW $0x01000000, R4
	VDUP R4, V28.S4
	MOVW $0x00800000, R4
	VDUP R4, V29.S4

h16loop:
	VLD1.P 8(R1), [V0.H4]
	VUXTL  V0.H4, V0.S4
	VAND   V16.B16, V0.B16, V1.B16 // |h|
	VAND   V17.B16, V0.B16, V2.B16
	VSHL   $16, V2.S4, V2.S4       // sign
	VSHL   $13, V1.S4, V3.S4
	VADD   V18.S4, V3.S4, V3.S4    // a normal's bits
	VAND   V19.B16, V1.B16, V4.B16 // the exponent field
	VCMEQ  V19.S4, V4.S4, V5.S4    // Inf or NaN
	VAND   V18.B16, V5.B16, V6.B16
	VADD   V6.S4, V3.S4, V3.S4
	VCMTST V20.S4, V1.S4, V6.S4
	VAND   V5.B16, V6.B16, V6.B16  // NaN
	VAND   V21.B16, V6.B16, V6.B16
	VORR   V6.B16, V3.B16, V3.B16
	VCMEQ  V31.S4, V4.S4, V5.S4    // exponent 0
	VCMEQ  V31.S4, V1.S4, V6.S4    // zero
	VEOR   V6.B16, V5.B16, V5.B16  // subnormal
	VMOV   V5.D[0], R4
	VMOV   V5.D[1], R5
	ORR    R5, R4, R4
	CBZ    R4, h16sign

	VEOR   V7.B16, V7.B16, V7.B16  // the exponent's decrease, << 23
	NORMALIZE(V22, 8, V26)
	NORMALIZE(V23, 4, V27)
	NORMALIZE(V24, 2, V28)
	NORMALIZE(V25, 1, V29)
	VSHL   $13, V1.S4, V9.S4
	VADD   V18.S4, V9.S4, V9.S4
	VSUB   V7.S4, V9.S4, V9.S4     // bit 10 became the exponent's lowest
	VBIT   V5.B16, V9.B16, V3.B16

h16sign:
	VBIT   V6.B16, V31.B16, V3.B16 // zero
	VORR   V2.B16, V3.B16, V3.B16
	VST1.P [V3.S4], 16(R0)
	SUBS   $4, R2
	BNE    h16loop

h16done:
	RET
