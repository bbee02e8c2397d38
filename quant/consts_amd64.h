// Read-only 32-byte vector constants for the AVX2 kernels: CONST8 repeats
// one 8-byte pattern, CONST32 gives all four.

#define CONST8(name, v) \
	DATA name<>+0x00(SB)/8, $v; \
	DATA name<>+0x08(SB)/8, $v; \
	DATA name<>+0x10(SB)/8, $v; \
	DATA name<>+0x18(SB)/8, $v; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

#define CONST32(name, a, b, c, d) \
	DATA name<>+0x00(SB)/8, $a; \
	DATA name<>+0x08(SB)/8, $b; \
	DATA name<>+0x10(SB)/8, $c; \
	DATA name<>+0x18(SB)/8, $d; \
	GLOBL name<>(SB), RODATA|NOPTR, $32
