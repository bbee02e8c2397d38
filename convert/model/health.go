package model

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/rows"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// HeadHealth judges the checkpoint's head from its stored values
// (health.Report): every head tensor but the routed experts (the bulk of
// the bytes, listed as not checked), FP8 weights dequantized with their
// block scales, MXFP8 and FP4 (e2m1) ones with their E8M0 scales; a zero-centred norm is expected to centre on 0 (the
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
		// MX storage, as the exports read it: FP4 codes two a byte, MX fp8
		// codes one, each with an E8M0 scale per block of its row.
		if fp4, ok := m.FP4Segment(name, 0, seg.Rows); ok {
			seg, rowLen = fp4, 2*rowLen
		} else if mx8, ok := m.MXFP8Segment(name, 0, seg.Rows); ok {
			seg = mx8
		}
		switch {
		case t.DType == st.BF16 || t.DType == st.F16 || t.DType == st.F32:
		case t.DType == st.F8E4M3 && seg.Scale != "":
		case seg.Packed != "":
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
// (Spec.ConcatProjection of any MTP layer) and whether its input is the
// embedding first.
func (m *Model) Concat(name string) (embeddingFirst, ok bool) {
	if m.Spec == nil {
		return false, false
	}
	rel, ok := m.ConcatProjection()
	if !ok {
		return false, false
	}
	if name == m.HeadName(rel) {
		return m.concatEmbeddingFirst(), true
	}
	if suffix, ok := strings.CutPrefix(rel, "layers.0."); ok && !m.Spec.HeadOneLayer {
		for j := 1; j < m.MTPDepth; j++ {
			if name == m.HeadLayerPrefix(j)+suffix {
				return m.concatEmbeddingFirst(), true
			}
		}
	}
	return false, false
}

// ConcatProjection is the head's concat projection, fc(concat(embedding,
// hidden)), as a HeadRelative name of MTP layer 0: the Forward's FC, or,
// for a family that lowers no Forward (Nemotron-H), the head tensor its
// GGUF table names nextn.eh_proj. A head whose two halves are tensors of
// their own (ConcatSplit) has none.
func (m *Model) ConcatProjection() (string, bool) {
	s := m.Spec
	if m.ConcatSplit() {
		return "", false
	}
	fc := ""
	if s.Forward != nil {
		fc = s.Forward(m).FC
	}
	for _, w := range s.HeadTop {
		// nextn.pre_projection: a separate drafter's concat projection (the
		// Gemma-4 assistant's, over the target's embedding and hidden state).
		if n := m.Family.GGUF.HeadTop[w.Suffix]; s.HeadPrefix+w.Suffix == fc || fc == "" && (n.Kind == gg.KindNextNEHProj || n.Kind == gg.KindNextNProjPre) && !n.Bias {
			return w.Suffix, true
		}
	}
	for _, w := range s.HeadLayerWants(0) {
		if n := m.Family.GGUF.Layer[w.Suffix]; m.HeadLayerPrefix(0)+w.Suffix == fc || fc == "" && n.Kind == gg.KindNextNEHProj && !n.Bias {
			return "layers.0." + w.Suffix, true
		}
	}
	return "", false
}

// ConcatSplit says whether the head projects the embedding and the hidden
// state with a tensor each, which llama.cpp joins into one nextn.eh_proj
// (Qwen3.8-Flash-Next's fc_embedding and fc_hidden, DeepSeek-V4's e_proj
// and h_proj): each half is a whole
// tensor, its quantization error recorded as any tensor's.
func (m *Model) ConcatSplit() bool {
	n := 0
	for _, w := range m.Spec.HeadTop {
		if k := m.Family.GGUF.HeadTop[w.Suffix]; k.Kind == gg.KindNextNEHProj && !k.Bias {
			n++
		}
	}
	l := 0
	for _, w := range m.Spec.HeadLayer {
		if k := m.Family.GGUF.Layer[w.Suffix]; k.Kind == gg.KindNextNEHProj && !k.Bias {
			l++
		}
	}
	return n > 1 || l > 1
}

// concatEmbeddingFirst says whether the concat projection takes the
// embedding first (its Forward's order; true when the family lowers no
// Forward: every family's modelling code mtpconv knows concatenates
// [embedding, hidden]).
func (m *Model) concatEmbeddingFirst() bool {
	if m.Spec.Forward == nil {
		return true
	}
	return m.Spec.Forward(m).EmbeddingFirst
}

// HeadOwn lists the head's own tensors of MTP layer j as HeadRelative names
// (the head's top tensors with layer 0's): the concat projection, the norms
// before it and the shared head's norm, which no trunk layer has and every
// runtime's MTP graph reads by name. They are the head wants the family
// requires (not RoleOptional) that its Forward names (EmbedNorm,
// HiddenNorm, FC, FinalNorm) or its GGUF table gives a NextN kind. inspect
// asks for them under each target's names in files that carry no source
// (a GGUF file, an MLX folder): a head without one cannot draft.
func (f *Family) HeadOwn(j int) []string {
	// The names do not depend on the config's dimensions: the family's Spec
	// for a zero config lists them (TestFamilyStaticFacts holds them equal
	// to every fixture's), for files that carry no config of the family's
	// (a GGUF file, an MLX drafter).
	return f.HeadOwnIn(f.Spec(&Config{}), j)
}

// HeadOwnIn is HeadOwn for the Spec s of one of the family's configs.
func (f *Family) HeadOwnIn(s *Spec, j int) []string {
	m := &Model{Config: &Config{}, Spec: s, Family: f}
	named := map[string]bool{}
	if s.Forward != nil {
		fw := s.Forward(m)
		for _, n := range []string{fw.EmbedNorm, fw.HiddenNorm, fw.FC, fw.FinalNorm} {
			named[n] = n != ""
		}
	}
	var out []string
	if j == 0 {
		for _, w := range s.HeadTop {
			if w.Role&RoleOptional == 0 && (named[s.HeadPrefix+w.Suffix] || f.GGUF.HeadTop[w.Suffix].Kind.NextN()) {
				out = append(out, w.Suffix)
			}
		}
	}
	for _, w := range s.HeadLayerWants(j) {
		// A drafter's layer tensors llama.cpp keeps outside the blocks are
		// the draft's own too (DSpark's fc, enc.output_norm, Markov and
		// confidence heads, which its stages store).
		n, ok := f.GGUF.Layer[w.Suffix]
		root := ok && f.GGUF.Drafter && !n.Kind.Info().Block
		if w.Role&RoleOptional == 0 && (named[m.HeadLayerPrefix(0)+w.Suffix] || n.Kind.NextN() || root) {
			out = append(out, "layers."+strconv.Itoa(j)+"."+w.Suffix)
		}
	}
	return out
}
