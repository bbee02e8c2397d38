package quant

import "encoding/binary"

// The quantizers' inner loops come in two versions that give the same bits:
// the portable Go below and, on amd64 with AVX2 and F16C, the assembly in
// kernels_amd64.s (selected by useAVX2). The assembly handles a group's
// first len&^7 elements; the Go code finishes the rest, so any group length
// works. On arm64 only the integer parts have NEON code (kernels_arm64.go).

// kernArgs are one group's constants for the element kernels.
type kernArgs struct {
	b, s     float32 // MLX: x = (v-b)/s; NNCF: x = v/s + b (b the zero point, 0 when symmetric)
	lo1, hi1 float32 // x is clamped to [lo1, hi1] before rounding
	lo, hi   float32 // and the rounded value to the code range [lo, hi]
	dm, da   float32 // dequantization, MLX: float32(dm*q) + da; NNCF: float32((q-da) * dm)
	mask     int32   // NNCF: the code is int32(q) & mask (two's complement for symmetric modes)
	_        int32
}

// groupErr is a group's quantization error in the canonical form both paths
// produce, so that the statistics in a manifest do not depend on the CPU.
// Element i of the group (from 0) with input v and dequantized value deq, all
// float32 and without fused multiply-add, contributes d = |deq - v| to lane
// i%8: max[i%8] = max(max[i%8], d) and sq[i%8] += float32(d*d), in increasing
// i. The group's maximum is the largest lane maximum and its sum of squares
// float64(sq[0]) + ... + float64(sq[7]), added left to right in float64.
type groupErr struct {
	sq  [8]float32
	max [8]float32
	// The group's maximum and sum of squares, valid when reduced is set
	// (the assembly sets it; adding an element clears it).
	gsum    float64
	gmax    float32
	reduced bool
}

func (e *groupErr) add(i int, d float32) {
	k := i & 7
	if d > e.max[k] {
		e.max[k] = d
	}
	e.sq[k] += float32(d * d)
}

// merge adds the group to s.
func (e *groupErr) merge(s *ErrStats, n int) {
	if !e.reduced {
		e.reduce()
	}
	s.mergeGroup(e.gmax, e.gsum, n)
}

func (e *groupErr) reduce() {
	var m float32
	var sum float64
	for k := range e.sq {
		m = max(m, e.max[k]) // never NaN nor -0
		sum += float64(e.sq[k])
	}
	e.gmax, e.gsum, e.reduced = m, sum, true
}

// minMax returns the minimum and maximum of x and the starting values mn and
// mx, with plain comparisons (a NaN element is skipped; a NaN start stays).
func minMax(x []float32, mn, mx float32) (float32, float32) {
	i := 0
	if useAVX2 && len(x) >= 8 {
		mn, mx = minMaxAVX2(&x[0], len(x), mn, mx)
		i = len(x) &^ 7
	}
	for _, v := range x[i:] {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx
}

// mlxCode quantizes one value as MLX does. For cpu rounding the quotient is
// limited to [-1, nBins+1] before rounding: the clamped code is unchanged, and
// small values round with plain float32 arithmetic. (The assembly clamps the
// quotient for gpu rounding too, which changes no code either.)
func mlxCode(v float32, k *kernArgs, gpu bool) uint8 {
	if gpu {
		return uint8(clamp(roundHalfAway((v-k.b)/k.s), k.lo, k.hi))
	}
	return uint8(clamp(roundEvenSmall(clamp(float32((v-k.b)/k.s), k.lo1, k.hi1)), k.lo, k.hi))
}

// mlxCodes writes the codes of grp from element i on into codes and, when
// e is not nil, adds their error.
func mlxCodes(grp []float32, i int, k *kernArgs, gpu bool, codes []uint8, e *groupErr) {
	if e != nil && i < len(grp) {
		e.reduced = false
	}
	for ; i < len(grp); i++ {
		v := grp[i]
		c := mlxCode(v, k, gpu)
		codes[i] = c
		if e != nil {
			deq := float32(k.dm*float32(c)) + k.da
			e.add(i, abs32f(deq-v))
		}
	}
}

// nncfCodes writes the codes of grp from element i on into out and adds
// their error. For a symmetric mode b and da are 0, which changes no bit:
// v/s + 0 differs from v/s only for -0, which rounds to the same code, and
// q - 0 is q.
func nncfCodes(grp []float32, i int, k *kernArgs, out []uint8, e *groupErr) {
	if i < len(grp) {
		e.reduced = false
	}
	for ; i < len(grp); i++ {
		v := grp[i]
		q := clamp(roundEvenSmall(clamp(float32(float32(v/k.s)+k.b), k.lo1, k.hi1)), k.lo, k.hi)
		out[i] = uint8(int32(q) & k.mask)
		deq := float32((q - k.da) * k.dm)
		e.add(i, abs32f(deq-v))
	}
}

// packNibbles8 packs 8n codes two per byte, element 2k in the low nibble.
func packNibbles8(codes []uint8, dst []byte) {
	for i := 0; i+8 <= len(codes); i += 8 {
		x := binary.LittleEndian.Uint64(codes[i:]) & 0x0f0f0f0f0f0f0f0f
		x = (x | x>>4) & 0x00ff00ff00ff00ff
		x = (x | x>>8) & 0x0000ffff0000ffff
		x |= x >> 16
		binary.LittleEndian.PutUint32(dst[i/2:], uint32(x))
	}
}
