package model

import (
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The MXFP8 releases (Hy4, HYV4ForCausalLM) store their linear weights as
// OCP MX fp8: one F8_E4M3 code per value, X [..., in], and one F8_E8M0
// power of two per 32 inputs, X_scale [..., in/32] (X.weight with
// X.weight_scale; a fused expert stack X [E, out, in] with X_scale
// [E, out, in/32]). That storage, like the block FP8 (fp8.go) and FP4
// (fp4.go) ones, is the same for every family that ships it: it lives
// here. Each value decodes exactly as code × 2^(e − 127) where a float is
// needed (rows.PackedMXE4M3); a target whose consumer stores MLX mxfp8
// moves the bytes unchanged (plan.TMoveMXFP8).

// MXFP8ScaleSuffix names an MXFP8 tensor's scales: X -> X_scale.
const MXFP8ScaleSuffix = "_scale"

// MXFP8Block is the values per E8M0 scale of OCP MX fp8.
const MXFP8Block = 32

// MXFP8Scale reports whether src is MX fp8 codes with E8M0 scales the
// reader decodes: the scale's name and block ([1, 32]). A tensor of more
// than two dimensions is read as rows of its last one.
func (m *Model) MXFP8Scale(src string) (scale string, block []int64, ok bool) {
	return mxfp8Scale(m.Checkpoint.Tensors, src)
}

func mxfp8Scale(names map[string]*st.Tensor, src string) (string, []int64, bool) {
	t, found := names[src]
	if !found || t.DType != st.F8E4M3 || len(t.Shape) < 2 {
		return "", nil, false
	}
	s, found := names[src+MXFP8ScaleSuffix]
	if !found || s.DType != st.F8E8M0 || len(s.Shape) != len(t.Shape) {
		return "", nil, false
	}
	last := len(t.Shape) - 1
	if t.Shape[last]%MXFP8Block != 0 || s.Shape[last] != t.Shape[last]/MXFP8Block || !slices.Equal(s.Shape[:last], t.Shape[:last]) {
		return "", nil, false
	}
	return s.Name, []int64{1, MXFP8Block}, true
}

// MXFP8Segment is rows of an MXFP8 tensor as the reader decodes them.
func (m *Model) MXFP8Segment(src string, row, n int64) (rows.Segment, bool) {
	scale, block, ok := m.MXFP8Scale(src)
	if !ok {
		return rows.Segment{}, false
	}
	return rows.Segment{Source: src, Row: row, Rows: n, Scale: scale, Block: block, Packed: rows.PackedMXE4M3}, true
}

// isMXFP8Scale reports whether name is the scale of an MXFP8 tensor.
func isMXFP8Scale(names map[string]*st.Tensor, name string) bool {
	base, ok := strings.CutSuffix(name, MXFP8ScaleSuffix)
	if !ok {
		return false
	}
	_, _, ok = mxfp8Scale(names, base)
	return ok
}
