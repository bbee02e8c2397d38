// AVX2 kernels for the quantizers; see kernels.go for the Go versions they
// match bit for bit. Go's operand order is Intel's reversed: VMAXPS Y1, Y11,
// Y1 is vmaxps ymm1, ymm11, ymm1, which yields ymm11 > ymm1 ? ymm11 : ymm1
// (the second source when either is NaN), the semantics of the Go code's
// plain comparisons. Only unaligned loads and stores.

#include "textflag.h"
#include "go_asm.h"
#include "consts_amd64.h"

DATA half<>+0x00(SB)/8, $0x3f0000003f000000
DATA half<>+0x08(SB)/8, $0x3f0000003f000000
DATA half<>+0x10(SB)/8, $0x3f0000003f000000
DATA half<>+0x18(SB)/8, $0x3f0000003f000000
GLOBL half<>(SB), RODATA|NOPTR, $32

DATA one<>+0x00(SB)/8, $0x3f8000003f800000
DATA one<>+0x08(SB)/8, $0x3f8000003f800000
DATA one<>+0x10(SB)/8, $0x3f8000003f800000
DATA one<>+0x18(SB)/8, $0x3f8000003f800000
GLOBL one<>(SB), RODATA|NOPTR, $32

// Byte multipliers for VPMADDUBSW: word k = b[2k] + 16*b[2k+1].
DATA nib<>+0x00(SB)/8, $0x1001100110011001
DATA nib<>+0x08(SB)/8, $0x1001100110011001
GLOBL nib<>(SB), RODATA|NOPTR, $16

// func minMaxAVX2(x *float32, n int, mn, mx float32) (rmn, rmx float32)
TEXT ·minMaxAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mn+16(FP), Y0
	VBROADCASTSS mx+20(FP), Y1
	VMOVUPS      Y0, Y2
	VMOVUPS      Y1, Y3
	CMPQ         CX, $16
	JLT          mm8

mm16:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMINPS  Y0, Y4, Y0 // v < m ? v : m
	VMAXPS  Y1, Y4, Y1 // v > m ? v : m
	VMINPS  Y2, Y5, Y2
	VMAXPS  Y3, Y5, Y3
	ADDQ    $64, SI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JGE     mm16

mm8:
	CMPQ    CX, $8
	JLT     mmreduce
	VMOVUPS (SI), Y4
	VMINPS  Y0, Y4, Y0
	VMAXPS  Y1, Y4, Y1

mmreduce:
	VMINPS       Y2, Y0, Y0
	VMAXPS       Y3, Y1, Y1
	VEXTRACTF128 $1, Y0, X2
	VEXTRACTF128 $1, Y1, X3
	VMINPS       X2, X0, X0
	VMAXPS       X3, X1, X1
	VPERMILPS    $0x4e, X0, X2
	VPERMILPS    $0x4e, X1, X3
	VMINPS       X2, X0, X0
	VMAXPS       X3, X1, X1
	VPERMILPS    $0xb1, X0, X2
	VPERMILPS    $0xb1, X1, X3
	VMINPS       X2, X0, X0
	VMAXPS       X3, X1, X1
	VMOVSS       X0, rmn+24(FP)
	VMOVSS       X1, rmx+28(FP)
	VZEROUPPER
	RET

// Broadcast a kernArgs (AX) into Y9 b, Y8 s, Y13 lo1, Y12 hi1, Y11 lo,
// Y10 hi, Y7 dm, Y6 da; Y5 = abs mask; zero the error lanes Y14 (sums of
// squares) and Y15 (maxima). (Loading them from e would stall on the
// caller's narrower stores.)
#define LOAD_ARGS \
	VBROADCASTSS kernArgs_b(AX), Y9; \
	VBROADCASTSS kernArgs_s(AX), Y8; \
	VBROADCASTSS kernArgs_lo1(AX), Y13; \
	VBROADCASTSS kernArgs_hi1(AX), Y12; \
	VBROADCASTSS kernArgs_lo(AX), Y11; \
	VBROADCASTSS kernArgs_hi(AX), Y10; \
	VBROADCASTSS kernArgs_dm(AX), Y7; \
	VBROADCASTSS kernArgs_da(AX), Y6; \
	VPCMPEQD     Y5, Y5, Y5; \
	VPSRLD       $1, Y5, Y5; \
	VXORPS       Y14, Y14, Y14; \
	VXORPS       Y15, Y15, Y15

// Store the lanes back to e, and the group's maximum and sum of squares as
// groupErr.reduce computes them: the largest lane, and the lanes as float64
// added left to right.
#define STORE_ERR \
	VMOVUPS      Y14, groupErr_sq(BX); \
	VMOVUPS      Y15, groupErr_max(BX); \
	VEXTRACTF128 $1, Y15, X0; \
	VMAXPS       X0, X15, X0; \
	VPERMILPS    $0x4e, X0, X1; \
	VMAXPS       X1, X0, X0; \
	VPERMILPS    $0xb1, X0, X1; \
	VMAXPS       X1, X0, X0; \
	VMOVSS       X0, groupErr_gmax(BX); \
	VCVTPS2PD    X14, Y0; \
	VEXTRACTF128 $1, Y14, X1; \
	VCVTPS2PD    X1, Y1; \
	VPERMILPD    $1, X0, X2; \
	VADDSD       X2, X0, X3; \
	VEXTRACTF128 $1, Y0, X0; \
	VADDSD       X0, X3, X3; \
	VPERMILPD    $1, X0, X0; \
	VADDSD       X0, X3, X3; \
	VADDSD       X1, X3, X3; \
	VPERMILPD    $1, X1, X2; \
	VADDSD       X2, X3, X3; \
	VEXTRACTF128 $1, Y1, X1; \
	VADDSD       X1, X3, X3; \
	VPERMILPD    $1, X1, X1; \
	VADDSD       X1, X3, X3; \
	VMOVSD       X3, groupErr_gsum(BX); \
	MOVB         $1, groupErr_reduced(BX)

// Y1 = (v-b)/s, Y0 = v. The Go code first clamps the quotient to [lo1, hi1]
// for its rounding trick; rounding is monotonic, so after the clamp to the
// code range the kernels need not.
#define MLX_QUOT \
	VMOVUPS (SI), Y0; \
	VSUBPS  Y9, Y0, Y1; \
	VDIVPS  Y8, Y1, Y1

// Round Y1 half to even.
#define ROUND_EVEN \
	VROUNDPS $0, Y1, Y1

// Round Y1 half away from zero: t = trunc(x); t += copysign(1, x) if
// |x - t| >= 0.5 (x - t is exact).
#define ROUND_AWAY \
	VROUNDPS $3, Y1, Y2; \
	VSUBPS   Y2, Y1, Y3; \
	VANDPS   Y5, Y3, Y3; \
	VCMPPS   $0x1d, half<>(SB), Y3, Y3; \
	VANDNPS  Y1, Y5, Y4; \
	VORPS    one<>(SB), Y4, Y4; \
	VANDPS   Y3, Y4, Y4; \
	VADDPS   Y4, Y2, Y1

// Clamp Y1 to [lo, hi], codes in Y2 (int32) and X2 (bytes 0-7); the error
// |float32(dm*q) + da - v| into the lanes. The lower clamp takes lo when q
// is NaN (0/0: a group of equal values whose scale underflowed to 0), the
// code the Go code stores (uint8 of NaN is 0 = lo), so the error is that of
// the stored code there too; and it turns a -0 into +0, as in the Go code.
#define MLX_CODES \
	VMAXPS       Y11, Y1, Y1; \
	VMINPS       Y1, Y10, Y1; \
	VCVTTPS2DQ   Y1, Y2; \
	VMULPS       Y7, Y1, Y3; \
	VADDPS       Y6, Y3, Y3; \
	VSUBPS       Y0, Y3, Y3; \
	VANDPS       Y5, Y3, Y3; \
	VMAXPS       Y15, Y3, Y15; \
	VMULPS       Y3, Y3, Y3; \
	VADDPS       Y3, Y14, Y14; \
	VEXTRACTI128 $1, Y2, X4; \
	VPACKSSDW    X4, X2, X2; \
	VPACKUSWB    X2, X2, X2

#define PUT_BYTES \
	VMOVQ X2, (DI); \
	ADDQ  $8, DI

#define PUT_NIBBLES \
	VPMADDUBSW nib<>(SB), X2, X2; \
	VPACKUSWB  X2, X2, X2; \
	VMOVD      X2, (DI); \
	ADDQ       $4, DI

#define NEXT(label) \
	ADDQ $32, SI; \
	DECQ CX; \
	JNZ  label

// func mlxKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr, mode int)
TEXT ·mlxKernelAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ k+24(FP), AX
	MOVQ e+32(FP), BX
	MOVQ mode+40(FP), DX
	LOAD_ARGS
	SHRQ $3, CX
	JZ   mlxdone
	CMPQ DX, $const_kernGPU
	JEQ  gpubytes
	CMPQ DX, $const_kernNibbles
	JEQ  cpunib
	CMPQ DX, $(const_kernGPU|const_kernNibbles)
	JEQ  gpunib

cpubytes:
	MLX_QUOT
	ROUND_EVEN
	MLX_CODES
	PUT_BYTES
	NEXT(cpubytes)
	JMP mlxdone

cpunib:
	MLX_QUOT
	ROUND_EVEN
	MLX_CODES
	PUT_NIBBLES
	NEXT(cpunib)
	JMP mlxdone

gpubytes:
	MLX_QUOT
	ROUND_AWAY
	MLX_CODES
	PUT_BYTES
	NEXT(gpubytes)
	JMP mlxdone

gpunib:
	MLX_QUOT
	ROUND_AWAY
	MLX_CODES
	PUT_NIBBLES
	NEXT(gpunib)

mlxdone:
	STORE_ERR
	VZEROUPPER
	RET

// func nncfKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr)
TEXT ·nncfKernelAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVQ         dst+16(FP), DI
	MOVQ         k+24(FP), AX
	MOVQ         e+32(FP), BX
	LOAD_ARGS
	VPBROADCASTD kernArgs_mask(AX), Y4
	SHRQ         $3, CX
	JZ           nncfdone

nncfloop:
	// q = clamp(roundEven(v/s + b), lo, hi): as with MLX, the Go code's
	// clamp to [lo1, hi1] before rounding changes nothing here.
	VMOVUPS    (SI), Y0
	VDIVPS     Y8, Y0, Y1
	VADDPS     Y9, Y1, Y1
	VROUNDPS   $0, Y1, Y1
	VMAXPS     Y1, Y11, Y1
	VMINPS     Y1, Y10, Y1
	VCVTTPS2DQ Y1, Y2

	// error |float32((q - da) * dm) - v| (q may be -0, as with MLX)
	VSUBPS    Y6, Y1, Y3
	VMULPS    Y7, Y3, Y3
	VSUBPS    Y0, Y3, Y3
	VANDPS    Y5, Y3, Y3
	VMAXPS    Y15, Y3, Y15
	VMULPS    Y3, Y3, Y3
	VADDPS    Y3, Y14, Y14

	// codes int32(q) & mask, a byte each
	VPAND        Y4, Y2, Y2
	VEXTRACTI128 $1, Y2, X1
	VPACKSSDW    X1, X2, X2
	VPACKUSWB    X2, X2, X2
	VMOVQ        X2, (DI)
	ADDQ         $8, DI
	NEXT(nncfloop)

nncfdone:
	STORE_ERR
	VZEROUPPER
	RET

DATA lownib<>+0x00(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lownib<>+0x08(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lownib<>+0x10(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lownib<>+0x18(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lownib<>(SB), RODATA|NOPTR, $32

// func packNibblesAVX2(src *byte, n int, dst *byte)
TEXT ·packNibblesAVX2(SB), NOSPLIT, $0-24
	MOVQ           src+0(FP), SI
	MOVQ           n+8(FP), CX
	MOVQ           dst+16(FP), DI
	VBROADCASTI128 nib<>(SB), Y1
	VMOVDQU        lownib<>(SB), Y2
	SHRQ           $5, CX
	JZ             nibdone

nibloop:
	VPAND      (SI), Y2, Y0
	VPMADDUBSW Y1, Y0, Y0   // word k = c[2k] + 16*c[2k+1]
	VPACKUSWB  Y0, Y0, Y0   // each lane's 8 bytes in its low half
	VPERMQ     $0x08, Y0, Y0
	VMOVDQU    X0, (DI)
	ADDQ       $32, SI
	ADDQ       $16, DI
	DECQ       CX
	JNZ        nibloop

nibdone:
	VZEROUPPER
	RET

// The microscaling element kernel (mlxfpKernelAVX2): constants.
CONST32(fpMag, 0x3f00000000000000, 0x3fc000003f800000, 0x4040000040000000, 0x40c0000040800000) // 0 .5 1 1.5 2 3 4 6
CONST8(fpT025, 0x3e8000003e800000)
CONST8(fpT075, 0x3f4000003f400000)
CONST8(fpT125, 0x3fa000003fa00000)
CONST8(fpT175, 0x3fe000003fe00000)
CONST8(fpT25, 0x4020000040200000)
CONST8(fpT35, 0x4060000040600000)
CONST8(fpT5, 0x40a0000040a00000)
CONST8(fpSeven, 0x0000000700000007)
CONST8(fpEight, 0x0000000800000008)
CONST8(e4Sat, 0x43dfffff43dfffff)   // 543<<21 - 1: at or above saturates to 0x7e
CONST8(e4Sub, 0x3c8000003c800000)   // 121<<23: below is subnormal (or zero)
CONST8(e4Two14, 0x4680000046800000) // 2^14 = 141<<23
CONST8(e4Bias, 0xc407ffffc407ffff)  // (7-127)<<23 + 0x7ffff
CONST8(e4Max, 0x0000007e0000007e)
CONST8(e4Byte, 0x000000ff000000ff)
CONST8(wOne, 0x0000000100000001)
CONST8(bf16Round, 0x00007fff00007fff)
CONST8(bf16Quiet, 0x0040000000400000)
CONST8(bf16High, 0xffff0000ffff0000)

// m (Y5) += 1 when a (Y2) passes threshold t under predicate pred.
#define FP4_STEP(pred, t) \
	VCMPPS pred, t<>(SB), Y2, Y4; \
	VPSUBD Y4, Y5, Y5

// func mlxfpKernelAVX2(x *float32, n int, dst *byte, a *fpArgs, e *groupErr, table *float32)
// One microscaling group's codes and error (QuantizeMLXFP's element loop),
// n a multiple of 8: y = v/sv rounded to the dtype (cpu) or v*inv (gpu);
// the E4M3 code of y (its value from table, e4m3) or its E2M1 code as the
// cpu or the Metal kernel picks it; error |v - sv*value|.
TEXT ·mlxfpKernelAVX2(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVQ         dst+16(FP), DI
	MOVQ         a+24(FP), AX
	MOVQ         e+32(FP), BX
	MOVQ         table+40(FP), R8
	MOVL         fpArgs_flags(AX), DX
	VBROADCASTSS fpArgs_sv(AX), Y12
	VBROADCASTSS fpArgs_inv(AX), Y11
	VPCMPEQD     Y13, Y13, Y13
	VPSRLD       $1, Y13, Y13
	VXORPS       Y10, Y10, Y10
	VXORPS       Y14, Y14, Y14
	VXORPS       Y15, Y15, Y15
	SHRQ         $3, CX
	JZ           fpdone

fploop:
	VMOVUPS (SI), Y0
	TESTL   $const_fpCPU, DX
	JNZ     fpcpu
	VMULPS  Y11, Y0, Y1
	JMP     fpcode

fpcpu:
	VDIVPS Y12, Y0, Y1
	TESTL  $const_fpBF16, DX
	JNZ    fpbf16
	TESTL  $const_fpF16, DX
	JZ     fpcode
	VCVTPS2PH $0, Y1, X1
	VCVTPH2PS X1, Y1
	JMP       fpcode

fpbf16:
	// (u + 0x7fff + (u>>16)&1) with the low half cleared; NaN: u | 0x400000
	VPSRLD    $16, Y1, Y2
	VPAND     wOne<>(SB), Y2, Y2
	VPADDD    bf16Round<>(SB), Y2, Y2
	VPADDD    Y1, Y2, Y2
	VPOR      bf16Quiet<>(SB), Y1, Y3
	VCMPPS    $3, Y1, Y1, Y4
	VPBLENDVB Y4, Y3, Y2, Y1
	VPAND     bf16High<>(SB), Y1, Y1

fpcode:
	TESTL $const_fp8, DX
	JZ    fp4

	// E4M3 (F32ToE4M3)
	VANDPS      Y13, Y1, Y2      // b = |y| bits
	VANDNPS     Y1, Y13, Y3      // sign
	VADDPS      e4Two14<>(SB), Y2, Y4
	VPSUBD      e4Two14<>(SB), Y4, Y4 // subnormal code
	VPSRLD      $20, Y2, Y5
	VPAND       wOne<>(SB), Y5, Y5
	VPADDD      Y2, Y5, Y5
	VPADDD      e4Bias<>(SB), Y5, Y5
	VPSRLD      $20, Y5, Y5      // normal code
	VMOVDQU     e4Sub<>(SB), Y6
	VPCMPGTD    Y2, Y6, Y6       // b < 121<<23
	VPBLENDVB   Y6, Y4, Y5, Y5
	VPCMPGTD    e4Sat<>(SB), Y2, Y6 // b >= 543<<21
	VPBLENDVB   Y6, e4Max<>(SB), Y5, Y5
	VPAND       e4Byte<>(SB), Y5, Y5
	VPSRLD      $24, Y3, Y3
	VPOR        Y3, Y5, Y2       // code
	VPCMPEQD    Y6, Y6, Y6
	VXORPS      Y7, Y7, Y7
	VGATHERDPS  Y6, (R8)(Y2*4), Y7 // value
	JMP         fperr

fp4:
	VANDPS  Y13, Y1, Y2 // a = |y|
	VPXOR   Y5, Y5, Y5  // m: how many thresholds a passes
	TESTL   $const_fpCPU, DX
	JZ      fp4metal
	FP4_STEP($0x1e, fpT025)
	FP4_STEP($0x1e, fpT075)
	FP4_STEP($0x1e, fpT125)
	FP4_STEP($0x1e, fpT175)
	FP4_STEP($0x1e, fpT25)
	FP4_STEP($0x1e, fpT35)
	FP4_STEP($0x1e, fpT5)
	VCMPPS  $0x11, Y10, Y1, Y4 // y < 0
	VPCMPEQD Y10, Y5, Y6      // m == 0
	VPANDN  Y4, Y6, Y4
	VPAND   fpEight<>(SB), Y4, Y4
	VPOR    Y4, Y5, Y2
	JMP     fp4value

fp4metal:
	FP4_STEP($0x1e, fpT025)
	FP4_STEP($0x1d, fpT075)
	FP4_STEP($0x1e, fpT125)
	FP4_STEP($0x1d, fpT175)
	FP4_STEP($0x1e, fpT25)
	FP4_STEP($0x1d, fpT35)
	FP4_STEP($0x1e, fpT5)
	VPSRLD  $31, Y1, Y4
	VPSLLD  $3, Y4, Y4
	VPOR    Y4, Y5, Y2
	VCMPPS  $3, Y1, Y1, Y4 // NaN: code 7
	VPBLENDVB Y4, fpSeven<>(SB), Y2, Y2
	VMOVDQU Y2, Y5
	VPAND   fpSeven<>(SB), Y5, Y5

fp4value:
	VPERMPS fpMag<>(SB), Y5, Y7
	VPAND   fpEight<>(SB), Y2, Y4
	VPSLLD  $28, Y4, Y4
	VPOR    Y4, Y7, Y7

fperr:
	VMULPS       Y12, Y7, Y7
	VSUBPS       Y7, Y0, Y7
	VANDPS       Y13, Y7, Y7
	VMAXPS       Y15, Y7, Y15
	VMULPS       Y7, Y7, Y7
	VADDPS       Y7, Y14, Y14
	VEXTRACTI128 $1, Y2, X4
	VPACKSSDW    X4, X2, X2
	VPACKUSWB    X2, X2, X2
	TESTL        $const_fp8, DX
	JZ           fpnib
	VMOVQ        X2, (DI)
	ADDQ         $8, DI
	JMP          fpnext

fpnib:
	VPMADDUBSW nib<>(SB), X2, X2
	VPACKUSWB  X2, X2, X2
	VMOVD      X2, (DI)
	ADDQ       $4, DI

fpnext:
	ADDQ $32, SI
	DECQ CX
	JNZ  fploop

fpdone:
	STORE_ERR
	VZEROUPPER
	RET

// func absMaxAVX2(x *float32, n int) (m float32, ok bool)
// The largest |x| of x[:n], n a multiple of 8; ok is false when an element
// is NaN (the caller then follows Go's max, which propagates NaN).
TEXT ·absMaxAVX2(SB), NOSPLIT, $0-21
	MOVQ     x+0(FP), SI
	MOVQ     n+8(FP), CX
	VPCMPEQD Y3, Y3, Y3
	VPSRLD   $1, Y3, Y3
	VXORPS   Y0, Y0, Y0 // max
	VXORPS   Y1, Y1, Y1 // NaN seen
	SHRQ     $3, CX
	JZ       amdone

amloop:
	VANDPS  (SI), Y3, Y2
	VMAXPS  Y0, Y2, Y0
	VCMPPS  $3, Y2, Y2, Y2
	VORPS   Y2, Y1, Y1
	ADDQ    $32, SI
	DECQ    CX
	JNZ     amloop

amdone:
	VEXTRACTF128 $1, Y0, X2
	VMAXPS       X2, X0, X0
	VPERMILPS    $0x4e, X0, X2
	VMAXPS       X2, X0, X0
	VPERMILPS    $0xb1, X0, X2
	VMAXPS       X2, X0, X0
	VMOVSS       X0, m+16(FP)
	VPTEST       Y1, Y1
	SETEQ        ok+20(FP)
	VZEROUPPER
	RET
