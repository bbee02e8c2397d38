package mlx_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// int1 is written for a drafter mlx-vlm loads at 1 bit (Linear and
// Embedding modules only: the dense Qwen3.6 and Inkling drafters, the
// Gemma-4 assistant) and refused, naming the stacked tensor, for one with
// stacked experts (Qwen3.6-MoE, Qwen3.8-Flash-Next) or MLA's stacked heads
// (GLM-5.2), which mlx-vlm 0.7.10's loader refuses at 1 bit
// (interop/test_mlx_one_bit.py shows it on the splitter's own folders).
func TestOneBitDrafters(t *testing.T) {
	t.Parallel()
	o := targets.Options{HeadPrecision: "int1", MLXRounding: "cpu",
		Set: map[string]bool{targets.OptHeadPrecision: true, targets.OptMLXRounding: true}}
	for fx, stacked := range map[string]string{
		fixtures.Qwen36: "layers.0.mlp.switch_mlp.", fixtures.Qwen38FlashNext: "layers.0.mlp.switch_mlp.", fixtures.GLM52: "self_attn.unembed_out",
		fixtures.Qwen36Dense: "", fixtures.Inkling: "", fixtures.Gemma4Assistant: "",
	} {
		m, err := model.Load(source.Dir(fixtures.Ensure(t, fx)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		out := filepath.Join(t.TempDir(), "out")
		_, err = export.Export(context.Background(), export.Request{Model: m, Target: "mlx", Dest: export.Out(out), Options: o, Version: "test", AllowLossyHead: true})
		switch {
		case stacked != "" && (err == nil || !strings.Contains(err.Error(), "mlx-vlm 0.7.10 loads 1-bit Linear and Embedding modules only") || !strings.Contains(err.Error(), stacked)):
			t.Errorf("%s: %v; want int1 refused naming %s", fx, err, stacked)
		case stacked == "" && err != nil:
			t.Errorf("%s: %v", fx, err)
		case stacked == "":
			_, h := header(t, filepath.Join(out, "model.safetensors"))
			affine := 0
			for _, e := range h.Tensors {
				if strings.HasSuffix(e.Name, ".scales") && e.DType != st.U8 {
					affine++
				}
			}
			if affine == 0 {
				t.Errorf("%s: no affine-quantized tensor", fx)
			}
		}
	}
}
