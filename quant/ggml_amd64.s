// AVX2 versions of the k-quants' scale searches; see ggml_kernels.go.
// Each vector lane is one group and performs the scalar code's operations
// in its order. Go's operand order is Intel's reversed (VSUBPS b, a, d is
// d = a - b; VCMPPS $p, b, a, d is d = a p b; VBLENDVPS m, t, f, d is
// d = m ? t : f; VMINPS b, a, d is d = a < b ? a : b).

#include "textflag.h"
#include "go_asm.h"

#include "consts_amd64.h"
#include "ggml_err_amd64.h"

CONST8(kqMagic, 0x4b4000004b400000) // 12582912 = 1.5*2^23
CONST8(kqMant, 0x007fffff007fffff)
CONST8(kqBias, 0x0040000000400000)
CONST8(kq32, 0x4200000042000000)    // 32.0
CONST8(kqOne, 0x3f8000003f800000)
CONST8(kqEps, 0x26901d7d26901d7d)   // float32(1e-15) (groupMaxEps)

// nearestInt: r (float32) to its nearest integer (int32), ties to even,
// through the float32 mantissa.
#define NEAREST(r) \
	VADDPS kqMagic<>(SB), r, r; \
	VPAND  kqMant<>(SB), r, r; \
	VPSUBD kqBias<>(SB), r, r

// The rows of kqArgs.x: 32 bytes each, n of them.
#define ROWS(label, n) \
	ADDQ $32, DX; \
	CMPQ DX, $(32*n); \
	JLT  label

// One element row of a makeQKX2Quants candidate: Y0 = x, the codes
// clamp(nearestInt(iscale*(x-mn)), 0, nmax) (iscale Y12, mn Y1) into dst
// and, as floats, Y5.
#define QKX2_CODE(dst) \
	VMOVUPS   kqArgs_x(AX)(DX*1), Y0; \
	VSUBPS    Y1, Y0, Y5; \
	VMULPS    Y5, Y12, Y5; \
	NEAREST(Y5); \
	VPMAXSD   Y11, Y5, Y5; \
	VPMINSD   kqArgs_nmax(AX), Y5, Y5; \
	VMOVDQU   Y5, dst(AX)(DX*1); \
	VCVTDQ2PS Y5, Y5

// Codes l of the lanes in mask from laux (n rows).
#define TAKE_CODES(mask, n, label) \
	XORQ      DX, DX; \
label: \
	VMOVUPS   kqArgs_l(AX)(DX*1), Y6; \
	VBLENDVPS mask, kqArgs_laux(AX)(DX*1), Y6, Y6; \
	VMOVUPS   Y6, kqArgs_l(AX)(DX*1); \
	ROWS(label, n)

// Codes 0 (and scale 0) for the lanes in kqArgs.flat (n rows).
#define ZERO_FLAT(n, label, done) \
	VMOVUPS   kqArgs_flat(AX), Y8; \
	VMOVUPS   kqArgs_scale(AX), Y5; \
	VANDNPS   Y5, Y8, Y5; \
	VMOVUPS   Y5, kqArgs_scale(AX); \
	VMOVMSKPS Y8, BX; \
	TESTL     BX, BX; \
	JZ        done; \
	XORQ      DX, DX; \
label: \
	VMOVUPS kqArgs_l(AX)(DX*1), Y5; \
	VANDNPS Y5, Y8, Y5; \
	VMOVUPS Y5, kqArgs_l(AX)(DX*1); \
	ROWS(label, n)

// func qkx2AVX2(a *kqArgs, steps int)
TEXT ·qkx2AVX2(SB), NOSPLIT, $0-16
	MOVQ     a+0(FP), AX
	MOVQ     steps+8(FP), R8
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $1, Y15, Y15  // |x| mask
	VXORPS   Y11, Y11, Y11 // 0

	// weights: avX + |x|, avX = sqrt(sum x*x / 32)
	VXORPS Y0, Y0, Y0
	XORQ   DX, DX

q2sq:
	VMOVUPS kqArgs_x(AX)(DX*1), Y1
	VMULPS  Y1, Y1, Y1
	VADDPS  Y1, Y0, Y0
	ROWS(q2sq, 32)
	VDIVPS  kq32<>(SB), Y0, Y0
	VSQRTPS Y0, Y0
	XORQ    DX, DX

q2w:
	VMOVUPS kqArgs_x(AX)(DX*1), Y1
	VANDPS  Y15, Y1, Y1
	VADDPS  Y1, Y0, Y1
	VMOVUPS Y1, kqArgs_w(AX)(DX*1)
	ROWS(q2w, 32)

	// min, max, sum of weights, sum of w*x
	VMOVUPS kqArgs_x(AX), Y1
	VMOVUPS Y1, Y2
	VMOVUPS kqArgs_w(AX), Y3
	VMULPS  Y1, Y3, Y4
	MOVQ    $32, DX

q2mm:
	VMOVUPS kqArgs_x(AX)(DX*1), Y0
	VMOVUPS kqArgs_w(AX)(DX*1), Y5
	VMINPS  Y1, Y0, Y1 // x < mn ? x : mn
	VMAXPS  Y2, Y0, Y2 // x > mx ? x : mx
	VADDPS  Y5, Y3, Y3
	VMULPS  Y0, Y5, Y6
	VADDPS  Y6, Y4, Y4
	ROWS(q2mm, 32)
	VMINPS  Y1, Y11, Y1    // mn > 0 ? 0 : mn
	VCMPPS  $0, Y1, Y2, Y5 // mx == mn: all codes 0, scale 0, min -mn
	VMOVUPS Y5, kqArgs_flat(AX)
	VMOVUPS Y1, kqArgs_mn(AX)
	VMOVUPS Y2, kqArgs_mx(AX)
	VMOVUPS Y3, kqArgs_sumW(AX)
	VMOVUPS Y4, kqArgs_sumX(AX)
	VPCMPEQD Y15, Y15, Y15
	VPSLLD   $31, Y15, Y15 // sign bit
	VXORPS  Y15, Y1, Y5
	VMOVUPS Y5, kqArgs_min(AX)

	// the first candidate: iscale = nmax/(mx-mn), scale = 1/iscale
	VSUBPS    Y1, Y2, Y6
	VCVTDQ2PS kqArgs_nmax(AX), Y7
	VDIVPS    Y6, Y7, Y12
	VMOVUPS   kqOne<>(SB), Y6
	VDIVPS    Y12, Y6, Y6
	VMOVUPS   Y6, kqArgs_scale(AX)
	VXORPS    Y13, Y13, Y13
	XORQ      DX, DX

q2e0:
	QKX2_CODE(kqArgs_l)
	VMULPS    Y5, Y6, Y5
	VADDPS    Y1, Y5, Y5
	VSUBPS    Y0, Y5, Y5
	VMULPS    Y5, Y5, Y5
	VMULPS    kqArgs_w(AX)(DX*1), Y5, Y5
	VADDPS    Y5, Y13, Y13
	ROWS(q2e0, 32)
	VMOVUPS   Y13, kqArgs_best(AX)
	XORQ      R9, R9

q2step:
	VMOVUPS      kqArgs_mn(AX), Y1
	VMOVUPS      kqArgs_mx(AX), Y2
	VSUBPS       Y1, Y2, Y2
	VBROADCASTSS kqArgs_num(AX)(R9*4), Y12
	VDIVPS       Y2, Y12, Y12 // iscale
	VXORPS       Y13, Y13, Y13 // sum w*l
	VXORPS       Y14, Y14, Y14 // sum w*l*l
	VXORPS       Y15, Y15, Y15 // sum w*l*x
	XORQ         DX, DX

q2sum:
	QKX2_CODE(kqArgs_laux)
	VMULPS    kqArgs_w(AX)(DX*1), Y5, Y6
	VADDPS    Y6, Y13, Y13
	VMULPS    Y5, Y6, Y7
	VADDPS    Y7, Y14, Y14
	VMULPS    Y0, Y6, Y7
	VADDPS    Y7, Y15, Y15
	ROWS(q2sum, 32)

	VMOVUPS   kqArgs_sumW(AX), Y3
	VMOVUPS   kqArgs_sumX(AX), Y4
	VMULPS    Y14, Y3, Y5
	VMULPS    Y13, Y13, Y6
	VSUBPS    Y6, Y5, Y5        // D
	VCMPPS    $0x1e, Y11, Y5, Y10 // D > 0
	VMOVMSKPS Y10, BX
	TESTL     BX, BX
	JZ        q2next
	VMULPS    Y15, Y3, Y6
	VMULPS    Y13, Y4, Y7
	VSUBPS    Y7, Y6, Y6
	VDIVPS    Y5, Y6, Y6 // this scale
	VMULPS    Y4, Y14, Y7
	VMULPS    Y15, Y13, Y8
	VSUBPS    Y8, Y7, Y7
	VDIVPS    Y5, Y7, Y7          // this min
	VCMPPS    $0x1e, Y11, Y7, Y8  // this min > 0: min 0, scale sum w*l*x / sum w*l*l
	VANDNPS   Y7, Y8, Y7
	VDIVPS    Y14, Y15, Y9
	VBLENDVPS Y8, Y9, Y6, Y6
	VXORPS    Y13, Y13, Y13
	XORQ      DX, DX

q2cur:
	VCVTDQ2PS kqArgs_laux(AX)(DX*1), Y5
	VMULPS    Y5, Y6, Y5
	VADDPS    Y7, Y5, Y5
	VSUBPS    kqArgs_x(AX)(DX*1), Y5, Y5
	VMULPS    Y5, Y5, Y5
	VMULPS    kqArgs_w(AX)(DX*1), Y5, Y5
	VADDPS    Y5, Y13, Y13
	ROWS(q2cur, 32)
	VCMPPS    $0x11, kqArgs_best(AX), Y13, Y8 // error < best
	VANDPS    Y10, Y8, Y8
	VMOVMSKPS Y8, BX
	TESTL     BX, BX
	JZ        q2next
	VMOVUPS   kqArgs_best(AX), Y5
	VBLENDVPS Y8, Y13, Y5, Y5
	VMOVUPS   Y5, kqArgs_best(AX)
	VMOVUPS   kqArgs_scale(AX), Y5
	VBLENDVPS Y8, Y6, Y5, Y5
	VMOVUPS   Y5, kqArgs_scale(AX)
	VMOVUPS   kqArgs_mn(AX), Y5
	VBLENDVPS Y8, Y7, Y5, Y5
	VMOVUPS   Y5, kqArgs_mn(AX)
	TAKE_CODES(Y8, 32, q2take)

q2next:
	INCQ R9
	CMPQ R9, R8
	JLT  q2step

	// min = -mn; groups of equal values: their own min, scale 0, codes 0
	VMOVUPS   kqArgs_mn(AX), Y1
	VPCMPEQD  Y15, Y15, Y15
	VPSLLD    $31, Y15, Y15
	VXORPS    Y15, Y1, Y1
	VMOVUPS   kqArgs_flat(AX), Y8
	VBLENDVPS Y8, kqArgs_min(AX), Y1, Y1
	VMOVUPS   Y1, kqArgs_min(AX)
	ZERO_FLAT(32, q2flat, q2done)

q2done:
	VZEROUPPER
	RET

// One candidate of makeQXQuants for iscale Y12: codes clamp(nearestInt(
// iscale*x), -nmax, nmax-1) + nmax into dst, Y13 = sum of (w*x)*l, Y14 =
// sum of (w*l)*l, w = x*x, element by element.
#define QX_SUMS(dst, label) \
	VXORPS    Y13, Y13, Y13; \
	VXORPS    Y14, Y14, Y14; \
	XORQ      DX, DX; \
label: \
	VMOVUPS   kqArgs_x(AX)(DX*1), Y0; \
	VMULPS    Y0, Y12, Y5; \
	NEAREST(Y5); \
	VPMAXSD   Y10, Y5, Y5; \
	VPMINSD   Y11, Y5, Y5; \
	VPADDD    Y9, Y5, Y6; \
	VMOVDQU   Y6, dst(AX)(DX*1); \
	VCVTDQ2PS Y5, Y5; \
	VMULPS    Y0, Y0, Y6; \
	VMULPS    Y0, Y6, Y7; \
	VMULPS    Y5, Y7, Y7; \
	VADDPS    Y7, Y13, Y13; \
	VMULPS    Y5, Y6, Y7; \
	VMULPS    Y5, Y7, Y7; \
	VADDPS    Y7, Y14, Y14; \
	ROWS(label, 16)

// func qxAVX2(a *kqArgs)
TEXT ·qxAVX2(SB), NOSPLIT, $0-8
	MOVQ     a+0(FP), AX
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $1, Y15, Y15

	// the value of largest magnitude, the first one on ties
	VXORPS Y1, Y1, Y1 // amax
	VXORPS Y2, Y2, Y2 // mx
	XORQ   DX, DX

qxmax:
	VMOVUPS   kqArgs_x(AX)(DX*1), Y0
	VANDPS    Y15, Y0, Y3
	VCMPPS    $0x1e, Y1, Y3, Y4 // |x| > amax
	VBLENDVPS Y4, Y3, Y1, Y1
	VBLENDVPS Y4, Y0, Y2, Y2
	ROWS(qxmax, 16)
	VCMPPS    $0x11, kqEps<>(SB), Y1, Y4 // amax < eps: codes 0, scale 0
	VMOVUPS   Y4, kqArgs_flat(AX)

	// codes clamped to [-nmax, nmax-1]
	VMOVDQU  kqArgs_nmax(AX), Y9
	VPXOR    Y10, Y10, Y10
	VPSUBD   Y9, Y10, Y10
	VPCMPEQD Y11, Y11, Y11
	VPADDD   Y9, Y11, Y11

	// the first candidate, iscale = -nmax/mx
	VBROADCASTSS kqArgs_num(AX), Y12
	VDIVPS       Y2, Y12, Y12
	QX_SUMS(kqArgs_l, qx0)
	VDIVPS    Y14, Y13, Y3
	VXORPS    Y8, Y8, Y8
	VCMPPS    $4, Y8, Y14, Y4 // sum w*l*l != 0
	VANDPS    Y4, Y3, Y3      // scale
	VMULPS    Y13, Y3, Y4     // best
	MOVQ      $1, R9

qxstep:
	VBROADCASTSS kqArgs_num(AX)(R9*4), Y12
	VDIVPS       Y2, Y12, Y12
	QX_SUMS(kqArgs_laux, qxsum)
	VXORPS    Y8, Y8, Y8
	VCMPPS    $0x1e, Y8, Y14, Y5 // sum w*l*l > 0
	VMULPS    Y13, Y13, Y6
	VMULPS    Y14, Y4, Y7
	VCMPPS    $0x1e, Y7, Y6, Y7  // sumlx*sumlx > best*suml2
	VANDPS    Y7, Y5, Y5
	VMOVMSKPS Y5, BX
	TESTL     BX, BX
	JZ        qxnext
	VDIVPS    Y14, Y13, Y6
	VBLENDVPS Y5, Y6, Y3, Y3
	VMULPS    Y13, Y3, Y6
	VBLENDVPS Y5, Y6, Y4, Y4
	TAKE_CODES(Y5, 16, qxtake)

qxnext:
	INCQ R9
	CMPQ R9, $19
	JLT  qxstep

	VMOVUPS   Y3, kqArgs_scale(AX)
	ZERO_FLAT(16, qxflat, qxdone)

qxdone:
	VZEROUPPER
	RET

CONST8(kqHalf, 0x3f0000003f000000)
// Error of 4 elements (float32 in X registers v, d), as ERR4 with Y2 and
// Y3 and the maxima in Y9.
#define Q8_ERR4(v, d) ERR4(v, d, Y2, X2, Y3, X3, Y9)

// func q8_0AVX2(x *float32, y *byte, id, dq float32, sum float64) (emax, rsum float64)
// quantize_row_q8_0_ref's codes for one block of 32 given its inverse scale
// id (finite) and stored scale dq: int8(round(x*id)), halves away from zero;
// and the error statistics as ErrStats.add sums them.
TEXT ·q8_0AVX2(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), DI
	VBROADCASTSS id+16(FP), Y13
	VBROADCASTSS dq+20(FP), Y11
	VMOVSD       sum+24(FP), X8
	VPCMPEQD     Y12, Y12, Y12
	VPSRLD       $1, Y12, Y12 // |x| mask
	VXORPD       Y9, Y9, Y9
	VXORPD       Y10, Y10, Y10
	MOVQ         $4, CX

q8loop:
	VMOVUPS    (SI), Y0
	VMULPS     Y13, Y0, Y1
	// round half away from zero: t = trunc(x); t += copysign(1, x) if |x - t| >= 0.5
	VROUNDPS   $3, Y1, Y2
	VSUBPS     Y2, Y1, Y3
	VANDPS     Y12, Y3, Y3
	VCMPPS     $0x1d, kqHalf<>(SB), Y3, Y3
	VANDNPS    Y1, Y12, Y4
	VORPS      kqOne<>(SB), Y4, Y4
	VANDPS     Y3, Y4, Y4
	VADDPS     Y4, Y2, Y1
	VCVTTPS2DQ Y1, Y6
	VCVTDQ2PS  Y6, Y7
	VMULPS     Y11, Y7, Y7 // dequantized
	Q8_ERR4(X0, X7)
	VEXTRACTF128 $1, Y0, X0
	VEXTRACTF128 $1, Y7, X7
	Q8_ERR4(X0, X7)
	VEXTRACTI128 $1, Y6, X5
	VPACKSSDW    X5, X6, X6
	VPACKSSWB    X6, X6, X6
	VMOVQ        X6, (DI)
	ADDQ         $32, SI
	ADDQ         $8, DI
	DECQ         CX
	JNZ          q8loop

	STORE_ERR(emax+32(FP), rsum+40(FP))
	VZEROUPPER
	RET

// func errStatsAVX2(x, deq *float32, n int, sum float64) (emax, rsum float64, ok bool)
// ErrStats.add over n elements (a multiple of 4): the largest
// |float64(x) - float64(deq)| and sum plus their squares added in order;
// ok is false when an error is NaN (Go's max then decides the bits).
TEXT ·errStatsAVX2(SB), NOSPLIT, $0-49
	MOVQ   x+0(FP), SI
	MOVQ   deq+8(FP), DI
	MOVQ   n+16(FP), CX
	VMOVSD sum+24(FP), X8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	SHRQ   $2, CX
	JZ     esdone

esloop:
	VMOVUPS (SI), X0
	VMOVUPS (DI), X1
	Q8_ERR4(X0, X1)
	ADDQ    $16, SI
	ADDQ    $16, DI
	DECQ    CX
	JNZ     esloop

esdone:
	STORE_ERR(emax+32(FP), rsum+40(FP))
	VPTEST       Y10, Y10
	SETEQ        ok+48(FP)
	VZEROUPPER
	RET
