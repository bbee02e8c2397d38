package export

import (
	"fmt"

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
