package quant

// The k-quants' scale searches (makeQKX2Quants for Q4_K and Q5_K,
// makeQXQuants for Q6_K) on eight groups at once: on amd64 with AVX2 the
// assembly in ggml_amd64.s runs them with one group per vector lane, so each
// lane performs exactly the scalar code's operations in its order (sums
// element by element, no fused multiply-add) and the results are the same
// bits. A super-block with a NaN stays on the Go code: two different NaN
// payloads meeting in one operation would propagate as the compiler's
// operand order says, which the assembly need not follow; every other value
// (infinities, and the default NaNs they make) behaves the same in both.

// kqArgs is one call of the search kernels: eight groups, transposed.
type kqArgs struct {
	x    [256]float32 // x[8i+k] is element i of group k
	w    [256]float32 // qkx2: the weights, set by the kernel
	l    [256]int32   // the chosen codes, transposed as x
	laux [256]int32   // a candidate's codes
	num  [24]float32  // the numerator of each candidate's inverse scale
	nmax [8]int32     // the largest code (qx: codes are -nmax..nmax-1, stored + nmax)

	// per-group state and results, one lane per group
	scale, min, mn, mx, sumW, sumX, best, flat [8]float32
}

// load transposes 8 groups of n values from x (group k at x[k*n:]) and
// reports whether the kernel may run them (no NaN).
func (a *kqArgs) load(x []float32, n int) bool {
	ok := true
	for k := range 8 {
		g := x[k*n : k*n+n]
		for i, v := range g {
			a.x[8*i+k] = v
			ok = ok && v == v
		}
	}
	return ok
}

// qkx2Lanes runs makeQKX2Quants(32, nmax, x, weights, ...) for the 8 groups
// of 32 of one super-block, the weights being avX + |x| as qKBlock sets them.
func qkx2Lanes(a *kqArgs, x []float32, nmax int, rmin, rdelta float32, nstep int, L []uint8, scales, mins []float32) bool {
	if !useAVX2 || !a.load(x, 32) {
		return false
	}
	fn := float32(nmax)
	for is := 0; is <= nstep; is++ {
		a.num[is] = float32(float32(rmin+float32(rdelta*float32(is))) + fn)
	}
	for k := range a.nmax {
		a.nmax[k] = int32(nmax)
	}
	qkx2AVX2(a, nstep+1)
	for k := range 8 {
		for i := range 32 {
			L[32*k+i] = uint8(a.l[8*i+k])
		}
	}
	copy(scales, a.scale[:])
	copy(mins, a.min[:])
	return true
}

// qxLanes runs makeQXQuants(16, nmax, x, L, 1) for 8 groups of 16.
func qxLanes(a *kqArgs, x []float32, nmax int, L []int8, scales []float32) bool {
	if !useAVX2 || !a.load(x, 16) {
		return false
	}
	fn := float32(nmax)
	a.num[0] = -fn
	for is, j := -9, 1; is <= 9; is++ {
		if is != 0 {
			a.num[j] = -float32(fn + float32(0.1*float32(is)))
			j++
		}
	}
	for k := range a.nmax {
		a.nmax[k] = int32(nmax)
	}
	qxAVX2(a)
	for k := range 8 {
		for i := range 16 {
			L[16*k+i] = int8(a.l[8*i+k])
		}
	}
	copy(scales, a.scale[:])
	return true
}
