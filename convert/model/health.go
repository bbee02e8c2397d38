package model

import (
	"context"
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// HeadHealth judges the checkpoint's head from its stored values
// (health.Report): every head tensor but the routed experts (the bulk of
// the bytes, listed as not checked), FP8 weights dequantized with their
// block scales; a zero-centred norm is expected to centre on 0 (the
// checkpoint stores w, applied as 1+w), a plain one on 1.
func (m *Model) HeadHealth(ctx context.Context) (*health.Report, error) {
	r := &health.Report{Problems: []string{}}
	rd := rows.NewReader(m.Checkpoint)
	for _, name := range m.HeadTensors() {
		t := m.Checkpoint.Tensors[name]
		if len(t.Shape) == 0 {
			continue
		}
		rowLen := t.Shape[len(t.Shape)-1]
		seg := rows.Segment{Source: name, Rows: t.Elements() / max(rowLen, 1)}
		if scale, block, ok := m.BlockScale(name); ok {
			seg.Scale, seg.Block, seg.ShardRows = scale, block, m.ShardRows(name)
		}
		switch {
		case t.DType == st.BF16 || t.DType == st.F16 || t.DType == st.F32:
		case t.DType == st.F8E4M3 && seg.Scale != "":
		default: // a packed or integer storage (a quantized repo's head): not decoded here
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s (stored %s)", name, t.DType))
			continue
		}
		var parts []health.Part
		if emb, ok := m.Concat(name); ok && rowLen%2 == 0 {
			parts = health.ConcatParts(rowLen, emb)
		}
		e := health.Expect{Centre: 1}
		if m.Is(name, RoleZeroCentredNorm) {
			e = health.Expect{Centre: 0, ZeroCentred: true}
		}
		err := r.Check(name, health.KindOf(name, len(t.Shape)), parts, seg.Rows, rowLen, e, func(row, n int64) ([]float32, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			raw, err := rd.Raw(seg, rowLen, row, n)
			if err != nil {
				return nil, err
			}
			vals := make([]float32, n*rowLen)
			return vals, rd.Decode(seg, rowLen, row, n, raw, vals)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, n := range m.Checkpoint.Names {
		if m.IsHead(n) && m.IsRoutedExpert(n) {
			r.Unchecked = append(r.Unchecked, "the head's routed experts (not read by inspect: the bulk of its bytes)")
			break
		}
	}
	return r, nil
}

// Concat reports whether a source tensor is a concat projection of the head
// (the Forward's FC, or the same tensor of a later MTP layer of a head whose
// layers each have one) and whether its input is the embedding first.
func (m *Model) Concat(name string) (embeddingFirst, ok bool) {
	if m.Spec == nil || m.Spec.Forward == nil {
		return false, false
	}
	f := m.Spec.Forward(m)
	if f.FC == "" {
		return false, false
	}
	if name == f.FC {
		return f.EmbeddingFirst, true
	}
	if rel, ok := strings.CutPrefix(f.FC, m.HeadLayerPrefix(0)); ok {
		for j := 1; j < m.MTPDepth; j++ {
			if name == m.HeadLayerPrefix(j)+rel {
				return f.EmbeddingFirst, true
			}
		}
	}
	return false, false
}
