package gguf_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// deepSeekV4Sidecar: whatever the precision asked, the experts are MXFP4,
// eh_proj Q8_0, the bf16 matrices BF16 and float32 tensors F32, in a file
// of type MXFP4_MOE (the converter's), second key the chat template.
func deepSeekV4Sidecar(t *testing.T, _ string, f *gg.File) {
	tensorTypes(t, f, "bf16", map[string]gg.GGMLType{
		"blk.4.ffn_gate_exps.weight": gg.MXFP4, "blk.4.ffn_up_exps.weight": gg.MXFP4, "blk.4.ffn_down_exps.weight": gg.MXFP4,
		"blk.4.nextn.eh_proj.weight": gg.Q8_0, "blk.4.attn_q_a.weight": gg.BF16, "blk.4.hc_attn_fn.weight": gg.F32, "output_hc_fn.weight": gg.F32,
	})
	if ft, _ := f.Uint("general.file_type"); gg.FileType(ft) != gg.FileMXFP4MOE {
		t.Errorf("general.file_type %d, want %d (MXFP4_MOE)", ft, gg.FileMXFP4MOE)
	}
	if f.KV[1].Key != "tokenizer.chat_template" {
		t.Errorf("second key %s, want tokenizer.chat_template", f.KV[1].Key)
	}
}

// deepSeekV4FP8Sidecar: the release's block-FP8 matrices are Q8_0 (the
// converter dequantizes them and forces Q8_0), the rest as deepSeekV4Sidecar.
func deepSeekV4FP8Sidecar(t *testing.T, _ string, f *gg.File) {
	tensorTypes(t, f, "bf16", map[string]gg.GGMLType{
		"blk.4.ffn_gate_exps.weight": gg.MXFP4, "blk.4.nextn.eh_proj.weight": gg.Q8_0, "blk.4.attn_q_a.weight": gg.Q8_0,
		"blk.4.ffn_down_shexp.weight": gg.Q8_0, "blk.4.ffn_gate_inp.weight": gg.BF16, "blk.4.hc_attn_fn.weight": gg.F32,
	})
	if ft, _ := f.Uint("general.file_type"); gg.FileType(ft) != gg.FileMXFP4MOE {
		t.Errorf("general.file_type %d, want %d (MXFP4_MOE)", ft, gg.FileMXFP4MOE)
	}
}

// The precisions llama-quantize would make and a graft are refused by
// name: they would requantize the release's MXFP4 experts, and the
// converter's bundled file has no head to equal.
func TestDeepSeekV4RefusesRequantAndGraft(t *testing.T) {
	t.Parallel()
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.DeepSeekV4)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	for _, o := range []targets.Options{
		{HeadPrecision: "int8", Set: map[string]bool{targets.OptHeadPrecision: true}},
		{GGUFType: "Q4_K_M", Set: map[string]bool{targets.OptGGUFType: true}},
		{Graft: filepath.Join(t.TempDir(), "trunk.gguf"), Set: map[string]bool{targets.OptGraft: true}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		_, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Dest: export.Out(out), NoCard: true, Version: "test"})
		var ue targets.UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), "requantize the MXFP4 experts") {
			t.Errorf("%+v: %v, want the usage error naming the MXFP4 experts", o, err)
		}
	}
}

// verify --src recomputes every tensor of the sidecar (the MXFP4 experts
// byte for byte from the release's codes and scales, eh_proj from both
// halves; of the FP8 release, the Q8_0 matrices from codes and ue8m0
// scales, eh_proj each half with its own) and its stored-type check holds.
func TestDeepSeekV4SidecarVerifies(t *testing.T) {
	t.Parallel()
	for _, fx := range []string{fixtures.DeepSeekV4, fixtures.DeepSeekV4FP8} {
		src := fixtures.Ensure(t, fx)
		if n := verifiedTensors(t, src, exportTo(t, src, "")); n != 34 {
			t.Errorf("%s: %d tensors verified, want 34", fx, n)
		}
	}
}
