package model

import (
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The DeepSeek-V4 releases (V4, V4-Flash-0731, V4.1) store their block-FP8
// weights under another naming than the float-scale releases (fp8.go): an
// e4m3 X.weight with its block scales in X.scale, F8_E8M0 powers of two
// (quantization_config scale_fmt "ue8m0"), one per weight_block_size block
// ([ceil(rows/128), ceil(cols/128)] for [128, 128]). Only the scale's name
// and dtype differ: each weight dequantizes exactly as code × 2^(e − 127)
// per block through the same reader (convert/rows).

// UE8M0ScaleSuffix names an e4m3 weight's E8M0 block scales: X.weight -> X.scale.
const UE8M0ScaleSuffix = FP4ScaleSuffix // the same name as an FP4 weight's scales

// fp8ScaleOf names the block-scale tensor of the F8_E4M3 weight w: the
// float X.weight_scale_inv when the checkpoint holds it, else an F8_E8M0
// X.scale (DeepSeek-V4), else the float name (reported missing where it is
// checked).
func (m *Model) fp8ScaleOf(w string) string {
	if _, ok := m.Checkpoint.Tensors[w+ScaleSuffix]; ok {
		return w + ScaleSuffix
	}
	if s, ok := m.ue8m0Scale(w); ok {
		return s
	}
	return w + ScaleSuffix
}

// ue8m0Scale is the F8_E8M0 X.scale beside an e4m3 X.weight, if there is one.
func (m *Model) ue8m0Scale(w string) (string, bool) {
	base, ok := strings.CutSuffix(w, ".weight")
	if !ok {
		return "", false
	}
	s, ok := m.Checkpoint.Tensors[base+UE8M0ScaleSuffix]
	return base + UE8M0ScaleSuffix, ok && s.DType == st.F8E8M0
}

// isUE8M0Scale reports whether name is the E8M0 block scale of an F8_E4M3
// weight (read with its weight, never planned on its own).
func (m *Model) isUE8M0Scale(name string) bool {
	base, ok := strings.CutSuffix(name, UE8M0ScaleSuffix)
	if !ok {
		return false
	}
	t, ok := m.Checkpoint.Tensors[base+".weight"]
	if !ok || t.DType != st.F8E4M3 {
		return false
	}
	s, ok := m.ue8m0Scale(base + ".weight")
	return ok && s == name
}
