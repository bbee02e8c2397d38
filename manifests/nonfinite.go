package manifests

import (
	"fmt"
	"math"
)

// maxListed caps the tensors a list of warnings names.
const maxListed = 20

// checkFinite refuses a manifest holding a NaN or an infinity, which JSON
// cannot represent, naming the tensor (the export refuses such tensors
// earlier; this keeps encoding/json from ever failing without a name).
func (m *Manifest) checkFinite() error {
	for _, t := range m.Tensors {
		if q := t.QuantError; q != nil && (!finite(q.MaxAbs) || !finite(q.RMS)) {
			return fmt.Errorf("tensor %s: its quantization error (max %v, rms %v) is not a finite number", t.Name, q.MaxAbs, q.RMS)
		}
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// nonFiniteDType is the dtype in which verify counts the NaN and infinite
// values of an entry: the main entry of a float tensor; "" for the others.
func nonFiniteDType(t *Tensor, e Entry) string {
	if _, q := t.Has("quantize"); q || e.Name != t.Name {
		return ""
	}
	switch e.DType {
	case "BF16", "F16", "F32":
		return e.DType
	}
	return ""
}

// checkNonFinite compares the NaN and infinite values counted in a float
// tensor with the manifest: a different count is a problem, an equal one
// (the source held them, or the f16 cast overflowed) a warning.
func checkNonFinite(r *Report, m *Manifest, t *Tensor, counted int64) {
	if m.Schema < 3 {
		return // not recorded before schema 3
	}
	switch {
	case counted != t.NonFinite:
		r.add("nonfinite_count", t.File, t.Name, "%s: %d stored values are NaN or infinite; the manifest records %d", t.Name, counted, t.NonFinite)
	case counted > 0:
		r.Warnings = append(r.Warnings, Problem{"nonfinite_values", t.File, t.Name, nonFiniteMessage(t)})
	}
}

func nonFiniteMessage(t *Tensor) string {
	msg := fmt.Sprintf("%s: %d stored values are NaN or infinite", t.Name, t.NonFinite)
	if t.F16Overflows > 0 {
		msg += fmt.Sprintf(" (%d of them finite source values beyond the f16 range)", t.F16Overflows)
	}
	return msg
}

// nonFiniteWarnings lists the tensors that store NaN or infinite values.
func nonFiniteWarnings(m *Manifest) []string {
	var out []string
	n, neg := 0, 0
	for i := range m.Tensors {
		t := &m.Tensors[i]
		if t.NonFinite > 0 {
			if n < maxListed {
				out = append(out, nonFiniteMessage(t))
			}
			n++
		}
		if t.NegativeScales > 0 {
			if neg < maxListed {
				out = append(out, t.Name+": "+NegativeScalesMessage(t.NegativeScales))
			}
			neg++
		}
	}
	if n > maxListed {
		out = append(out, fmt.Sprintf("and %d more tensors hold NaN or infinite values", n-maxListed))
	}
	if neg > maxListed {
		out = append(out, fmt.Sprintf("and %d more tensors were dequantized with negative FP8 block scales", neg-maxListed))
	}
	return out
}

// NegativeScalesMessage says what n negative FP8 block scales of a tensor did.
func NegativeScalesMessage(n int64) string {
	return fmt.Sprintf("%d of its FP8 block scales (weight_scale_inv) are negative; those blocks are dequantized with their sign flipped, as the source says", n)
}
