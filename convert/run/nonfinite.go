package run

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// What a NaN or an infinity in the source means depends on the output:
//
//   - A float output (a copy, a cast to bf16/f16/f32, a norm's +1) keeps it:
//     the value is what the checkpoint holds. Each tensor's record counts
//     the NaN and infinite values it stores (source ones kept, plus the f16
//     overflows, which F16Overflows counts on their own); export notes them
//     and verify reports them.
//   - A quantized output (MLX affine, NNCF) cannot represent one: scales,
//     codes and the error statistics would all be garbage. The export is
//     refused as soon as such a value reaches the quantizer, before anything
//     is renamed into place, naming the source shard and tensor, the first
//     offending element and how many there are. NNCF compresses the f16
//     cast of the weights, so a finite value beyond the f16 range (65504),
//     which that cast makes infinite, refuses the export the same way.

// errNonFinite marks a quantized chunk whose values were not all finite,
// before or after the cast, or whose error statistics were not; Run
// replaces it with a full description (explainNonFinite).
type errNonFinite struct{ t *plan.OutTensor }

func (e *errNonFinite) Error() string {
	return fmt.Sprintf("tensor %s: NaN or infinite values reached the quantizer", e.t.Name)
}

// checkFinite runs on every chunk once transformed. For a quantized tensor
// it refuses NaN or infinite source values, f16 overflows of the cast and
// error statistics that are not finite (a group spanning more than the
// float32 range has an infinite scale); for a float tensor it counts the
// NaN and infinite values stored. Both scan the bytes a word at a time.
func (s *tensorState) checkFinite(inType st.DType, raw []byte, pieces []codec.Piece, overflows int, qe *quant.ErrStats) (int64, error) {
	if st.DType(s.t.DType).IsSignedInt() { // an index buffer: no float to judge
		return 0, nil
	}
	if s.t.Quant == nil {
		if len(pieces) != 1 {
			return 0, fmt.Errorf("tensor %s: %d pieces for a float tensor", s.t.Name, len(pieces))
		}
		n, err := quant.CountNonFinite(string(s.t.DType), pieces[0].Data)
		return int64(n), err
	}
	bad, err := quant.CountNonFinite(string(inType), raw)
	if err != nil {
		return 0, err
	}
	if bad > 0 || overflows > 0 || !finite(qe.Max) || !finite(qe.SumSq) {
		return 0, &errNonFinite{s.t}
	}
	return 0, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func quantName(q *plan.Quant) string {
	if q == nil {
		return "float"
	}
	return fmt.Sprintf("%s %d-bit", q.Mode, q.Bits)
}

// nonFiniteSource is what a scan found in one source tensor.
type nonFiniteSource struct {
	tensor                        *st.Tensor
	plusOne                       bool
	castTo                        st.DType // the output dtype, when it differs from the source's
	bad, over                     int64    // NaN/Inf values; finite values the cast makes infinite
	firstBad, firstOver           int64
	firstBadValue, firstOverValue float32
}

// explainNonFinite turns a chunk's errNonFinite into an error naming, for
// every source tensor of the refused output, its shard, the count of
// offending values and the first one, found by streaming those source
// tensors once more. Other errors pass through.
func explainNonFinite(ck *st.Checkpoint, err error) error {
	var nf *errNonFinite
	if !errors.As(err, &nf) {
		return err
	}
	t := nf.t
	var lines []string
	more := 0
	seen := map[string]bool{}
	for _, seg := range t.Segments {
		name := seg.Source
		if seen[name] {
			continue
		}
		seen[name] = true
		src := ck.Tensors[name]
		r := &nonFiniteSource{tensor: src, plusOne: t.Has(plan.TNormPlusOne)}
		if src.DType != t.DType {
			r.castTo = t.DType
		}
		if serr := r.scan(ck, seg); serr != nil {
			return fmt.Errorf("%w (and rescanning %s failed: %v)", err, name, serr)
		}
		if r.bad == 0 && r.over == 0 {
			continue
		}
		if len(lines) == model.MaxListed {
			more++
			continue
		}
		lines = append(lines, r.describe())
	}
	if len(lines) == 0 {
		// Every value is finite, before and after the cast: their range is not.
		return fmt.Errorf("tensor %s: its values (from %s) span more than the float32 range, so its quantization scales and error would be infinite; it cannot be quantized (%s): export it at a float precision",
			t.Name, strings.Join(model.CapList(t.Sources(), "tensors"), ", "), quantName(t.Quant))
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("and %d more source tensors", more))
	}
	why := t.Quant.Codec().NonFinite()
	return fmt.Errorf("%s; %s is to be quantized (%s), and %s: export it at a float precision or repair the checkpoint",
		strings.Join(lines, "; "), t.Name, quantName(t.Quant), why)
}

// scan streams the whole source tensor, decoded to float32 by the shared
// row reader (an FP8 weight with the block scales of seg), counting NaN and
// infinite values and finite values that the output cast (after the norm's
// +1, if any) makes infinite.
func (r *nonFiniteSource) scan(ck *st.Checkpoint, seg plan.Segment) error {
	src := r.tensor
	rowLen := int64(1)
	if len(src.Shape) > 0 {
		rowLen = max(1, src.Shape[len(src.Shape)-1])
	}
	if seg.Packed != "" { // two values a byte
		rowLen *= 2
	}
	whole := plan.Segment{Source: src.Name, Rows: seg.SourceRows(src, rowLen), Scale: seg.Scale, Block: seg.Block, ShardRows: seg.ShardRows, Packed: seg.Packed}
	rd := rows.NewReader(ck)
	step := max(1, (1<<20)/rowLen)
	var vals []float32
	for row := int64(0); row < whole.Rows; row += step {
		n := min(step, whole.Rows-row)
		raw, err := rd.Raw(whole, rowLen, row, n)
		if err != nil {
			return err
		}
		vals = grow(vals, n*rowLen)
		if err := rd.Decode(whole, rowLen, row, n, raw, vals); err != nil {
			return err
		}
		for i, v := range vals {
			idx := row*rowLen + int64(i)
			if r.plusOne {
				v += 1
			}
			switch {
			case math.IsNaN(float64(v)) || math.IsInf(float64(v), 0):
				if r.bad == 0 {
					r.firstBad, r.firstBadValue = idx, v
				}
				r.bad++
			case castOverflows(r.castTo, v):
				if r.over == 0 {
					r.firstOver, r.firstOverValue = idx, v
				}
				r.over++
			}
		}
	}
	return nil
}

// castOverflows reports whether a finite value becomes infinite in dtype
// ("" for no cast).
func castOverflows(dtype st.DType, v float32) bool {
	switch dtype {
	case st.F16:
		_, of := quant.F32ToF16(v)
		return of
	case st.BF16:
		return quant.F32ToBF16(v)&0x7f80 == 0x7f80
	}
	return false
}

func (r *nonFiniteSource) describe() string {
	src := r.tensor
	var parts []string
	if r.bad > 0 {
		parts = append(parts, fmt.Sprintf("holds %d NaN or infinite values, the first at element %d %v (%v)",
			r.bad, r.firstBad, unravel(r.firstBad, src.Shape), r.firstBadValue))
	}
	if r.over > 0 {
		verb := "holds"
		if len(parts) > 0 {
			verb = "and"
		}
		parts = append(parts, fmt.Sprintf("%s %d values beyond the %s range, the first at element %d %v (%v)",
			verb, r.over, strings.ToLower(string(r.castTo)), r.firstOver, unravel(r.firstOver, src.Shape), r.firstOverValue))
	}
	return fmt.Sprintf("%s: tensor %s %s", src.Shard.Name, src.Name, strings.Join(parts, " "))
}

// unravel turns a flat element index into its index along each dimension.
func unravel(i int64, shape []int64) []int64 {
	out := make([]int64, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			out[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return out
}
