package quant

// The NEON kernels in float_arm64.s. n must be a multiple of 8 and the
// pointers must address n elements. Only the bf16 casts are integer
// operations; f16 decoding and encoding stay in Go (see float_arm64.s).

//go:noescape
func decodeBF16NEON(dst *float32, src *byte, n int)

//go:noescape
func encodeBF16NEON(dst *byte, src *float32, n int)

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

func decodeF16Vec(dst []float32, src []byte) int                   { return 0 }
func encodeF16Vec(dst []byte, src []float32) (done, overflows int) { return 0, 0 }
func castBF16F16Vec(dst, src []byte) (done, overflows int)         { return 0, 0 }
