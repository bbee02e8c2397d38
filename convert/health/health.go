// Package health judges whether an MTP head can draft from its stored
// values: the quantization error of every head tensor against its source,
// the two halves of the concat projection on their own (a per-row int4
// eh_proj rounds the whole embedding half to zero: its columns are 20-30x
// smaller than the hidden half's, and the head then loads and drafts at
// about 0 %), all-zero, constant and non-finite tensors, and RMSNorm weights
// whose centre says the family's +1 was applied twice or not at all. The
// export, verify and inspect gather Stats over dequantized rows and ask
// this package; the thresholds and why are in docs/gguf.md#head-health.
package health

import (
	"fmt"
	"math"
	"slices"
)

// The thresholds.
const (
	// LostError is the relative RMS error at which a half of the concat
	// projection has lost its signal. Rounding every value to zero gives
	// 1.0 (per-row int4 at a 25x column-scale ratio measures 1.00, MLX's
	// nvfp4 on small weights 0.68 to 1.00, its group scales underflowing);
	// the coarsest precision we write, 2-bit affine, stays at 0.33 to 0.43
	// on both halves alike.
	LostError = 0.6
	// LostRows is the share of a half's rows that dequantize to all zeros
	// (where the source's were not) at which the half is lost.
	LostRows = 0.5
	// DegradedRatio and DegradedError: a half whose error is this many
	// times the other half's and at least DegradedError is the head's
	// bottleneck, which its precision alone would not be (per-row int8 at a
	// 25x ratio: 0.20 against 0.008 at hidden 2048, 0.09 against 0.004 at
	// hidden 64; reported acceptance 39-59 %); the export notes it and
	// writes the head.
	DegradedRatio = 4
	DegradedError = 0.05
	// LostScaleRatio: without a source, a half whose RMS is below this
	// share of the other half's is taken as rounded away (real heads'
	// embedding halves are 1/20 to 1/30 of their hidden halves).
	LostScaleRatio = 1e-3
	// NormTolerance is how far a norm's median may lie from the centre
	// its convention expects (real heads' norm weights spread well within
	// it; a missing or doubled +1 moves the centre by 1).
	NormTolerance = 0.5
)

// Part is a run of input columns of a tensor, judged on its own: a half of
// the concat projection.
type Part struct {
	Name string `json:"name"` // PartEmbedding or PartHidden
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

// The halves of the concat projection's input.
const (
	PartEmbedding = "embedding"
	PartHidden    = "hidden"
)

// ConcatParts are the halves of a concat projection whose rows are rowLen
// long: fc(concat(embedding, hidden)), or hidden first.
func ConcatParts(rowLen int64, embeddingFirst bool) []Part {
	h := rowLen / 2
	first, second := PartEmbedding, PartHidden
	if !embeddingFirst {
		first, second = second, first
	}
	return []Part{{first, 0, h}, {second, h, rowLen}}
}

// Stats accumulate a tensor's stored values (dequantized), and their error
// against the source's values when those are known, overall and per part.
type Stats struct {
	N, NonFinite        int64
	Min, Max            float64
	SumSq, RefSq, ErrSq float64
	Parts               []PartStats
	norm                []float32 // a norm's values, for its median
	keep                bool
}

// PartStats are one part's sums.
type PartStats struct {
	Part
	Rows, ZeroRows      int64 // ZeroRows: rows all zero (with a source: where the source's were not)
	SumSq, RefSq, ErrSq float64
}

// NewStats starts the statistics of a tensor; keepValues keeps the values
// (a norm's, for its median).
func NewStats(parts []Part, keepValues bool) *Stats {
	s := &Stats{Min: math.Inf(1), Max: math.Inf(-1), keep: keepValues}
	for _, p := range parts {
		s.Parts = append(s.Parts, PartStats{Part: p})
	}
	return s
}

// Add takes rows of rowLen stored values and, when want is not nil, the
// source values they stand for.
func (s *Stats) Add(got, want []float32, rowLen int64) {
	for i, v := range got {
		x := float64(v)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			s.NonFinite++
			continue
		}
		s.N++
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		s.SumSq += x * x
		if want != nil {
			w := float64(want[i])
			s.RefSq += w * w
			s.ErrSq += (x - w) * (x - w)
		}
	}
	if s.keep {
		s.norm = append(s.norm, got...)
	}
	for pi := range s.Parts {
		p := &s.Parts[pi]
		for r := int64(0); r+rowLen <= int64(len(got)); r += rowLen {
			g := got[r+p.From : r+p.To]
			p.Rows++
			zero, srcZero := true, true
			for j, v := range g {
				x := float64(v)
				zero = zero && v == 0
				p.SumSq += x * x
				if want != nil {
					w := float64(want[r+p.From+int64(j)])
					srcZero = srcZero && w == 0
					p.RefSq += w * w
					p.ErrSq += (x - w) * (x - w)
				}
			}
			if zero && (want == nil || !srcZero) {
				p.ZeroRows++
			}
		}
	}
}

// Merge adds another chunk's statistics of the same tensor (in order).
func (s *Stats) Merge(o *Stats) {
	s.N += o.N
	s.NonFinite += o.NonFinite
	s.Min, s.Max = min(s.Min, o.Min), max(s.Max, o.Max)
	s.SumSq += o.SumSq
	s.RefSq += o.RefSq
	s.ErrSq += o.ErrSq
	s.norm = append(s.norm, o.norm...)
	for i := range s.Parts {
		p, q := &s.Parts[i], o.Parts[i]
		p.Rows += q.Rows
		p.ZeroRows += q.ZeroRows
		p.SumSq += q.SumSq
		p.RefSq += q.RefSq
		p.ErrSq += q.ErrSq
	}
}

// RelError is the relative RMS error sqrt(Σ(got-want)² / Σwant²): 0 for a
// tensor stored exactly, 1 for one stored as zeros.
func RelError(errSq, refSq float64) float64 {
	switch {
	case errSq == 0:
		return 0
	case refSq == 0:
		return 1 // a zero source stored as non-zeros: as wrong as zeros
	}
	return math.Sqrt(errSq / refSq)
}

// PartError is one part's error against the source, as manifests record it.
type PartError struct {
	Part
	RelRMS   float64 `json:"rel_rms"`
	Rows     int64   `json:"rows"`
	ZeroRows int64   `json:"zero_rows,omitempty"` // rows stored all zero where the source's were not
}

// PartErrors are the parts' errors.
func (s *Stats) PartErrors() []PartError {
	var out []PartError
	for _, p := range s.Parts {
		out = append(out, PartError{Part: p.Part, RelRMS: RelError(p.ErrSq, p.RefSq), Rows: p.Rows, ZeroRows: p.ZeroRows})
	}
	return out
}

// Verdict is what the errors of a concat projection's parts say.
type Verdict struct {
	Lost     []string // a half lost: the head cannot draft
	Degraded []string // a half much worse than the other
}

// JudgeErrors judges the parts' errors of tensor against its source.
func JudgeErrors(tensor string, parts []PartError) Verdict {
	var v Verdict
	for i, p := range parts {
		switch {
		case p.RelRMS >= LostError:
			v.Lost = append(v.Lost, fmt.Sprintf("%s: its %s half's quantization error is %.2f (relative RMS: 1.00 is every value rounded to zero; lost from %.1f)%s",
				tensor, p.Name, p.RelRMS, LostError, others(parts, i)))
		case p.Rows > 0 && float64(p.ZeroRows) >= LostRows*float64(p.Rows):
			v.Lost = append(v.Lost, fmt.Sprintf("%s: %d of its %d rows dequantize to all zeros in its %s half (the source's are not)%s",
				tensor, p.ZeroRows, p.Rows, p.Name, others(parts, i)))
		default:
			for j, q := range parts {
				if j != i && p.RelRMS >= DegradedError && p.RelRMS >= DegradedRatio*q.RelRMS {
					v.Degraded = append(v.Degraded, fmt.Sprintf("%s: its %s half's quantization error is %.2f, %.0fx its %s half's %.3f: drafts are accepted less often than at this precision otherwise",
						tensor, p.Name, p.RelRMS, p.RelRMS/max(q.RelRMS, 1e-12), q.Name, q.RelRMS))
				}
			}
		}
	}
	return v
}

// others names the other parts' errors.
func others(parts []PartError, i int) string {
	s := ""
	for j, q := range parts {
		if j != i {
			s += fmt.Sprintf("; its %s half's is %.3f", q.Name, q.RelRMS)
		}
	}
	return s
}

// Kind says what a head tensor is, for the checks without a source.
type Kind int

const (
	KindWeight Kind = iota // a matrix (or stack of matrices)
	KindVector             // a bias, a router bias, a 1-D tensor that is no norm
	KindNorm               // an RMSNorm weight
)

// Expect is what a norm's values should centre on.
type Expect struct {
	Centre float64 // 1: effective weights (stored 1+w, or a plain norm); 0: zero-centred weights stored raw
	// ZeroCentred: the family's norm is zero-centred (applied as 1+w),
	// which the messages name.
	ZeroCentred bool
}

// JudgeValues lists what a head tensor's stored values alone show: the
// tensor all zero, constant, non-finite; a half of the concat projection
// rounded away; a norm off its convention's centre.
func JudgeValues(tensor string, k Kind, s *Stats, e Expect) []string {
	var out []string
	if s.NonFinite > 0 {
		out = append(out, fmt.Sprintf("%s: %d NaN or infinite values", tensor, s.NonFinite))
	}
	switch {
	case s.N > 0 && s.SumSq == 0 && (k == KindWeight || k == KindNorm && e.Centre != 0):
		// Not a zero-centred norm stored raw (all zeros is its identity, as
		// initialised and in rigged checkpoints), nor a bias or router bias
		// (zero is a legitimate value): those are judged by their centre or
		// not at all.
		out = append(out, fmt.Sprintf("%s: every value is zero", tensor))
	case k == KindWeight && s.N > 1 && s.Min == s.Max:
		out = append(out, fmt.Sprintf("%s: every value is %g", tensor, s.Min))
	}
	if len(out) > 0 {
		return out
	}
	for i, p := range s.Parts {
		if p.Rows > 0 && float64(p.ZeroRows) >= LostRows*float64(p.Rows) {
			out = append(out, fmt.Sprintf("%s: %d of its %d rows are all zeros in its %s half", tensor, p.ZeroRows, p.Rows, p.Name))
			continue
		}
		for j, q := range s.Parts {
			if j != i && q.SumSq > 0 && ScaleRatio(p, q) < LostScaleRatio {
				out = append(out, fmt.Sprintf("%s: its %s half's RMS is %.2g of its %s half's (below %g: rounded away)", tensor, p.Name, ScaleRatio(p, q), q.Name, LostScaleRatio))
			}
		}
	}
	if k == KindNorm && len(s.norm) > 0 {
		m := s.Median()
		if math.Abs(m-e.Centre) > NormTolerance {
			out = append(out, fmt.Sprintf("%s: its weights centre on %.2f (median), not %g: %s", tensor, m, e.Centre, e.shift(m)))
		}
	}
	return out
}

// shift says what a norm centred on m means under the convention.
func (e Expect) shift(m float64) string {
	switch {
	case math.Abs(m-e.Centre-1) <= NormTolerance && e.ZeroCentred && e.Centre == 1:
		return "the +1 of the zero-centred RMSNorm was applied twice"
	case math.Abs(m-e.Centre-1) <= NormTolerance && e.ZeroCentred:
		return "the +1 of the zero-centred RMSNorm is already applied, and loaders add it again"
	case math.Abs(m-e.Centre-1) <= NormTolerance:
		return "a +1 was added to a plain RMSNorm"
	case math.Abs(m-e.Centre+1) <= NormTolerance && e.ZeroCentred:
		return "the +1 of the zero-centred RMSNorm was not applied"
	case math.Abs(m-e.Centre+1) <= NormTolerance:
		return "a plain RMSNorm stored as if zero-centred (1 taken off)"
	}
	return "not a centre any RMSNorm convention gives"
}

// Median is the median of a norm's finite values.
func (s *Stats) Median() float64 {
	v := slices.DeleteFunc(slices.Clone(s.norm), func(x float32) bool { return x != x || math.IsInf(float64(x), 0) })
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return float64(v[len(v)/2])
}

// ScaleRatio is part p's RMS over part q's.
func ScaleRatio(p, q PartStats) float64 {
	if q.SumSq == 0 || p.Rows == 0 || q.Rows == 0 {
		return 0
	}
	pr := math.Sqrt(p.SumSq / float64(p.Rows*(p.To-p.From)))
	qr := math.Sqrt(q.SumSq / float64(q.Rows*(q.To-q.From)))
	return pr / qr
}
