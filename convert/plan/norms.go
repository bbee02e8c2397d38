package plan

import (
	"fmt"

	"github.com/mtpconv/mtpconv/convert/model"
)

// What an output says of its RMSNorm weights (NormConvention): the card,
// the manifest and OpenVINO's rt_info read it, so it is true of the bytes by
// construction.
const (
	NormsShifted     = "zero-centred RMSNorm weights stored shifted: 1+w (the +1 is applied by mtpconv; loaders must not add it again)"
	NormsZeroCentred = "zero-centred RMSNorm weights stored as the source stores them: w (the loader adds the +1 itself, as vLLM's and SGLang's do; do not shift them)"
	NormsPlain       = "plain RMSNorm weights, stored as the source stores them (nothing added)"
)

// NormConvention says how the plan stores the norms the family gives
// zero-centred (Qwen's), from the transforms it records on them: each is
// shifted to 1+w (norm_plus_one) or copied as w. A plan that holds none says
// its norms are plain.
func (p *Plan) NormConvention(m *model.Model) string {
	var shifted, raw int
	for i := range p.Tensors {
		t := &p.Tensors[i]
		srcs := t.Sources()
		if len(srcs) == 0 || !m.Is(srcs[0], model.RoleZeroCentredNorm) {
			continue
		}
		if t.Has(TNormPlusOne) {
			shifted++
		} else {
			raw++
		}
	}
	switch {
	case shifted == 0 && raw == 0:
		return NormsPlain
	case raw == 0:
		return NormsShifted
	case shifted == 0:
		return NormsZeroCentred
	}
	return fmt.Sprintf("zero-centred RMSNorm weights: %d stored shifted as 1+w (recorded as %s), %d as the source stores them (w)", shifted, TNormPlusOne, raw)
}
