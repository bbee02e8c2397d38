package health

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is what the stored values of a file's head tensors show, without
// a source (inspect of a GGUF file, an MLX folder, a checkpoint).
type Report struct {
	Checked int `json:"tensors_checked"`
	// Unchecked are head tensors whose stored type has no decoder here,
	// with the type.
	Unchecked []string `json:"unchecked,omitempty"`
	// Concat: the concat projection's halves, side by side.
	Concat   []ConcatReport `json:"concat,omitempty"`
	Problems []string       `json:"problems"`
}

// ConcatReport is the halves of a concat projection as stored.
type ConcatReport struct {
	Tensor string      `json:"tensor"`
	Halves []HalfStats `json:"halves"`
	// Ratio is the embedding half's RMS over the hidden half's (released
	// heads: about 1/20 to 1/30; 0: the embedding half is zero).
	Ratio float64 `json:"embedding_to_hidden_rms"`
}

// HalfStats is one half's RMS and its rows stored all zero.
type HalfStats struct {
	Name     string  `json:"name"`
	RMS      float64 `json:"rms"`
	Rows     int64   `json:"rows"`
	ZeroRows int64   `json:"zero_rows"`
}

// maxShown caps the problems printed as text.
const maxShown = 20

// chunkElems bounds the values decoded at once: a head's stacked experts
// are gigabytes as float32.
const chunkElems = 1 << 20

// ReadRows decodes n rows of a tensor from row on.
type ReadRows func(row, n int64) ([]float32, error)

// Check reads a head tensor of rows x rowLen values in bounded chunks and
// adds what its values show.
func (r *Report) Check(name string, k Kind, parts []Part, rows, rowLen int64, e Expect, read ReadRows) error {
	s := NewStats(parts, k == KindNorm)
	step := max(1, chunkElems/max(rowLen, 1))
	for row := int64(0); row < rows; row += step {
		n := min(step, rows-row)
		vals, err := read(row, n)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		s.Add(vals, nil, rowLen)
	}
	r.Checked++
	r.Problems = append(r.Problems, JudgeValues(name, k, s, e)...)
	if len(s.Parts) == 2 {
		c := ConcatReport{Tensor: name}
		var emb, hid PartStats
		for _, p := range s.Parts {
			rms := 0.0
			if p.Rows > 0 {
				rms = math.Sqrt(p.SumSq / float64(p.Rows*(p.To-p.From)))
			}
			c.Halves = append(c.Halves, HalfStats{Name: p.Name, RMS: rms, Rows: p.Rows, ZeroRows: p.ZeroRows})
			if p.Name == PartEmbedding {
				emb = p
			} else {
				hid = p
			}
		}
		c.Ratio = ScaleRatio(emb, hid)
		r.Concat = append(r.Concat, c)
	}
	return nil
}

// KindOf is what a head tensor of the given name and dimensions is: a norm
// (a 1-D weight whose module is named *norm*: attn_norm, enorm,
// pre_fc_norm_embedding, shared_head.norm; but not the attention's q/k
// norms, whose trained scale is free), a vector, or a weight.
func KindOf(name string, dims int) Kind {
	module := strings.TrimSuffix(name, ".weight")
	module = module[strings.LastIndex(module, ".")+1:]
	switch {
	case dims >= 2:
		return KindWeight
	case strings.HasSuffix(name, ".weight") && strings.Contains(module, "norm") && !strings.Contains(module, "q_norm") && !strings.Contains(module, "k_norm"):
		return KindNorm
	}
	return KindVector
}

// WriteText prints the report under a "head health:" heading.
func (r *Report) WriteText(w io.Writer) {
	status := "OK"
	if len(r.Problems) > 0 {
		status = r.problemCount()
	}
	fmt.Fprintf(w, "head health:   %d tensors checked from their stored values: %s\n", r.Checked, status)
	for _, c := range r.Concat {
		var hs []string
		for _, h := range c.Halves {
			hs = append(hs, fmt.Sprintf("%s half RMS %.3g (%d of %d rows zero)", h.Name, h.RMS, h.ZeroRows, h.Rows))
		}
		fmt.Fprintf(w, "  %s: %s; embedding/hidden %.3g\n", c.Tensor, strings.Join(hs, ", "), c.Ratio)
	}
	for _, u := range r.Unchecked {
		fmt.Fprintf(w, "  not checked: %s\n", u)
	}
	for i, p := range r.Problems {
		if i == maxShown {
			fmt.Fprintf(w, "  unhealthy: and %d more (--json lists them all)\n", len(r.Problems)-maxShown)
			break
		}
		fmt.Fprintf(w, "  unhealthy: %s\n", p)
	}
}

// Err is the report's problems as one error, nil when there are none.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("the MTP head's stored values show %s: %s", r.problemCount(), strings.Join(r.Problems, "; "))
}

// problemCount is "1 problem" or "N problems" (this package is a leaf
// beside manifests/words, so it spells its one count itself).
func (r *Report) problemCount() string {
	if len(r.Problems) == 1 {
		return "1 problem"
	}
	return fmt.Sprintf("%d problems", len(r.Problems))
}
