package quant

// Kernel variants (the mode argument of mlxKernelAVX2).
const (
	kernGPU     = 1 // round half away from zero (else half to even)
	kernNibbles = 2 // pack two codes a byte, element 2k in the low nibble (else a byte each)
)

// minMaxAVX2 is minMax over x[:n&^7].
//
//go:noescape
func minMaxAVX2(x *float32, n int, mn, mx float32) (rmn, rmx float32)

// mlxKernelAVX2 is mlxCodes over x[:n], n a multiple of 8, writing the codes
// to dst as mode says and the error to e (always, in its canonical form; e
// need not be zeroed before: the kernel sets all of it).
//
//go:noescape
func mlxKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr, mode int)

// nncfKernelAVX2 is nncfCodes over x[:n], n a multiple of 8, one code a
// byte, setting e as mlxKernelAVX2 does.
//
//go:noescape
func nncfKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr)

// packNibblesAVX2 is packNibbles8 for the first n&^31 codes of src.
//
//go:noescape
func packNibblesAVX2(src *byte, n int, dst *byte)

// qkx2AVX2 is makeQKX2Quants(32, ...) for the 8 groups of a, with steps
// candidates (nstep+1), the weights avX + |x| computed as qKBlock does.
//
//go:noescape
func qkx2AVX2(a *kqArgs, steps int)

// qxAVX2 is makeQXQuants(16, nmax, ..., 1) for the 8 groups of a: a.num[0]
// is -nmax, a.num[1:19] the 18 other candidates' numerators.
//
//go:noescape
func qxAVX2(a *kqArgs)

// mlxfpKernelAVX2 is QuantizeMLXFP's element loop for one group of n values
// (a multiple of 8): codes to dst (a byte each for E4M3, two a byte for
// E2M1) and the error to e, as mlxKernelAVX2 sets it; table is e4m3.
//
//go:noescape
func mlxfpKernelAVX2(x *float32, n int, dst *byte, a *fpArgs, e *groupErr, table *float32)

// absMaxAVX2 is the largest |x| of x[:n], n a multiple of 8, and whether
// no element is NaN.
//
//go:noescape
func absMaxAVX2(x *float32, n int) (m float32, ok bool)

// q8_0AVX2 is q8_0Block's codes and error for one block given a finite
// inverse scale id and the stored scale dq: the codes to y[:32], the
// largest error, and sum plus the squared errors added in order.
//
//go:noescape
func q8_0AVX2(x *float32, y *byte, id, dq float32, sum float64) (emax, rsum float64)

// errStatsAVX2 is ErrStats.add over x[:n] and deq[:n], n a multiple of 4,
// from the sum of squares sum: the largest error, the new sum, and whether
// no error was NaN.
//
//go:noescape
func errStatsAVX2(x, deq *float32, n int, sum float64) (emax, rsum float64, ok bool)

// The arch-neutral entry points (kernels_arm64.go and kernels_novec.go have
// the other architectures'): each runs the vector kernel on what it handles
// and reports how much, so that the call sites need no per-arch branches.

// absMaxVec is the largest |x| and true when the kernel ran over all of x (a
// positive multiple of 8 values) and no element is NaN; else ok is false
// and the caller's loop decides.
func absMaxVec(x []float32) (m float32, ok bool) {
	if !useAVX2 || len(x) == 0 || len(x)%8 != 0 {
		return 0, false
	}
	return absMaxAVX2(&x[0], len(x))
}

// packNibblesVec packs the first codes (a multiple of 32) as packNibbles8
// does and returns how many it packed.
func packNibblesVec(codes []uint8, dst []byte) int {
	n := len(codes) &^ 31
	if !useAVX2 || n == 0 {
		return 0
	}
	packNibblesAVX2(&codes[0], n, &dst[0])
	return n
}

// packCodesVec: on amd64 the element kernels pack 4- and 8-bit codes
// themselves and the other widths go through packCodes' word loop.
func packCodesVec(out []byte, codes []uint8, bits int) int { return 0 }
