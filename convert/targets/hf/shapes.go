package hf

// The head's tensors against the config: every tensor the family's Spec
// wants of the head (its shape from hidden_size, vocab_size, the expert
// counts and intermediate sizes) is held at that shape, float, or, stored
// quantized, as its form packs that shape. A head of another size loads in
// neither runtime or drafts garbage; inspect names the tensor, its shape
// and the one the config implies.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// headWants are the head's tensors the Spec wants, by name, for the layers
// the tensors hold (the routed experts in the layout each block has).
func headWants(m *model.Model) map[string]model.Want {
	s := m.Spec
	out := map[string]model.Want{}
	add := func(prefix string, ws []model.Want) {
		for _, w := range ws {
			out[prefix+w.Suffix] = w
		}
	}
	if !s.HeadInLayers {
		add(s.HeadPrefix, s.HeadTop)
	}
	for j := range m.MTPDepth {
		add(m.HeadLayerPrefix(j), s.HeadLayerWants(j)) // per depth: Inkling's sliding-window depths differ
	}
	for _, blk := range m.MTPExperts {
		if s.MoE != nil && s.Experts != nil {
			add(strings.TrimSuffix(blk.Prefix, s.MoE.Experts), s.Experts(blk.Layout))
		}
	}
	return out
}

// shapeProblems are the head's tensors held at another shape than the
// config implies, or of a dtype no runtime loads there, in name order.
func shapeProblems(m *model.Model, q *Quant, repo Repo) []Problem {
	wants := headWants(m)
	names := make([]string, 0, len(wants))
	for n := range wants {
		names = append(names, n)
	}
	slices.Sort(names)
	bits := 0
	if q != nil {
		bits = q.Bits
	}
	var out []Problem
	for _, n := range names {
		w := wants[n]
		if p, ok := strings.CutSuffix(n, ".weight"); ok && len(w.Shape) == 2 {
			if f, ok := formOf(repo, q, p); ok {
				marker := p + "." + f.Marker
				want, known := f.Packs(w.Shape[0], w.Shape[1], bits)
				if t := repo.Tensors[marker]; known && !slices.Equal(t.Shape, want) {
					out = append(out, Problem{marker, fmt.Sprintf("has shape %v; the config implies %v for %s, which %s stores as %v", t.Shape, w.Shape, n, f.Name, want)})
				}
				continue
			}
		}
		t, ok := repo.Tensors[n]
		switch {
		case !ok:
		case !isFloat(t.DType):
			out = append(out, Problem{n, fmt.Sprintf("is %s, stored in no quantized form the runtimes read (%s): they load it as a float parameter", t.DType, formNames())})
		case !slices.Equal(t.Shape, w.Shape):
			out = append(out, Problem{n, fmt.Sprintf("has shape %v; the config implies %v: vLLM and SGLang fail to load it", t.Shape, w.Shape)})
		}
	}
	return out
}

// formNames are the storage forms, for messages.
func formNames() string {
	var out []string
	for _, f := range storageForms {
		if !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return strings.Join(out, ", ")
}
