package quant

import (
	"bytes"
	"fmt"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The decoders behind the head-health checks give what MLX computes with:
// mx.dequantize's values (interop/golden_mlx.py, golden_mlx_fp.py), bit for
// bit once rounded to the weights' dtype, for every bits x group x dtype of
// the affine mode and every microscaling mode, decoded from MLX's own codes.
func TestMLXDequantizeGolden(t *testing.T) {
	read := goldenReader(t, "mlx_affine_cpu.safetensors")
	for _, dt := range []string{"bf16", "f16", "f32"} {
		for _, bits := range []int{1, 2, 3, 4, 5, 6, 8} {
			for _, gs := range []int{32, 64, 128} {
				name := fmt.Sprintf("%s.b%d.g%d", dt, bits, gs)
				packed, q := read(name + ".weight")
				want, w := read(name + ".dequant")
				rows, cols := int(w.Shape[0]), int(w.Shape[1])
				dtype := string(w.DType)
				scales, biases := decodeGolden(t, read, name+".scales"), decodeGolden(t, read, name+".biases")
				p := MLXAffineParams{Bits: bits, GroupSize: gs}
				rb, g := len(packed)/int(q.Shape[0]), cols/gs
				got := make([]float32, rows*cols)
				for r := 0; r < rows; r++ {
					DequantizeMLXAffineAs(packed[r*rb:(r+1)*rb], cols, p, scales[r*g:], biases[r*g:], dtype, got[r*cols:(r+1)*cols])
				}
				if enc := encodeGolden(t, dtype, got); !bytes.Equal(enc, want) {
					t.Errorf("%s: dequantized values differ from mx.dequantize's", name)
				}
			}
		}
	}
	read = goldenReader(t, "mlx_fp_cpu.safetensors")
	for _, mode := range []MLXFPMode{MXFP4, MXFP8, NVFP4} {
		packed, _ := read(mode.String() + ".weight")
		scales, _ := read(mode.String() + ".scales")
		want, w := read(mode.String() + ".dequant")
		rows, cols := int(w.Shape[0]), int(w.Shape[1])
		p := MLXFPParams{Mode: mode}
		rb, g := p.RowBytes(cols), cols/mode.GroupSize()
		got := make([]float32, rows*cols)
		for r := 0; r < rows; r++ {
			DequantizeMLXFP(packed[r*rb:(r+1)*rb], cols, p, scales[r*g:(r+1)*g], got[r*cols:(r+1)*cols])
		}
		if enc := encodeGolden(t, string(w.DType), got); !bytes.Equal(enc, want) {
			t.Errorf("%s: dequantized values differ from mx.dequantize's", mode)
		}
	}
}

func decodeGolden(t *testing.T, read func(string) ([]byte, *st.Tensor), name string) []float32 {
	t.Helper()
	raw, tt := read(name)
	out := make([]float32, len(raw)/2)
	if tt.DType == "F32" {
		out = make([]float32, len(raw)/4)
	}
	if err := DecodeF32(string(tt.DType), raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func encodeGolden(t *testing.T, dtype string, vals []float32) []byte {
	t.Helper()
	size := map[string]int{"BF16": 2, "F16": 2, "F32": 4}[dtype]
	out := make([]byte, size*len(vals))
	if _, err := EncodeF32(dtype, vals, out); err != nil {
		t.Fatal(err)
	}
	return out
}
