package quant

// The NEON kernels in kernels_arm64.s, behind the arch-neutral entry points
// (see kernels_amd64.go). Only integer work has NEON code: the quantizers'
// float arithmetic stays in Go on arm64.

//go:noescape
func absMaxNEON(x *float32, n int) (m float32, ok bool)

//go:noescape
func packNibblesNEON(src *byte, n int, dst *byte)

//go:noescape
func packCodesNEON(src *byte, n int, dst *byte, bits int, idx *[16]byte)

func absMaxVec(x []float32) (m float32, ok bool) {
	if !useNEON || len(x) == 0 || len(x)%8 != 0 {
		return 0, false
	}
	return absMaxNEON(&x[0], len(x))
}

// packNibblesVec takes multiples of 16 codes (an nvfp4 group).
func packNibblesVec(codes []uint8, dst []byte) int {
	n := len(codes) &^ 15
	if !useNEON || n == 0 {
		return 0
	}
	packNibblesNEON(&codes[0], n, &dst[0])
	return n
}

// packCodesIdx[b] gathers the two b-byte halves of a packed vector (bytes 0
// to b-1 and 8 to 8+b-1) into its first 2b bytes, zeroing the rest (a table
// index past 15 reads zero).
var packCodesIdx = func() (t [7][16]byte) {
	for b := range t {
		for i := range t[b] {
			t[b][i] = 0xff
		}
		for i := 0; i < b; i++ {
			t[b][i], t[b][b+i] = byte(i), byte(8+i)
		}
	}
	return t
}()

// packCodesVec packs the first codes (a multiple of 16) into out as
// packCodes' word loop does for 2- to 6-bit codes starting at a byte, and
// returns how many it packed. Each step stores 16 bytes of which 2*bits are
// the codes' and the rest zero, so it stops while out has 16 bytes left.
func packCodesVec(out []byte, codes []uint8, bits int) int {
	if !useNEON || bits < 2 || bits > 6 || len(out) < 16 {
		return 0
	}
	steps := min(len(codes)/16, (len(out)-16)/(2*bits)+1)
	if steps == 0 {
		return 0
	}
	packCodesNEON(&codes[0], 16*steps, &out[0], bits, &packCodesIdx[bits])
	return 16 * steps
}
