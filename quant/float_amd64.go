package quant

// The assembly kernels in float_amd64.s. n must be a multiple of 8 (16 for
// encodeBF16AVX2) and the pointers must address n elements.

//go:noescape
func decodeBF16AVX2(dst *float32, src *byte, n int)

//go:noescape
func decodeF16AVX2(dst *float32, src *byte, n int)

//go:noescape
func encodeF16AVX2(dst *byte, src *float32, n int) (overflows int)

//go:noescape
func encodeBF16AVX2(dst *byte, src *float32, n int)

//go:noescape
func castBF16F16AVX2(dst *byte, src *byte, n int) (overflows int)

// The *Vec helpers run the assembly on the longest prefix it handles and
// return how many elements they converted; the Go loops do the rest.
// Callers have already checked that len(src) and len(dst) agree.

func decodeBF16Vec(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	decodeBF16AVX2(&dst[0], &src[0], n)
	return n
}

func decodeF16Vec(dst []float32, src []byte) int {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	decodeF16AVX2(&dst[0], &src[0], n)
	return n
}

func encodeF16Vec(dst []byte, src []float32) (done, overflows int) {
	n := len(src) &^ 7
	if !useAVX2 || n == 0 {
		return 0, 0
	}
	return n, encodeF16AVX2(&dst[0], &src[0], n)
}

func encodeBF16Vec(dst []byte, src []float32) int {
	n := len(src) &^ 15
	if !useAVX2 || n == 0 {
		return 0
	}
	encodeBF16AVX2(&dst[0], &src[0], n)
	return n
}

func castBF16F16Vec(dst, src []byte) (done, overflows int) {
	n := len(src) / 2 &^ 15
	if !useAVX2 || n == 0 {
		return 0, 0
	}
	return n, castBF16F16AVX2(&dst[0], &src[0], n)
}
