package gguf

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// expertKinds are the stacked gate, up and down experts.
var expertKinds = [3]gg.TensorName{gg.Weight(gg.KindFFNGateExps), gg.Weight(gg.KindFFNUpExps), gg.Weight(gg.KindFFNDownExps)}

// headName maps a head tensor (name without the head prefix) to its GGUF
// name by the family's tables, given the trunk's layer count: the MTP
// layer j is block n_layer + j, the head's own tensors are block n_layer's.
func headName(g model.GGUFSpec, rest string, nLayer int) (string, error) {
	if n, ok := g.HeadTop[rest]; ok {
		return n.In(nLayer), nil
	}
	if after, ok := strings.CutPrefix(rest, "layers."); ok {
		j, suffix, ok := strings.Cut(after, ".")
		if n, err := strconv.Atoi(j); ok && err == nil {
			if name, ok := g.Layer[suffix]; ok {
				return name.In(nLayer + n), nil
			}
		}
	}
	return "", fmt.Errorf("no GGUF name for MTP tensor %q", rest)
}

// joinOf finds the join a head tensor (as HeadRelative names it) is part
// of, and which part it is.
func joinOf(g model.GGUFSpec, rel string) (model.GGUFJoin, int, bool) {
	after, ok := strings.CutPrefix(rel, "layers.")
	if !ok {
		return model.GGUFJoin{}, 0, false
	}
	_, suffix, _ := strings.Cut(after, ".")
	for _, j := range g.Joins {
		if i := slices.Index(j.Parts, suffix); i >= 0 {
			return j, i, true
		}
	}
	return model.GGUFJoin{}, 0, false
}

// joinTensor plans a join as one column concatenation of its parts in MTP
// layer j's block (src is its first part), quantized as the join says.
func joinTensor(m *model.Model, src string, join model.GGUFJoin, nLayer int) plan.OutTensor {
	rel := m.HeadRelative(src)
	after, _ := strings.CutPrefix(rel, "layers.")
	num, _, _ := strings.Cut(after, ".")
	j, _ := strconv.Atoi(num)
	prefix := m.HeadLayerPrefix(j)
	first := m.Checkpoint.Tensors[src]
	seg := plan.Segment{Source: src, Rows: first.Shape[0]}
	seg.Scale, seg.Block, _ = m.BlockScale(src) // FP8 parts: each dequantized with its own scales
	rowLen := first.Shape[len(first.Shape)-1]
	for _, p := range join.Parts[1:] {
		t := m.Checkpoint.Tensors[prefix+p]
		cols := int64(0)
		if t != nil && len(t.Shape) == 2 {
			cols = t.Shape[1]
		}
		part := rows.Columns{Source: prefix + p, Cols: cols}
		part.Scale, part.Block, _ = m.BlockScale(prefix + p)
		seg.Then = append(seg.Then, part)
		rowLen += cols
	}
	t := plan.OutTensor{Name: m.Family.GGUF.Layer[join.Parts[0]].In(nLayer + j), Segments: []plan.Segment{seg}, RowLen: rowLen, Shape: []int64{seg.Rows, rowLen}}
	if len(join.Parts) == 2 { // the embedding's projection, then the hidden state's: each half's error on its own
		own := first.Shape[len(first.Shape)-1]
		t.Parts = []health.Part{{Name: health.PartEmbedding, From: 0, To: own}, {Name: health.PartHidden, From: own, To: rowLen}}
	}
	if join.Type != "" {
		t.Quant = ggmlQuant(join.Type)
	}
	return t
}
