package export

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/manifests"
)

// maxValueNotes caps the notes about tensor values; the manifest has them all.
const maxValueNotes = 20

// valueNotes says which float tensors store NaN or infinite values (those
// kept from the source, and f16 overflows) and which were dequantized with
// negative FP8 block scales.
func valueNotes(tensors []manifests.Tensor) []string {
	var notes []string
	more := 0
	add := func(format string, a ...any) {
		if len(notes) < maxValueNotes {
			notes = append(notes, fmt.Sprintf(format, a...))
		} else {
			more++
		}
	}
	for _, t := range tensors {
		if kept := t.NonFinite - t.F16Overflows; kept > 0 {
			add("%s: %d NaN or infinite source values are kept as they are", t.Name, kept)
		}
		if t.F16Overflows > 0 {
			add("%s: %d values above the f16 range became infinite", t.Name, t.F16Overflows)
		}
		if t.NegativeScales > 0 {
			add("%s: %s", t.Name, manifests.NegativeScalesMessage(t.NegativeScales))
		}
	}
	if more > 0 {
		notes = append(notes, fmt.Sprintf("and %d more notes on NaN, infinite or overflowing values and negative scales (the manifest records each tensor's nonfinite, f16_overflows and negative_scales)", more))
	}
	return notes
}

// headHealth judges the quantization error of the concat projection's
// halves against the source: a lost half refuses the export (the head would
// load and draft at about 0 %) unless allowed; every quantized concat
// projection gets a note with its halves' errors, and a degraded half says so.
func headHealth(tensors []manifests.Tensor, allow bool) (notes []string, err error) {
	var lost []string
	for _, t := range tensors {
		q := t.QuantError
		if q == nil || len(q.Parts) == 0 {
			continue
		}
		words := make([]string, 0, len(q.Parts))
		for _, p := range q.Parts {
			words = append(words, fmt.Sprintf("%s half %.3f", p.Name, p.RelRMS))
		}
		notes = append(notes, fmt.Sprintf("%s: quantization error (relative RMS) %s", t.Name, strings.Join(words, ", ")))
		v := health.JudgeErrors(t.Name, q.Parts)
		lost = append(lost, v.Lost...)
		notes = append(notes, v.Degraded...)
	}
	if len(lost) > 0 && !allow {
		return nil, fmt.Errorf("the head would load and draft at about 0 %%, so the export is refused and leaves nothing: %s (a precision whose scales are per group of at most 256 columns and do not underflow keeps both halves: MLX int4/int8, mxfp4, mxfp8, OpenVINO int4, every GGUF type; --allow-lossy-head writes it anyway)", strings.Join(lost, "; "))
	}
	for _, l := range lost {
		notes = append(notes, "written as asked (--allow-lossy-head), though the head cannot draft: "+l)
	}
	return notes, nil
}

// zeroHead warns of the head's weights written from a source whose values
// are all zero (an FP8 weight whose block scales are 0): inspect --strict
// fails such an output ("every value is zero"), and the export says it
// first. Norms and vectors are not judged so (zero is a zero-centred norm's
// and a bias's legitimate value).
func zeroHead(rec run.FileRecord) []string {
	var out []string
	for _, t := range rec.Tensors {
		if t.Component == plan.ComponentHead && slices.Contains(rec.ZeroSources, t.Name) && health.KindOf(t.Name, len(t.Shape)) == health.KindWeight {
			var srcs []string
			for _, seg := range t.Segments {
				if !slices.Contains(srcs, seg.Source) {
					srcs = append(srcs, seg.Source)
				}
			}
			out = append(out, fmt.Sprintf("%s: every value of its source (%s) is zero: the head cannot draft with it, and inspect --strict fails the output", t.Name, strings.Join(srcs, ", ")))
		}
	}
	return out
}

// headCheck applies headHealth to each tensor file as the run finishes it,
// before the file is reported: a refused head stops the run there.
type headCheck struct {
	allow    bool
	mu       sync.Mutex
	notes    map[string][]string // by file
	warnings map[string][]string // by file
}

func (h *headCheck) accept(rec run.FileRecord) error {
	notes, err := headHealth(rec.Tensors, h.allow)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.notes == nil {
		h.notes, h.warnings = map[string][]string{}, map[string][]string{}
	}
	h.notes[rec.File.Name] = notes
	h.warnings[rec.File.Name] = zeroHead(rec)
	return nil
}

// ordered is the notes and warnings in the plan's file order (files finish
// in any order).
func (h *headCheck) ordered(files []string) (notes, warnings []string) {
	for _, f := range files {
		notes = append(notes, h.notes[f]...)
		warnings = append(warnings, h.warnings[f]...)
	}
	return notes, warnings
}
