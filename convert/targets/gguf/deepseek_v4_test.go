package gguf_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
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

// inspect judges the sidecar's MXFP4 experts from their values, decoded
// as ggml's dequantize_row_mxfp4 does (they were "not checked: mtpconv has
// no decoder for it"), and finds a block whose scale byte is 0xFF (2^127:
// its values overflow).
func TestDeepSeekV4SidecarHealthDecodesMXFP4(t *testing.T) {
	t.Parallel()
	path := exportTo(t, fixtures.Ensure(t, fixtures.DeepSeekV4), "")
	health := func() (checked int, unchecked, problems []string) {
		t.Helper()
		fi := targets.FileInspectorFor(path)
		if fi == nil {
			t.Fatal("no inspector for a .gguf file")
		}
		in, err := fi.InspectFile(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			HeadHealth struct {
				Checked   int      `json:"tensors_checked"`
				Unchecked []string `json:"unchecked"`
				Problems  []string `json:"problems"`
			} `json:"head_health"`
		}
		b, _ := json.Marshal(in)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r.HeadHealth.Checked, r.HeadHealth.Unchecked, r.HeadHealth.Problems
	}
	checked, unchecked, problems := health()
	if checked != 28 || len(unchecked) != 0 || len(problems) != 0 {
		t.Fatalf("head health: %d checked (want 28: the three MXFP4 expert stacks too), unchecked %q, problems %q", checked, unchecked, problems)
	}
	f, _, err := gg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti := slices.IndexFunc(f.Tensors, func(x gg.TensorInfo) bool { return x.Name == "blk.4.ffn_down_exps.weight" })
	if ti < 0 || f.Tensors[ti].Type != gg.MXFP4 {
		t.Fatal("no MXFP4 blk.4.ffn_down_exps.weight")
	}
	at := f.DataOffset + f.Tensors[ti].Offset
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[at] = 0xff // the first block's scale byte
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, problems := health(); !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "blk.4.ffn_down_exps.weight") }) {
		t.Fatalf("a block scaled by 2^127 passed: problems %q", problems)
	}
}
