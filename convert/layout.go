package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// want is one tensor a layer must have, with the shape the config implies.
type want struct {
	suffix string
	shape  []int64
}

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

// fullAttention lists a gated full-attention block (trunk every 4th layer, and the MTP layer).
func fullAttention(c *Config) []want {
	h := int64(c.HiddenSize)
	q := int64(c.NumAttentionHeads * c.HeadDim)
	kv := int64(c.NumKeyValueHeads * c.HeadDim)
	qOut := q
	if c.AttnOutputGate == nil || *c.AttnOutputGate {
		qOut = 2 * q // queries and their sigmoid gate, interleaved per head
	}
	return []want{
		{"self_attn.q_proj.weight", []int64{qOut, h}},
		{"self_attn.k_proj.weight", []int64{kv, h}},
		{"self_attn.v_proj.weight", []int64{kv, h}},
		{"self_attn.o_proj.weight", []int64{h, q}},
		{"self_attn.q_norm.weight", []int64{int64(c.HeadDim)}},
		{"self_attn.k_norm.weight", []int64{int64(c.HeadDim)}},
	}
}

// sparseMoE lists the non-expert tensors of a MoE block with a gated shared expert.
func sparseMoE(c *Config) []want {
	h, e, si := int64(c.HiddenSize), int64(c.NumExperts), int64(c.SharedExpertIntermed)
	return []want{
		{"mlp.gate.weight", []int64{e, h}},
		{"mlp.shared_expert.gate_proj.weight", []int64{si, h}},
		{"mlp.shared_expert.up_proj.weight", []int64{si, h}},
		{"mlp.shared_expert.down_proj.weight", []int64{h, si}},
		{"mlp.shared_expert_gate.weight", []int64{1, h}},
	}
}

// expertTensors lists the routed-expert tensors of one block in a layout.
func expertTensors(c *Config, layout ExpertLayout) []want {
	h, i := int64(c.HiddenSize), int64(c.MoeIntermediateSize)
	if layout == Fused {
		e := int64(c.NumExperts)
		return []want{
			{"mlp.experts.gate_up_proj", []int64{e, 2 * i, h}},
			{"mlp.experts.down_proj", []int64{e, h, i}},
		}
	}
	out := make([]want, 0, 3*c.NumExperts)
	for e := 0; e < c.NumExperts; e++ {
		p := "mlp.experts." + strconv.Itoa(e) + "."
		out = append(out,
			want{p + "gate_proj.weight", []int64{i, h}},
			want{p + "up_proj.weight", []int64{i, h}},
			want{p + "down_proj.weight", []int64{h, i}})
	}
	return out
}

// detectExperts finds how the block under layerPrefix stores its experts.
func detectExperts(names map[string]*st.Tensor, layerPrefix string) (ExpertBlock, error) {
	p := layerPrefix + "mlp.experts."
	blk := ExpertBlock{Prefix: p}
	_, fused := names[p+"gate_up_proj"]
	if _, down := names[p+"down_proj"]; down {
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
func checkTensors(names map[string]*st.Tensor, prefix string, wants []want, found map[string]bool) []string {
	var problems []string
	var missing []string
	for _, w := range wants {
		name := prefix + w.suffix
		t, ok := names[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		found[name] = true
		if !slices.Equal(t.Shape, w.shape) {
			problems = append(problems, fmt.Sprintf("%s: tensor %s has shape %v, the config implies %v", t.Shard.Name, name, t.Shape, w.shape))
		}
		switch t.DType {
		case st.BF16, st.F16, st.F32:
		case st.F8E4M3, st.F8E5M2:
			problems = append(problems, fmt.Sprintf("%s: tensor %s is %s (an FP8 release with block scales); this tool reads bf16/f16/f32 checkpoints", t.Shard.Name, name, t.DType))
		default:
			problems = append(problems, fmt.Sprintf("%s: tensor %s has dtype %s, not a float type", t.Shard.Name, name, t.DType))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing: "+strings.Join(capList(compressExpertNames(missing), "tensors"), ", "))
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
		parts = capList(parts, "ranges")
		if len(ids) == 1 {
			out = append(out, k.pre+parts[0]+"."+k.post)
		} else {
			out = append(out, k.pre+"{"+strings.Join(parts, ",")+"}."+k.post)
		}
	}
	return out
}

// zeroCentred reports whether a tensor is a zero-centred RMSNorm weight
// (stored w, effective 1+w) in both Qwen hybrid families: the decoder-layer,
// q/k and final norms of trunk and head, and the three MTP norms. The gated
// linear_attn.norm is a plain norm and never matches.
func zeroCentred(name, textPrefix string) bool {
	for _, sfx := range []string{".input_layernorm.weight", ".post_attention_layernorm.weight", ".self_attn.q_norm.weight", ".self_attn.k_norm.weight"} {
		if strings.HasSuffix(name, sfx) {
			return true
		}
	}
	switch name {
	case textPrefix + "norm.weight", "mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight":
		return true
	}
	return false
}
