//go:build amd64

#include "textflag.h"

// AVX2 + F16C kernels for the float casts in float.go. Each processes n
// elements, n a multiple of 8 (16 for encodeBF16AVX2); the Go caller does the
// tail. All loads and stores are unaligned.

// The f16 encoders count overflows: finite inputs with |x| >= 65520 (bits
// 0x477ff000), which VCVTPS2PH rounds to infinity. OVERFLOW_SETUP loads the
// constants (Y13-Y15) and zeroes the per-lane counters Y11 and Y12, which
// OVERFLOW_COUNT decrements (a compare gives -1 per hit) for the f32 values in
// a register; OVERFLOW_SUM widens the lanes to 64 bits, so no total can wrap,
// leaving the total in AX.
#define OVERFLOW_SETUP \
	MOVL         $0x7fffffff, AX; \
	MOVQ         AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL         $0x477fefff, AX; \
	MOVQ         AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL         $0x7f800000, AX; \
	MOVQ         AX, X13; \
	VPBROADCASTD X13, Y13; \
	VPXOR        Y12, Y12, Y12; \
	VPXOR        Y11, Y11, Y11

#define OVERFLOW_COUNT(v, tmp, acc) \
	VPAND    Y15, v, v; \
	VPCMPGTD Y14, v, tmp; \
	VPCMPGTD v, Y13, v; \
	VPAND    tmp, v, v; \
	VPADDD   v, acc, acc

#define OVERFLOW_SUM \
	VPXOR        Y10, Y10, Y10; \
	VPSUBD       Y12, Y10, Y12; \
	VPSUBD       Y11, Y10, Y11; \
	VPMOVZXDQ    X12, Y0; \
	VEXTRACTI128 $1, Y12, X1; \
	VPMOVZXDQ    X1, Y1; \
	VPMOVZXDQ    X11, Y2; \
	VEXTRACTI128 $1, Y11, X3; \
	VPMOVZXDQ    X3, Y3; \
	VPADDQ       Y1, Y0, Y0; \
	VPADDQ       Y3, Y2, Y2; \
	VPADDQ       Y2, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPADDQ       X1, X0, X0; \
	VPSHUFD      $0x4e, X0, X1; \
	VPADDQ       X1, X0, X0; \
	MOVQ         X0, AX

// func decodeBF16AVX2(dst *float32, src *byte, n int)
TEXT ·decodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $32
	JB   bf16dec8

bf16dec32:
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VPSLLD    $16, Y2, Y2
	VPSLLD    $16, Y3, Y3
	VMOVDQU   Y0, 0(DI)
	VMOVDQU   Y1, 32(DI)
	VMOVDQU   Y2, 64(DI)
	VMOVDQU   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       bf16dec32

bf16dec8:
	CMPQ CX, $8
	JB   bf16decdone

bf16dec8loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	CMPQ      CX, $8
	JAE       bf16dec8loop

bf16decdone:
	VZEROUPPER
	RET

// func decodeF16AVX2(dst *float32, src *byte, n int)
// VCVTPH2PS is exact for every half, and quiets NaNs the way x448/float16
// does (sign | 0x7fc00000 | payload<<13).
TEXT ·decodeF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $32
	JB   f16dec8

f16dec32:
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       f16dec32

f16dec8:
	CMPQ CX, $8
	JB   f16decdone

f16dec8loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	CMPQ      CX, $8
	JAE       f16dec8loop

f16decdone:
	VZEROUPPER
	RET

// func encodeF16AVX2(dst *byte, src *float32, n int) (overflows int)
// VCVTPS2PH with imm8 0 rounds to nearest even regardless of MXCSR.
TEXT ·encodeF16AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	OVERFLOW_SETUP

	CMPQ CX, $32
	JB   f16enc8

f16enc32:
	VMOVUPS   0(SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, 0(DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	OVERFLOW_COUNT(Y0, Y4, Y12)
	OVERFLOW_COUNT(Y1, Y5, Y11)
	OVERFLOW_COUNT(Y2, Y6, Y12)
	OVERFLOW_COUNT(Y3, Y7, Y11)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       f16enc32

f16enc8:
	CMPQ CX, $8
	JB   f16encdone

f16enc8loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	OVERFLOW_COUNT(Y0, Y4, Y12)
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	CMPQ      CX, $8
	JAE       f16enc8loop

f16encdone:
	OVERFLOW_SUM
	MOVQ AX, overflows+24(FP)
	VZEROUPPER
	RET

// func encodeBF16AVX2(dst *byte, src *float32, n int)
// Per element: NaN -> u>>16 | 0x40, else (u + 0x7fff + (u>>16)&1) >> 16.
// Blocks without a NaN (all real weights) skip the blend.
TEXT ·encodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $0x7fff, AX
	MOVQ         AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $1, AX
	MOVQ         AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $0x40, AX
	MOVQ         AX, X11
	VPBROADCASTD X11, Y11

	CMPQ CX, $16
	JB   bf16encdone

bf16enc16:
	VMOVDQU   0(SI), Y0
	VMOVDQU   32(SI), Y1
	VPSRLD    $16, Y0, Y2       // u>>16
	VPSRLD    $16, Y1, Y3
	VCMPPS    $3, Y0, Y0, Y6    // NaN mask (unordered with itself)
	VCMPPS    $3, Y1, Y1, Y7
	VPAND     Y12, Y2, Y4       // (u>>16)&1
	VPAND     Y12, Y3, Y5
	VPADDD    Y13, Y4, Y4       // + 0x7fff
	VPADDD    Y13, Y5, Y5
	VPADDD    Y0, Y4, Y4        // + u
	VPADDD    Y1, Y5, Y5
	VPSRLD    $16, Y4, Y4       // rounded
	VPSRLD    $16, Y5, Y5
	VPOR      Y7, Y6, Y8
	VPTEST    Y8, Y8
	JNZ       bf16encnan

bf16encpack:
	VPACKUSDW Y5, Y4, Y4        // lanes: a.lo b.lo a.hi b.hi
	VPERMQ    $0xd8, Y4, Y4     // a.lo a.hi b.lo b.hi
	VMOVDQU   Y4, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       bf16enc16

bf16encdone:
	VZEROUPPER
	RET

bf16encnan:
	VPOR      Y11, Y2, Y2       // NaN result
	VPOR      Y11, Y3, Y3
	VPBLENDVB Y6, Y2, Y4, Y4
	VPBLENDVB Y7, Y3, Y5, Y5
	JMP       bf16encpack

// func castBF16F16AVX2(dst *byte, src *byte, n int) (overflows int)
// bf16 -> f32 (exact: a shift) -> f16 with VCVTPS2PH, round to nearest
// even, counting overflows as encodeF16AVX2 does.
TEXT ·castBF16F16AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	OVERFLOW_SETUP

	CMPQ CX, $16
	JB   castdone

cast16:
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VCVTPS2PH $0, Y0, 0(DI)
	VCVTPS2PH $0, Y1, 16(DI)
	OVERFLOW_COUNT(Y0, Y4, Y12)
	OVERFLOW_COUNT(Y1, Y5, Y11)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       cast16

castdone:
	OVERFLOW_SUM
	MOVQ AX, overflows+24(FP)
	VZEROUPPER
	RET
