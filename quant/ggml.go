package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ggml block quantization, as llama.cpp's ggml-quants.c reference kernels
// (quantize_row_*_ref) compute it; llama-quantize runs exactly these (no
// imatrix). The arithmetic is float32, in the C order, without fused
// multiply-adds: the reference library is built without FMA code
// (ggml-base gets no -march flags), so GCC's default -ffp-contract=fast has
// no instruction to contract into. Rounding: roundf is half away from zero
// (math.Round), the (int8_t) cast truncates toward zero, and the f16 scales
// round to nearest even (ggml_compute_fp32_to_fp16).

// GGML block types this package quantizes.
const (
	GGMLQ8_0 = "Q8_0"
	GGMLQ4_0 = "Q4_0"
	GGMLQ5_0 = "Q5_0"
	GGMLQ5_1 = "Q5_1"
	GGMLQ4_K = "Q4_K"
	GGMLQ5_K = "Q5_K"
	GGMLQ6_K = "Q6_K"
)

// GGMLBlock is the values per block and bytes per block of a type.
func GGMLBlock(typ string) (values, bytes int, err error) {
	switch typ {
	case GGMLQ8_0:
		return 32, 34, nil
	case GGMLQ4_0:
		return 32, 18, nil
	case GGMLQ5_0:
		return 32, 22, nil
	case GGMLQ5_1:
		return 32, 24, nil
	case GGMLQ4_K:
		return 256, 144, nil
	case GGMLQ5_K:
		return 256, 176, nil
	case GGMLQ6_K:
		return 256, 210, nil
	}
	return 0, 0, fmt.Errorf("ggml type %q is not one mtpconv quantizes", typ)
}

// QuantizeGGML quantizes rows of rowLen values into ggml blocks of typ,
// appending to dst; qe, when set, accumulates the error of the dequantized values.
func QuantizeGGML(typ string, vals []float32, rowLen int, dst []byte, qe *ErrStats) ([]byte, error) {
	qk, bs, err := GGMLBlock(typ)
	if err != nil {
		return dst, err
	}
	if rowLen%qk != 0 || len(vals)%rowLen != 0 {
		return dst, fmt.Errorf("%s: rows of %d values are not whole blocks of %d", typ, rowLen, qk)
	}
	nb := len(vals) / qk
	start := len(dst)
	dst = append(dst, make([]byte, nb*bs)...)
	out := dst[start:]
	for i := 0; i < nb; i++ {
		// The AVX2 kernels of the 32-value types take the blocks they can;
		// the Go code does the one they stop at.
		if i += legacyBlocksVec(typ, vals[i*qk:], out[i*bs:], qe); i == nb {
			break
		}
		x := vals[i*qk : (i+1)*qk]
		y := out[i*bs : (i+1)*bs]
		switch typ {
		case GGMLQ8_0:
			q8_0Block(x, y, qe)
		case GGMLQ4_0:
			q4_0Block(x, y, qe)
		case GGMLQ5_0:
			q5_0Block(x, y, qe)
		case GGMLQ5_1:
			q5_1Block(x, y, qe)
		case GGMLQ4_K:
			qKBlock(4, x, y, qe)
		case GGMLQ5_K:
			qKBlock(5, x, y, qe)
		case GGMLQ6_K:
			q6_KBlock(x, y, qe)
		}
	}
	return dst, nil
}

func f16Scale(d float32) (uint16, float32) {
	h, _ := F32ToF16(d)
	return h, F16ToF32(h)
}

// addAll is add for each x[i] and deq[i] in turn, by the AVX2 kernel when
// its bits are the same: while the maximum and every error are not NaN.
func (s *ErrStats) addAll(x, deq []float32) {
	if useAVX2 && len(x) > 0 && len(x)%4 == 0 && s.kernelsAgree() {
		if emax, sum, ok := errStatsAVX2(&x[0], &deq[0], len(x), s.SumSq); ok {
			s.addKernel(emax, sum, len(x))
			return
		}
	}
	for i, v := range x {
		s.add(v, deq[i])
	}
}

// kernelsAgree: the assembly's statistics are add's bits only while the
// maximum is not NaN (Go's max on amd64 ORs the bits of later values into a
// NaN maximum); no statistics (nil) always agree.
func (s *ErrStats) kernelsAgree() bool { return s == nil || s.Max == s.Max }

// kernelSum is the sum of squares a kernel continues from (0 for nil).
func (s *ErrStats) kernelSum() float64 {
	if s == nil {
		return 0
	}
	return s.SumSq
}

// addKernel records n errors a kernel added in order: emax the largest, sum
// the sum of squares it continued from kernelSum.
func (s *ErrStats) addKernel(emax, sum float64, n int) {
	if s == nil {
		return
	}
	s.Max = max(s.Max, emax)
	s.SumSq = sum
	s.N += int64(n)
}

func (s *ErrStats) add(x, deq float32) {
	if s == nil {
		return
	}
	e := math.Abs(float64(x) - float64(deq))
	s.Max = max(s.Max, e)
	s.SumSq += float64(e * e) // rounded: no FMA on arm64 either, so manifests agree across machines
	s.N++
}

// q8_0Block is quantize_row_q8_0_ref for one block of 32.
func q8_0Block(x []float32, y []byte, qe *ErrStats) {
	amax, ok := absMaxVec(x) // equal to the loop's when no element is NaN
	if !ok {
		amax = 0
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	h, dq := f16Scale(d)
	binary.LittleEndian.PutUint16(y, h)
	if useAVX2 && ok && !math.IsInf(float64(id), 0) && !math.IsInf(float64(dq), 0) && qe.kernelsAgree() {
		// Finite values with a finite id and scale: every code is in
		// [-127, 127] and every error finite. (Otherwise codes of
		// infinities and NaNs, which the vector conversion saturates
		// differently, and NaN errors.)
		emax, sum := q8_0AVX2(&x[0], &y[2], id, dq, qe.kernelSum())
		qe.addKernel(emax, sum, 32)
		return
	}
	for j, v := range x {
		x0 := float32(v * id)
		q := int8(math.Round(float64(x0)))
		y[2+j] = byte(q)
		qe.add(v, float32(q)*dq)
	}
}

// q4_0Block is quantize_row_q4_0_ref for one block of 32: scale max / -8
// (max the value of largest magnitude, first one on ties), codes
// min(15, (int8)(x*id + 8.5)), element j in the low nibble of byte j and
// element j+16 in its high nibble.
func q4_0Block(x []float32, y []byte, qe *ErrStats) {
	var amax, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, mx = a, v
		}
	}
	d := mx / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	h, dq := f16Scale(d)
	binary.LittleEndian.PutUint16(y, h)
	code := func(v float32) int8 {
		x0 := float32(v * id)
		return min(15, int8(float32(x0+8.5)))
	}
	for j := 0; j < 16; j++ {
		c0, c1 := code(x[j]), code(x[16+j])
		y[2+j] = byte(c0) | byte(c1)<<4
		qe.add(x[j], float32(c0-8)*dq)
		qe.add(x[16+j], float32(c1-8)*dq)
	}
}
