package model

import (
	"strings"

	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The FP4 releases (DeepSeek-V4 and its V4.1 / V4-Flash-0731 siblings)
// store their routed experts as E2M1 codes two to a byte, X.weight I8
// [out, in/2] with value 2i in the low nibble, and one F8_E8M0 power of two
// per 32 inputs, X.scale [out, in/32] (OCP MX fp4). That storage, like the
// block FP8 one (fp8.go), is the same for every family that ships it: it
// lives here. Each value decodes exactly as code × 2^(e − 127) where a float
// is needed (rows.Segment.Packed); a target whose consumer stores MX fp4
// itself moves the bytes unchanged (plan.TRepackMXFP4).

// FP4ScaleSuffix names an FP4 weight's scales: X.weight -> X.scale.
const FP4ScaleSuffix = ".scale"

// FP4Scale reports whether src is FP4 codes with E8M0 scales the reader
// decodes: the scale's name and block ([1, values per scale]). Shapes are
// checked where the segment is (rows.Check).
func (m *Model) FP4Scale(src string) (scale string, block []int64, ok bool) {
	t, found := m.Checkpoint.Tensors[src]
	if !found || t.DType != st.I8 && t.DType != st.U8 || len(t.Shape) != 2 {
		return "", nil, false
	}
	base, cut := strings.CutSuffix(src, ".weight")
	if !cut {
		return "", nil, false
	}
	s, found := m.Checkpoint.Tensors[base+FP4ScaleSuffix]
	if !found || s.DType != st.F8E8M0 || len(s.Shape) != 2 || s.Shape[1] <= 0 || 2*t.Shape[1]%s.Shape[1] != 0 {
		return "", nil, false
	}
	return s.Name, []int64{1, 2 * t.Shape[1] / s.Shape[1]}, true
}

// FP4Segment is rows of an FP4 weight as the reader decodes them.
func (m *Model) FP4Segment(src string, row, n int64) (rows.Segment, bool) {
	scale, block, ok := m.FP4Scale(src)
	if !ok {
		return rows.Segment{}, false
	}
	return rows.Segment{Source: src, Row: row, Rows: n, Scale: scale, Block: block, Packed: rows.PackedE2M1}, true
}

// isFP4Scale reports whether name is the scale of an FP4 weight.
func (m *Model) isFP4Scale(name string) bool {
	base, ok := strings.CutSuffix(name, FP4ScaleSuffix)
	if !ok {
		return false
	}
	_, _, ok = m.FP4Scale(base + ".weight")
	return ok
}
