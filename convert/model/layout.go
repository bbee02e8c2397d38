package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// ExpertLayout is how a MoE block stores its routed experts on disk.
type ExpertLayout string

const (
	// Fused: experts.gate_up_proj [E, 2I, H] and experts.down_proj [E, H, I], no .weight suffix.
	Fused ExpertLayout = "fused"
	// PerExpert: experts.{e}.{gate,up,down}_proj.weight, one tensor per expert.
	PerExpert ExpertLayout = "per_expert"
)

// ExpertBlock is the routed-expert storage found under one MoE block.
type ExpertBlock struct {
	Prefix string       `json:"prefix"` // e.g. "mtp.layers.0.mlp.experts."
	Layout ExpertLayout `json:"layout"`
	Count  int          `json:"count"` // experts present (all E when complete)
}

// detectExperts finds how the block under layerPrefix stores its experts.
func detectExperts(names map[string]*st.Tensor, moe *MoE, layerPrefix string) (ExpertBlock, error) {
	p := layerPrefix + moe.Experts
	blk := ExpertBlock{Prefix: p}
	_, fused := names[p+moe.FusedGateUp]
	if _, down := names[p+moe.FusedDown]; down {
		fused = true
	}
	ids := map[int]bool{}
	for n := range names {
		rest, ok := strings.CutPrefix(n, p)
		if !ok {
			continue
		}
		num, _, found := strings.Cut(rest, ".")
		if !found {
			continue
		}
		if e, err := strconv.Atoi(num); err == nil && e >= 0 {
			ids[e] = true
		}
	}
	switch {
	case fused && len(ids) > 0:
		return blk, fmt.Errorf("%s holds both fused and per-expert tensors", p)
	case fused:
		blk.Layout = Fused
		blk.Count = -1 // known from the fused shape, checked against the config
	case len(ids) > 0:
		blk.Layout = PerExpert
		blk.Count = len(ids)
	default:
		return blk, fmt.Errorf("%s has no expert tensors", p)
	}
	return blk, nil
}

// checkTensors compares wanted tensors under prefix with the inventory and
// returns what is missing or misshapen; found records the names it matched.
func checkTensors(names map[string]*st.Tensor, prefix string, wants []Want, found map[string]Role) []string {
	var problems []string
	var missing []string
	for _, w := range wants {
		name := prefix + w.Suffix
		t, ok := names[name]
		if !ok {
			if w.Role&RoleOptional == 0 {
				missing = append(missing, name)
			}
			continue
		}
		found[name] = w.Role
		shape, fp4 := t.Shape, fp4Codes(names, name)
		if fp4 { // two values a byte: its shape in values
			shape = []int64{t.Shape[0], 2 * t.Shape[1]}
		}
		if !slices.Equal(shape, w.Shape) {
			problems = append(problems, fmt.Sprintf("%s: tensor %s has shape %v, the config implies %v", t.Shard.Name, name, shape, w.Shape))
		}
		switch {
		case fp4 && len(w.Shape) == 2:
			// FP4 codes, decoded with their scales (fp4.go; shapes checked by rows.Check).
			continue
		case t.DType == st.F8E4M3 && isMXFP8Scale(names, name+MXFP8ScaleSuffix) && w.Role&^RoleOptional == 0:
			// MX fp8 codes with their E8M0 scales (mxfp8.go), matrices or expert stacks.
			continue
		case w.Role&RoleKeepDType != 0 && (t.DType == st.I32 || t.DType == st.I64):
			continue // an integer table stored as it is (DeepSeek-V4's hash routing)
		}
		switch t.DType {
		case st.BF16, st.F16, st.F32:
		case st.I32, st.I64:
			// An index buffer (the Gemma-4 assistant's token ordering):
			// only where the family keeps the stored dtype.
			if w.Role&RoleKeepDType == 0 {
				problems = append(problems, fmt.Sprintf("%s: tensor %s has dtype %s, not a float type", t.Shard.Name, name, t.DType))
			}
		case st.F8E4M3, st.F8E5M2:
			// Block-scaled FP8 weights are checked with their scales (fp8.go);
			// nothing else may be FP8.
			if len(w.Shape) != 2 || w.Role&^RoleOptional != 0 {
				problems = append(problems, fmt.Sprintf("%s: tensor %s is %s; only 2-D linear weights can be FP8", t.Shard.Name, name, t.DType))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: tensor %s has dtype %s, not a float type", t.Shard.Name, name, t.DType))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing: "+strings.Join(CapList(compressExpertNames(missing), "tensors"), ", "))
	}
	return problems
}

// compressExpertNames folds runs like experts.3.x, experts.4.x into experts.{3..4}.x
// so a message about 768 missing tensors stays readable but complete.
func compressExpertNames(names []string) []string {
	type key struct{ pre, post string }
	groups := map[key][]int{}
	var order []key
	var out []string
	for _, n := range names {
		i := strings.Index(n, "experts.")
		if i < 0 {
			out = append(out, n)
			continue
		}
		rest := n[i+len("experts."):]
		num, post, ok := strings.Cut(rest, ".")
		e, err := strconv.Atoi(num)
		if !ok || err != nil {
			out = append(out, n)
			continue
		}
		k := key{n[:i+len("experts.")], post}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	for _, k := range order {
		ids := groups[k]
		var parts []string
		for s := 0; s < len(ids); {
			e := s
			for e+1 < len(ids) && ids[e+1] == ids[e]+1 {
				e++
			}
			if e == s {
				parts = append(parts, strconv.Itoa(ids[s]))
			} else {
				parts = append(parts, fmt.Sprintf("%d..%d", ids[s], ids[e]))
			}
			s = e + 1
		}
		parts = CapList(parts, "ranges")
		if len(ids) == 1 {
			out = append(out, k.pre+parts[0]+"."+k.post)
		} else {
			out = append(out, k.pre+"{"+strings.Join(parts, ",")+"}."+k.post)
		}
	}
	return out
}

// fp4Codes reports whether name is FP4 codes with an E8M0 scale beside it
// (model.FP4Scale's layout, without a model).
func fp4Codes(names map[string]*st.Tensor, name string) bool {
	t := names[name]
	base, ok := strings.CutSuffix(name, ".weight")
	if !ok || t.DType != st.I8 && t.DType != st.U8 || len(t.Shape) != 2 {
		return false
	}
	s, ok := names[base+FP4ScaleSuffix]
	return ok && s.DType == st.F8E8M0
}
