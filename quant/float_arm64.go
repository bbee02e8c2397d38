package quant

import "unsafe"

// The NEON kernels in float_arm64.s (integer operations only). n must be a
// multiple of 8 (4 for the f16 kernels) and the pointers must address n
// elements.

//go:noescape
func decodeBF16NEON(dst *float32, src *byte, n int)

//go:noescape
func decodeF16NEON(dst *float32, src *byte, n int)

//go:noescape
func encodeBF16NEON(dst *byte, src *float32, n int)

// encodeF16NEON encodes float32 values, or bf16 values when fromBF16 is set.
//
//go:noescape
func encodeF16NEON(dst *byte, src *byte, n int, fromBF16 bool) (overflows int)

// The *Vec helpers run the assembly on the longest prefix it handles and
// return how many elements they converted; the Go loops do the rest.
// Callers have already checked that len(src) and len(dst) agree.

func decodeBF16Vec(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !useNEON || n == 0 {
		return 0
	}
	decodeBF16NEON(&dst[0], &src[0], n)
	return n
}

func encodeBF16Vec(dst []byte, src []float32) int {
	n := len(src) &^ 7
	if !useNEON || n == 0 {
		return 0
	}
	encodeBF16NEON(&dst[0], &src[0], n)
	return n
}

func decodeF16Vec(dst []float32, src []byte) int {
	n := len(dst) &^ 3
	if !useNEON || n == 0 {
		return 0
	}
	decodeF16NEON(&dst[0], &src[0], n)
	return n
}

func encodeF16Vec(dst []byte, src []float32) (done, overflows int) {
	n := len(src) &^ 3
	if !useNEON || n == 0 {
		return 0, 0
	}
	return n, encodeF16NEON(&dst[0], (*byte)(unsafe.Pointer(&src[0])), n, false)
}

func castBF16F16Vec(dst, src []byte) (done, overflows int) {
	n := len(src) / 2 &^ 3
	if !useNEON || n == 0 {
		return 0, 0
	}
	return n, encodeF16NEON(&dst[0], &src[0], n, true)
}
