package quant

import (
	"encoding/binary"
	"math"
)

// The 5-bit and k-quant kernels of ggml-quants.c (quantize_row_q5_0_ref,
// q5_1, q4_K, q5_K, q6_K and their helpers nearest_int, make_qx_quants,
// make_qkx2_quants), operation for operation in float32. Every product that
// feeds a sum is rounded by an explicit float32 conversion: Go may fuse
// x*y+z into one FMA on arm64 (not on amd64), and the reference has no FMA.

const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: round half to even through the float32
// mantissa (|f| <= 4194303).
func nearestInt(f float32) int32 {
	v := float32(f + 12582912)
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func absf(v float32) float32 { return float32(math.Abs(float64(v))) }

func putF16(b []byte, f float32) float32 {
	h, _ := F32ToF16(f)
	binary.LittleEndian.PutUint16(b, h)
	return F16ToF32(h)
}

// q5_0Block is quantize_row_q5_0_ref for one block: d (f16), qh[4], qs[16].
func q5_0Block(x []float32, y []byte, qe *ErrStats) {
	var amax, mx float32
	for _, v := range x {
		if a := absf(v); amax < a {
			amax, mx = a, v
		}
	}
	d := mx / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	dq := putF16(y, d)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0, x1 := float32(x[j]*id), float32(x[16+j]*id)
		xi0 := uint8(min(31, int8(float32(x0+16.5))))
		xi1 := uint8(min(31, int8(float32(x1+16.5))))
		y[6+j] = xi0&0x0f | (xi1&0x0f)<<4
		qh |= uint32(xi0&0x10) >> 4 << j
		qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		qe.add(x[j], float32(int(xi0)-16)*dq)
		qe.add(x[16+j], float32(int(xi1)-16)*dq)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

// q5_1Block is quantize_row_q5_1_ref for one block: d, m (f16), qh[4], qs[16].
func q5_1Block(x []float32, y []byte, qe *ErrStats) {
	mn, mx := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	d := (mx - mn) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	dq := putF16(y, d)
	mq := putF16(y[2:], mn)
	var qh uint32
	for j := 0; j < 16; j++ {
		x0, x1 := float32((x[j]-mn)*id), float32((x[16+j]-mn)*id)
		xi0, xi1 := uint8(float32(x0+0.5)), uint8(float32(x1+0.5))
		y[8+j] = xi0&0x0f | (xi1&0x0f)<<4
		qh |= uint32(xi0&0x10) >> 4 << j
		qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		qe.add(x[j], float32(float32(xi0)*dq)+mq)
		qe.add(x[16+j], float32(float32(xi1)*dq)+mq)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

// makeQXQuants is make_qx_quants with qw NULL.
func makeQXQuants(n, nmax int, x []float32, L []int8, rmseType int) float32 {
	var mx, amax float32
	for i := 0; i < n; i++ {
		if ax := absf(x[i]); ax > amax {
			amax, mx = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	fn := float32(nmax)
	iscale := -fn / mx
	clamp := func(l int32) int32 { return max(int32(-nmax), min(int32(nmax-1), l)) }
	if rmseType == 0 {
		for i := 0; i < n; i++ {
			L[i] = int8(int32(nmax) + clamp(nearestInt(float32(iscale*x[i]))))
		}
		return 1 / iscale
	}
	weight := func(v float32) float32 {
		switch rmseType {
		case 1:
			return float32(v * v)
		case 2:
			return 1
		case 3:
			return absf(v)
		}
		return float32(math.Sqrt(float64(absf(v))))
	}
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := clamp(nearestInt(float32(iscale * x[i])))
		L[i] = int8(l + int32(nmax))
		w, fl := weight(x[i]), float32(l)
		sumlx += float32(float32(w*x[i]) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -float32(fn+float32(0.1*float32(is))) / mx
		sumlx, suml2 = 0, 0
		for i := 0; i < n; i++ {
			l := clamp(nearestInt(float32(iscale * x[i])))
			w, fl := weight(x[i]), float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i := 0; i < n; i++ {
				L[i] = int8(int32(nmax) + clamp(nearestInt(float32(iscale*x[i]))))
			}
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// makeQKX2Quants is make_qkx2_quants (use_mad false): returns the scale
// and sets *theMin to minus the minimum.
func makeQKX2Quants(n, nmax int, x, weights []float32, L, Laux []uint8, theMin *float32, rmin, rdelta float32, nstep int) float32 {
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		*theMin = -mn
		return 0
	}
	fn := float32(nmax)
	iscale := fn / float32(mx-mn)
	scale := 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * float32(x[i]-mn)))
		L[i] = uint8(max(0, min(int32(nmax), l)))
		diff := float32(float32(float32(scale*float32(L[i]))+mn) - x[i])
		diff = float32(diff * diff)
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		*theMin = -mn
		return scale
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+fn) / float32(mx-mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := max(0, min(int32(nmax), nearestInt(float32(iscale*float32(x[i]-mn)))))
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(float32(sumW*sumL2) - float32(sumL*sumL))
		if D > 0 {
			thisScale := float32(float32(sumW*sumXL)-float32(sumX*sumL)) / D
			thisMin := float32(float32(sumL2*sumX)-float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i])
				diff = float32(diff * diff)
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				mn = thisMin
			}
		}
	}
	*theMin = -mn
	return scale
}

func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// qKBlock is quantize_row_q4_K_ref (bits 4) or quantize_row_q5_K_ref (bits
// 5) for one super-block of 256: d, dmin (f16), scales[12], [qh[32]], qs[128].
func qKBlock(bits int, x []float32, y []byte, qe *ErrStats) {
	nmax, rmin, nstep := 15, float32(-1), 20
	if bits == 5 {
		nmax, rmin, nstep = 31, -0.5, 15
	}
	var L [256]uint8
	var mins, scales [8]float32
	var lanes kqArgs
	if !qkx2Lanes(&lanes, x, nmax, rmin, 0.1, nstep, L[:], scales[:], mins[:]) {
		var Laux [32]uint8
		var weights [32]float32
		for j := 0; j < 8; j++ {
			xs := x[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			avX := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range xs {
				weights[l] = avX + absf(v)
			}
			scales[j] = makeQKX2Quants(32, nmax, xs, weights[:], L[32*j:], Laux[:], &mins[j], rmin, 0.1, nstep)
		}
	}
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0x0f | (lm&0x0f)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	d := putF16(y, maxScale/63)
	dmin := putF16(y[2:], maxMin/63)
	for j := 0; j < 8; j++ {
		s, m := getScaleMinK4(j, sc)
		dd := float32(d * float32(s))
		if dd == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt(float32(x[32*j+ii]+dm) / dd)
			L[32*j+ii] = uint8(max(0, min(int32(nmax), l)))
		}
	}
	if qe != nil {
		var deq [256]float32
		for j := 0; j < 8; j++ {
			s, m := getScaleMinK4(j, sc)
			dd, dm := float32(d*float32(s)), float32(dmin*float32(m))
			for ii := 0; ii < 32; ii++ {
				deq[32*j+ii] = float32(dd*float32(L[32*j+ii])) - dm
			}
		}
		qe.addAll(x[:256], deq[:])
	}
	if bits == 4 {
		q := y[16:]
		for j := 0; j < 256; j += 64 {
			for l := 0; l < 32; l++ {
				q[l] = L[j+l] | L[j+l+32]<<4
			}
			q = q[32:]
		}
		return
	}
	qh, ql := y[16:48], y[48:]
	for i := range qh {
		qh[i] = 0
	}
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < 256; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
		ql = ql[32:]
	}
}

// q6_KBlock is quantize_row_q6_K_ref for one super-block of 256:
// ql[128], qh[64], scales[16] (int8), d (f16).
func q6_KBlock(x []float32, y []byte, qe *ErrStats) {
	var L [256]int8
	var scales [16]float32
	var lanes kqArgs
	for half := 0; half < 256; half += 128 {
		if !qxLanes(&lanes, x[half:half+128], 32, L[half:half+128], scales[half/16:half/16+8]) {
			for ib := half / 16; ib < half/16+8; ib++ {
				scales[ib] = makeQXQuants(16, 32, x[16*ib:], L[16*ib:], 1)
			}
		}
	}
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		s := scales[ib]
		if a := absf(s); a > maxAbsScale {
			maxAbsScale, maxScale = a, s
		}
	}
	if maxAbsScale < groupMaxEps {
		for i := range y[:210] {
			y[i] = 0
		}
		for _, v := range x[:256] {
			qe.add(v, 0)
		}
		return
	}
	iscale := -128 / maxScale
	d := putF16(y[208:], 1/iscale)
	sc := y[192:208]
	for ib := 0; ib < 16; ib++ {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	for j := 0; j < 16; j++ {
		dd := float32(d * float32(int8(sc[j])))
		if dd == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := nearestInt(x[16*j+ii] / dd)
			L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
		}
	}
	if qe != nil {
		var deq [256]float32
		for j := 0; j < 16; j++ {
			dd := float32(d * float32(int8(sc[j])))
			for ii := 0; ii < 16; ii++ {
				deq[16*j+ii] = float32(dd * float32(int(L[16*j+ii])-32))
			}
		}
		qe.addAll(x[:256], deq[:])
	}
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1 := uint8(L[j+l]) & 0x0f
			q2 := uint8(L[j+l+32]) & 0x0f
			q3 := uint8(L[j+l+64]) & 0x0f
			q4 := uint8(L[j+l+96]) & 0x0f
			ql[l] = q1 | q3<<4
			ql[l+32] = q2 | q4<<4
			qh[l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
		}
		ql = ql[64:]
		qh = qh[32:]
	}
}
