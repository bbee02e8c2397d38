package quant

// The 32-value ggml quantizers Q4_0, Q5_0 and Q5_1 (q4_0Block, q5_0Block,
// q5_1Block) as AVX2 assembly (ggml_legacy_amd64.s), a block at a time. No
// sum decides anything in these types, so a block's elements share the
// vectors: its maximum (or minimum and maximum) is reduced across lanes,
// and ties are settled as the scalar loop settles them (the first element
// of largest magnitude; a zero minimum or maximum keeps the first zero's
// sign). The codes are Go's conversions exactly (the int32 conversion's
// low byte), the scales F16C's round to nearest even, and the error
// statistics float64 sums in the scalar order (elements j and j+16 in
// turn). The kernels stop at a block with a NaN error: Go's max decides
// those bits, so the Go code does that block.

// The kernels quantize up to nb blocks of x into y, one after another, and
// return how many they did (nb unless a block's error is NaN). With stats
// they also return the largest error of those blocks and sum plus their
// squared errors, added in order.
//
//go:noescape
func q4_0AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)

//go:noescape
func q5_0AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)

//go:noescape
func q5_1AVX2(x *float32, y *byte, nb int, stats bool, sum float64) (done int, emax, rsum float64)

// legacyBlocksVec quantizes the whole blocks of 32 at the start of x into y
// with the AVX2 kernel of typ and returns how many it did: 0 when typ has
// none, the CPU lacks AVX2, or qe's maximum is already NaN (kernelsAgree).
func legacyBlocksVec(typ string, x []float32, y []byte, qe *ErrStats) int {
	nb := len(x) / 32
	if !useAVX2 || nb == 0 || !qe.kernelsAgree() {
		return 0
	}
	var kernel func(*float32, *byte, int, bool, float64) (int, float64, float64)
	switch typ {
	case GGMLQ4_0:
		kernel = q4_0AVX2
	case GGMLQ5_0:
		kernel = q5_0AVX2
	case GGMLQ5_1:
		kernel = q5_1AVX2
	default:
		return 0
	}
	done, emax, sum := kernel(&x[0], &y[0], nb, qe != nil, qe.kernelSum())
	if done > 0 {
		qe.addKernel(emax, sum, 32*done)
	}
	return done
}
