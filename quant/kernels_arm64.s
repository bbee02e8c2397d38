//go:build arm64

#include "textflag.h"

// NEON kernels for the integer parts of the quantizers (see kernels_arm64.go):
// Go's arm64 assembler has no vector floating-point arithmetic, so only
// bit manipulation runs here. Go's operand order is ARM's reversed: VUZP1
// Vm, Vn, Vd is uzp1 vd, vn, vm.

// func absMaxNEON(x *float32, n int) (m float32, ok bool)
// Cleared of the sign, non-NaN float32 bits order as their values, and a NaN
// is above 0x7f800000: the unsigned maximum of |x| bits is the maximum, and
// ok says that no element is NaN.
TEXT ·absMaxNEON(SB), NOSPLIT, $0-21
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVW $0x7fffffff, R3
	VDUP R3, V20.S4
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	CBZ  R1, amreduce

amloop:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	VAND   V20.B16, V0.B16, V0.B16
	VAND   V20.B16, V1.B16, V1.B16
	VUMAX  V0.S4, V2.S4, V2.S4
	VUMAX  V1.S4, V3.S4, V3.S4
	SUBS   $8, R1
	BNE    amloop

amreduce:
	VUMAX V3.S4, V2.S4, V2.S4
	VEXT  $8, V2.B16, V2.B16, V3.B16
	VUMAX V3.S4, V2.S4, V2.S4
	VEXT  $4, V2.B16, V2.B16, V3.B16
	VUMAX V3.S4, V2.S4, V2.S4
	VMOV  V2.S[0], R4
	MOVW  R4, m+16(FP)
	MOVW  $0x7f800000, R5
	CMPW  R5, R4
	CSET  LS, R6
	MOVB  R6, ok+20(FP)
	RET

// func packNibblesNEON(src *byte, n int, dst *byte)
// n a multiple of 16: the even codes' low nibbles under the odd codes
// shifted up by 4 (sli keeps the destination's bits below the shift), 32
// codes a step, then 16 if n is an odd multiple of 16.
TEXT ·packNibblesNEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD n+8(FP), R1
	MOVD dst+16(FP), R2
	CMP  $32, R1
	BLT  nib16

nibloop:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VUZP1  V1.B16, V0.B16, V2.B16 // codes 0, 2, ..., 30
	VUZP2  V1.B16, V0.B16, V3.B16 // codes 1, 3, ..., 31
	VSLI   $4, V3.B16, V2.B16
	VST1.P [V2.B16], 16(R2)
	SUB    $32, R1
	CMP    $32, R1
	BGE    nibloop

nib16:
	CBZ    R1, nibdone
	VLD1   (R0), [V0.B16]
	VUZP1  V0.B16, V0.B16, V2.B16
	VUZP2  V0.B16, V0.B16, V3.B16
	VSLI   $4, V3.B16, V2.B16
	VST1   [V2.D1], (R2)

nibdone:
	RET

// PACK16(b) packs the 16 codes at R0 into 2b bytes at R2, as packCodes'
// word loop does: codes masked to b bits (V30), then neighbours joined in
// 16-, 32- and 64-bit lanes (c_lo | c_hi<<w, with sli), so that each 64-bit
// lane holds 8 codes in its low b bytes; V29 gathers those 2b bytes and
// zeroes the rest of the 16 stored (the row is zero there).
#define PACK16(b) \
	VLD1.P 16(R0), [V0.B16]; \
	VAND   V30.B16, V0.B16, V0.B16; \
	VUSHR  $8, V0.H8, V1.H8; \
	VSLI   $(b), V1.H8, V0.H8; \
	VUSHR  $16, V0.S4, V1.S4; \
	VSLI   $(2*(b)), V1.S4, V0.S4; \
	VUSHR  $32, V0.D2, V1.D2; \
	VSLI   $(4*(b)), V1.D2, V0.D2; \
	VTBL   V29.B16, [V0.B16], V2.B16; \
	VST1   [V2.B16], (R2); \
	ADD    $(2*(b)), R2

// func packCodesNEON(src *byte, n int, dst *byte, bits int, idx *[16]byte)
// n a multiple of 16, bits 2 to 6, idx the byte gather for bits; dst must
// have 16 writable bytes at each 2*bits step.
TEXT ·packCodesNEON(SB), NOSPLIT, $0-40
	MOVD src+0(FP), R0
	MOVD n+8(FP), R1
	MOVD dst+16(FP), R2
	MOVD bits+24(FP), R3
	MOVD idx+32(FP), R4
	CBZ  R1, pcdone
	VLD1 (R4), [V29.B16]
	MOVD $1, R5
	LSL  R3, R5, R5
	SUB  $1, R5
	VDUP R5, V30.B16
	CMP  $2, R3
	BEQ  pc2
	CMP  $3, R3
	BEQ  pc3
	CMP  $4, R3
	BEQ  pc4
	CMP  $5, R3
	BEQ  pc5

pc6:
	PACK16(6)
	SUBS $16, R1
	BNE  pc6
	RET

pc5:
	PACK16(5)
	SUBS $16, R1
	BNE  pc5
	RET

pc4:
	PACK16(4)
	SUBS $16, R1
	BNE  pc4
	RET

pc3:
	PACK16(3)
	SUBS $16, R1
	BNE  pc3
	RET

pc2:
	PACK16(2)
	SUBS $16, R1
	BNE  pc2

pcdone:
	RET
