// AVX2 versions of the 32-value ggml quantizers Q4_0, Q5_0 and Q5_1; see
// ggml_legacy_amd64.go. One block at a time: Y0..Y3 hold its elements 0-7,
// 8-15, 16-23 and 24-31. Go's operand order is Intel's reversed (VSUBPS b,
// a, d is d = a - b; VMAXPS m, x, m is m = x > m ? x : m, which keeps m when
// x is NaN, as the scalar `if a > m` does).

#include "textflag.h"

#include "consts_amd64.h"
#include "ggml_err_amd64.h"

CONST8(lgAbs, 0x7fffffff7fffffff)
CONST8(lgMax, 0x7f7fffff7f7fffff)    // math.MaxFloat32
CONST8(lgNegMax, 0xff7fffffff7fffff) // -math.MaxFloat32
CONST8(lgHalf, 0x3f0000003f000000)   // 0.5
CONST8(lg8p5, 0x4108000041080000)    // 8.5
CONST8(lg16p5, 0x4184000041840000)   // 16.5
CONST8(lgOne, 0x3f8000003f800000)    // 1.0
CONST8(lgNeg8, 0xc1000000c1000000)   // -8.0
CONST8(lgNeg16, 0xc1800000c1800000)  // -16.0
CONST8(lg31f, 0x41f8000041f80000)    // 31.0
CONST8(lgByte, 0x000000ff000000ff)
CONST8(lgNibble, 0x0000000f0000000f) // also the Q4_0 code limit 15
CONST8(lg8, 0x0000000800000008)
CONST8(lg16, 0x0000001000000010)
CONST8(lg31, 0x0000001f0000001f)

// The block's 32 values.
#define LOAD_BLOCK \
	VMOVUPS 0(SI), Y0; \
	VMOVUPS 32(SI), Y1; \
	VMOVUPS 64(SI), Y2; \
	VMOVUPS 96(SI), Y3

// The lane-wise result of op over the 8 lanes of y into lane 0 of x (t a
// temporary X register). Only for NaN-free lanes whose result does not
// depend on the order (callers fix the sign of a zero result).
#define HREDUCE(op, y, x, t) \
	VEXTRACTF128 $1, y, t; \
	op           t, x, x; \
	VPERMILPS    $0x4e, x, t; \
	op           t, x, x; \
	VPERMILPS    $0xb1, x, t; \
	op           t, x, x

// AX = the index of the first of the 32 lanes of a, b, c, d (elements 0-31)
// equal to ref (a vector); at least one must be.
#define FIRST_EQ(a, b, c, d, ref) \
	VCMPPS    $0, ref, a, Y11; \
	VMOVMSKPS Y11, AX; \
	VCMPPS    $0, ref, b, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $8, BX; \
	ORL       BX, AX; \
	VCMPPS    $0, ref, c, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $16, BX; \
	ORL       BX, AX; \
	VCMPPS    $0, ref, d, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $24, BX; \
	ORL       BX, AX; \
	BSFL      AX, AX

// X14 = the value of largest magnitude, the first one on ties, NaNs
// skipped, and +0 when every |x| is 0 or NaN (the scalar loop's mx). Leaves
// |x| in Y4..Y7.
#define ABS_MAX_FIRST(found) \
	VMOVUPS      lgAbs<>(SB), Y15; \
	VANDPS       Y15, Y0, Y4; \
	VANDPS       Y15, Y1, Y5; \
	VANDPS       Y15, Y2, Y6; \
	VANDPS       Y15, Y3, Y7; \
	VXORPS       Y12, Y12, Y12; \
	VMAXPS       Y12, Y4, Y12; \
	VMAXPS       Y12, Y5, Y12; \
	VMAXPS       Y12, Y6, Y12; \
	VMAXPS       Y12, Y7, Y12; \
	HREDUCE(VMAXPS, Y12, X12, X13); \
	VXORPS       X14, X14, X14; \
	VUCOMISS     X14, X12; \
	JEQ          found; \
	VBROADCASTSS X12, Y12; \
	FIRST_EQ(Y4, Y5, Y6, Y7, Y12); \
	VMOVSS       (SI)(AX*4), X14; \
found:

// Y12 = d != 0 ? 1/d : 0 for d in X14.
#define INV_SCALE \
	VXORPS       X11, X11, X11; \
	VCMPSS       $4, X11, X14, X11; \
	VMOVSS       lgOne<>(SB), X12; \
	VDIVSS       X14, X12, X12; \
	VANDPS       X11, X12, X12; \
	VBROADCASTSS X12, Y12

// d (X14) as f16 to y[0:2] and, decoded, to Y15.
#define STORE_D \
	VCVTPS2PH    $0, X14, X11; \
	VMOVD        X11, AX; \
	MOVW         AX, (DI); \
	VCVTPH2PS    X11, X11; \
	VBROADCASTSS X11, Y15

// Codes min(lim, int8(x*id + add)) (id Y12): Go's float32-to-int8
// conversion on amd64 is the int32 conversion's low byte, sign-extended.
// x*id + add is in [0, 2*add] unless id is infinite (a block of tiny
// values), when the int32 conversion gives 0x80000000: the codes are in
// [0, lim], which the packing and dequantizing below rely on.
#define SIGNED_CODE(x, c, add, lim) \
	VMULPS     Y12, x, c; \
	VADDPS     add, c, c; \
	VCVTTPS2DQ c, c; \
	VPSLLD     $24, c, c; \
	VPSRAD     $24, c, c; \
	VPMINSD    lim, c, c

// Bytes (lo & 15) | (hi & 15)<<4 of the codes Y4|Y6 (elements j and j+16,
// j < 8) and Y5|Y7 (j < 16) to off(DI), 16 of them in element order.
#define PACK_NIBBLES(off) \
	VPAND        lgNibble<>(SB), Y4, Y11; \
	VPAND        lgNibble<>(SB), Y6, Y12; \
	VPSLLD       $4, Y12, Y12; \
	VPOR         Y12, Y11, Y11; \
	VPAND        lgNibble<>(SB), Y5, Y12; \
	VPAND        lgNibble<>(SB), Y7, Y13; \
	VPSLLD       $4, Y13, Y13; \
	VPOR         Y13, Y12, Y12; \
	VPACKUSDW    Y12, Y11, Y11; \
	VPERMQ       $0xd8, Y11, Y11; \
	VEXTRACTI128 $1, Y11, X12; \
	VPACKUSWB    X12, X11, X11; \
	VMOVDQU      X11, off(DI)

// Bit 4 of the codes Y4..Y7, element i in bit i, to off(DI).
#define STORE_QH(off) \
	VPSLLD    $27, Y4, Y11; \
	VMOVMSKPS Y11, AX; \
	VPSLLD    $27, Y5, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $8, BX; \
	ORL       BX, AX; \
	VPSLLD    $27, Y6, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $16, BX; \
	ORL       BX, AX; \
	VPSLLD    $27, Y7, Y11; \
	VMOVMSKPS Y11, BX; \
	SHLL      $24, BX; \
	ORL       BX, AX; \
	MOVL      AX, off(DI)

// ERR4 (ggml_err_amd64.h) with Y13 and Y14, the maxima in the block's Y12.
#define BLOCK_ERR4(xv, dv) ERR4(xv, dv, Y13, X13, Y14, X14, Y12)

// The scalar code adds the errors of elements j and j+16 in turn: the
// statistics of elements p (j..j+7) and q (j+16..j+23), their dequantized
// values dp and dq, interleaved.
#define ERR_PAIR(yp, xp, yq, xq, ydp, xdp, ydq) \
	VUNPCKLPS    yq, yp, Y11; \
	VUNPCKHPS    yq, yp, yp; \
	VUNPCKLPS    ydq, ydp, yq; \
	VUNPCKHPS    ydq, ydp, ydp; \
	BLOCK_ERR4(X11, xq); \
	BLOCK_ERR4(xp, xdp); \
	VEXTRACTF128 $1, Y11, X11; \
	VEXTRACTF128 $1, yq, xq; \
	BLOCK_ERR4(X11, xq); \
	VEXTRACTF128 $1, yp, xp; \
	VEXTRACTF128 $1, ydp, xdp; \
	BLOCK_ERR4(xp, xdp)

// The block's statistics from the values Y0..Y3 and the dequantized Y4..Y7,
// when R9 asks for them; a NaN error jumps to bail with the block not
// counted (R10 keeps the sum before it).
#define BLOCK_STATS(skip, bail) \
	TESTQ  R9, R9; \
	JZ     skip; \
	VMOVQ  X8, R10; \
	VXORPD Y12, Y12, Y12; \
	ERR_PAIR(Y0, X0, Y2, X2, Y4, X4, Y6); \
	ERR_PAIR(Y1, X1, Y3, X3, Y5, X5, Y7); \
	VPTEST Y10, Y10; \
	JNZ    bail; \
	VMAXPD Y12, Y9, Y9; \
skip:

#define PROLOGUE \
	MOVQ    x+0(FP), SI; \
	MOVQ    y+8(FP), DI; \
	MOVQ    nb+16(FP), CX; \
	MOVBQZX stats+24(FP), R9; \
	VMOVSD  sum+32(FP), X8; \
	VXORPD  Y9, Y9, Y9; \
	VXORPD  Y10, Y10, Y10; \
	XORQ    R8, R8; \
	TESTQ   CX, CX

// The next block (bs bytes) or the end.
#define NEXT_BLOCK(bs, loop) \
	ADDQ $128, SI; \
	ADDQ $bs, DI; \
	INCQ R8; \
	CMPQ R8, CX; \
	JLT  loop

// Results: blocks done, the largest error and the sum of squares.
#define EPILOGUE(bail, end) \
	JMP          end; \
bail: \
	VMOVQ        R10, X8; \
end: \
	MOVQ         R8, done+40(FP); \
	STORE_ERR(emax+48(FP), rsum+56(FP)); \
	VZEROUPPER; \
	RET

// The block's statistics, the next block of bs bytes, and the results.
#define BLOCK_END(bs, loop, next, bail, end) \
	BLOCK_STATS(next, bail); \
	NEXT_BLOCK(bs, loop); \
	EPILOGUE(bail, end)

// Q4_0 and Q5_0 (neg -8 or -16): the block, d = mx / neg (f16 to y[0:2],
// decoded to Y15), the inverse id, and the codes min(lim, int8(x*id + add))
// into Y4..Y7.
#define SYM_CODES(found, neg, add, lim) \
	LOAD_BLOCK; \
	ABS_MAX_FIRST(found); \
	VDIVSS neg, X14, X14; \
	INV_SCALE; \
	STORE_D; \
	SIGNED_CODE(Y0, Y4, add, lim); \
	SIGNED_CODE(Y1, Y5, add, lim); \
	SIGNED_CODE(Y2, Y6, add, lim); \
	SIGNED_CODE(Y3, Y7, add, lim)

// Q4_0 and Q5_0 dequantized: float32(code - bias) * d, in Y4..Y7.
#define SYM_DEQ(bias) \
	SYM_DEQ1(Y4, bias); \
	SYM_DEQ1(Y5, bias); \
	SYM_DEQ1(Y6, bias); \
	SYM_DEQ1(Y7, bias)

#define SYM_DEQ1(c, bias) \
	VPSUBD    bias, c, c; \
	VCVTDQ2PS c, c; \
	VMULPS    Y15, c, c

// func q4_0AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)
TEXT ·q4_0AVX2(SB), NOSPLIT, $0-64
	PROLOGUE
	JZ q40end

q40loop:
	SYM_CODES(q40mx, lgNeg8<>(SB), lg8p5<>(SB), lgNibble<>(SB))
	PACK_NIBBLES(2)
	SYM_DEQ(lg8<>(SB))
	BLOCK_END(18, q40loop, q40next, q40bail, q40end)

// func q5_0AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)
TEXT ·q5_0AVX2(SB), NOSPLIT, $0-64
	PROLOGUE
	JZ q50end

q50loop:
	SYM_CODES(q50mx, lgNeg16<>(SB), lg16p5<>(SB), lg31<>(SB))
	STORE_QH(2)
	PACK_NIBBLES(6)
	SYM_DEQ(lg16<>(SB))
	BLOCK_END(22, q50loop, q50next, q50bail, q50end)

// Q5_1 codes uint8((x - mn)*id + 0.5), mn Y13: the int32 conversion's low
// byte, in [0, 31] (0 from 0x80000000 when x - mn is infinite or NaN).
#define Q5_1_CODE(x, c) \
	VSUBPS     Y13, x, c; \
	VMULPS     Y12, c, c; \
	VADDPS     lgHalf<>(SB), c, c; \
	VCVTTPS2DQ c, c; \
	VPAND      lgByte<>(SB), c, c

// Dequantized Q5_1: float32(code)*d + m (Y14, Y15).
#define Q5_1_DEQ(c) \
	VCVTDQ2PS c, c; \
	VMULPS    Y14, c, c; \
	VADDPS    Y15, c, c

// func q5_1AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)
TEXT ·q5_1AVX2(SB), NOSPLIT, $0-64
	PROLOGUE
	JZ q51end

q51loop:
	LOAD_BLOCK

	// min and max from ±MaxFloat32, NaNs skipped
	VMOVUPS lgMax<>(SB), Y12
	VMOVUPS lgNegMax<>(SB), Y13
	VMINPS  Y12, Y0, Y12
	VMINPS  Y12, Y1, Y12
	VMINPS  Y12, Y2, Y12
	VMINPS  Y12, Y3, Y12
	VMAXPS  Y13, Y0, Y13
	VMAXPS  Y13, Y1, Y13
	VMAXPS  Y13, Y2, Y13
	VMAXPS  Y13, Y3, Y13
	HREDUCE(VMINPS, Y12, X12, X11)
	HREDUCE(VMAXPS, Y13, X13, X11)

	// A zero minimum is the first zero element, sign included, as the
	// scalar loop keeps it; so is a zero maximum then. (A zero maximum
	// over a non-zero minimum gives the same d either way.)
	VXORPS    X14, X14, X14
	VUCOMISS  X14, X12
	JNE       q51range
	VXORPS    Y14, Y14, Y14
	FIRST_EQ(Y0, Y1, Y2, Y3, Y14)
	VMOVSS    (SI)(AX*4), X15
	VCMPSS    $0, X14, X12, X11
	VBLENDVPS X11, X15, X12, X12
	VCMPSS    $0, X14, X13, X11
	VBLENDVPS X11, X15, X13, X13

q51range:
	VSUBSS       X12, X13, X14 // mx - mn
	VDIVSS       lg31f<>(SB), X14, X14 // d
	VBROADCASTSS X12, Y13
	INV_SCALE

	// d and mn as f16 to y[0:4]; decoded, to Y14 and Y15
	VUNPCKLPS    X13, X14, X11
	VCVTPS2PH    $0, X11, X11
	VMOVD        X11, AX
	MOVL         AX, (DI)
	VCVTPH2PS    X11, X11
	VBROADCASTSS X11, Y14
	VMOVSHDUP    X11, X11
	VBROADCASTSS X11, Y15

	Q5_1_CODE(Y0, Y4)
	Q5_1_CODE(Y1, Y5)
	Q5_1_CODE(Y2, Y6)
	Q5_1_CODE(Y3, Y7)
	STORE_QH(4)
	PACK_NIBBLES(8)
	Q5_1_DEQ(Y4)
	Q5_1_DEQ(Y5)
	Q5_1_DEQ(Y6)
	Q5_1_DEQ(Y7)
	BLOCK_END(24, q51loop, q51next, q51bail, q51end)
