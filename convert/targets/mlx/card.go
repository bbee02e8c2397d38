package mlx

import (
	"fmt"
	"sort"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// precisionLines say, per component, the bits per weight as mlx-lm counts
// them (stored bits over parameters, every tensor of the component: codes,
// scales, biases, norms), the quantization modes and, for the trunk, the
// recipe; nothing when no tensor is quantized.
func precisionLines(man *manifests.Manifest) []string {
	type acc struct {
		bits, params float64
		modes        map[string]int
	}
	comps := map[string]*acc{}
	quantized := false
	for i := range man.Tensors {
		t := &man.Tensors[i]
		c := t.Component
		if c == "" {
			c = "head"
		}
		a := comps[c]
		if a == nil {
			a = &acc{modes: map[string]int{}}
			comps[c] = a
		}
		n := int64(1)
		for _, d := range t.Shape {
			n *= d
		}
		a.params += float64(n)
		for _, e := range t.Entries {
			size, err := st.DType(e.DType).Size()
			if err != nil {
				continue
			}
			k := int64(1)
			for _, d := range e.Shape {
				k *= d
			}
			a.bits += float64(k * size * 8)
		}
		if q, _, ok := t.StoredQuant(); ok {
			quantized = true
			a.modes[fmt.Sprintf("%s %d-bit group %d", q.Mode.MLXModeName(), q.Bits, q.Group)]++
		}
	}
	if !quantized {
		return nil
	}
	var lines []string
	for _, c := range []string{"trunk", "head"} {
		a := comps[c]
		if a == nil || a.params == 0 {
			continue
		}
		var modes []string
		for m, n := range a.modes {
			modes = append(modes, fmt.Sprintf("%s × %d", m, n))
		}
		sort.Strings(modes)
		l := fmt.Sprintf("- %s: %.3f bits per weight", c, a.bits/a.params)
		if len(modes) > 0 {
			l += " (" + strings.Join(modes, ", ") + ")"
		}
		if r := man.Options["trunk_recipe"]; c == "trunk" && r != "" {
			lo, hi := Recipes[r][0], Recipes[r][1]
			l += fmt.Sprintf("; mlx-lm recipe `%s`: %d bits, %d for v_proj and down_proj of the first and last eighth of the layers and every third layer between, and for lm_head", r, lo, hi)
		}
		lines = append(lines, l)
	}
	return lines
}
