// AVX2 kernels for the quantizers; see kernels.go for the Go versions they
// match bit for bit. Go's operand order is Intel's reversed: VMAXPS Y1, Y11,
// Y1 is vmaxps ymm1, ymm11, ymm1, which yields ymm11 > ymm1 ? ymm11 : ymm1
// (the second source when either is NaN), the semantics of the Go code's
// plain comparisons. Only unaligned loads and stores.

#include "textflag.h"
#include "go_asm.h"

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
