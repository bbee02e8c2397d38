// The ggml kernels' error statistics (ErrStats.add), shared by
// ggml_amd64.s and ggml_legacy_amd64.s; include consts_amd64.h first.

CONST8(errAbs64, 0x7fffffffffffffff)

// The errors |float64(v) - float64(d)| of four values (v and d float32, in
// X registers) into y (x its X form), t (tx) a temporary: their maxima into
// emax, NaN flags into Y10, and their squares added to X8 one at a time,
// in element order.
#define ERR4(v, d, y, x, t, tx, emax) \
	VCVTPS2PD    v, y; \
	VCVTPS2PD    d, t; \
	VSUBPD       t, y, y; \
	VANDPD       errAbs64<>(SB), y, y; \
	VMAXPD       emax, y, emax; \
	VCMPPD       $3, y, y, t; \
	VORPD        t, Y10, Y10; \
	VMULPD       y, y, y; \
	VADDSD       x, X8, X8; \
	VPERMILPD    $1, x, tx; \
	VADDSD       tx, X8, X8; \
	VEXTRACTF128 $1, y, x; \
	VADDSD       x, X8, X8; \
	VPERMILPD    $1, x, tx; \
	VADDSD       tx, X8, X8

// The largest of the maxima Y9 to emax and the sum X8 to rsum (X2 a
// temporary).
#define STORE_ERR(emax, rsum) \
	VEXTRACTF128 $1, Y9, X2; \
	VMAXPD       X2, X9, X9; \
	VPERMILPD    $1, X9, X2; \
	VMAXPD       X2, X9, X9; \
	VMOVSD       X9, emax; \
	VMOVSD       X8, rsum
