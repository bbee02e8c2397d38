package model

import (
	"slices"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// An MXFP8 tensor is F8_E4M3 codes with an F8_E8M0 X_scale per 32 values
// of its last dimension, matrices and expert stacks alike; any other dtype
// or shape of either is not MXFP8 (and its scale no block scale).
func TestMXFP8Scale(t *testing.T) {
	t.Parallel()
	ts := func(kv ...*st.Tensor) map[string]*st.Tensor {
		m := map[string]*st.Tensor{}
		for _, x := range kv {
			m[x.Name] = x
		}
		return m
	}
	x := func(name string, d st.DType, shape ...int64) *st.Tensor {
		return &st.Tensor{TensorInfo: st.TensorInfo{Name: name, DType: d, Shape: shape}}
	}
	for _, c := range []struct {
		name  string
		names map[string]*st.Tensor
		src   string
		ok    bool
	}{
		{"matrix", ts(x("a.weight", st.F8E4M3, 8, 64), x("a.weight_scale", st.F8E8M0, 8, 2)), "a.weight", true},
		{"expert stack", ts(x("e.gate_up_proj", st.F8E4M3, 4, 8, 64), x("e.gate_up_proj_scale", st.F8E8M0, 4, 8, 2)), "e.gate_up_proj", true},
		{"u8 scale", ts(x("a.weight", st.F8E4M3, 8, 64), x("a.weight_scale", st.U8, 8, 2)), "a.weight", false},
		{"per 16", ts(x("a.weight", st.F8E4M3, 8, 64), x("a.weight_scale", st.F8E8M0, 8, 4)), "a.weight", false},
		{"rows differ", ts(x("a.weight", st.F8E4M3, 8, 64), x("a.weight_scale", st.F8E8M0, 4, 2)), "a.weight", false},
		{"bf16 codes", ts(x("a.weight", st.BF16, 8, 64), x("a.weight_scale", st.F8E8M0, 8, 2)), "a.weight", false},
		{"vector", ts(x("a.weight", st.F8E4M3, 64), x("a.weight_scale", st.F8E8M0, 2)), "a.weight", false},
		{"no scale", ts(x("a.weight", st.F8E4M3, 8, 64)), "a.weight", false},
	} {
		scale, block, ok := mxfp8Scale(c.names, c.src)
		if ok != c.ok || ok && (scale != c.src+MXFP8ScaleSuffix || !slices.Equal(block, []int64{1, 32})) {
			t.Errorf("%s: %q %v %v, want ok %v", c.name, scale, block, ok, c.ok)
		}
		if got := isMXFP8Scale(c.names, c.src+MXFP8ScaleSuffix); got != c.ok {
			t.Errorf("%s: isMXFP8Scale %v, want %v", c.name, got, c.ok)
		}
	}
}
