package gguf_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// lingRecord reads one of a Ling-3.0 fixture's reference records.
func lingRecord(t *testing.T, fixture, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixture+"-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Ling-3.0's sidecar is the reference converter's --mtp file tensor for
// tensor and key for key (in its order), at bf16 and f16: the gated MLA
// layer (attn_gate, attn_k_b / attn_v_b split from kv_b_proj), the expert
// bias as exp_probs_b.bias, final_layernorm as layer_output_norm, the
// per-layer key-value head counts and SwiGLU clamps padded over the MTP block.
func TestLing3SidecarEqualsReference(t *testing.T) {
	for _, prec := range []string{"bf16", "f16"} {
		t.Run(prec, func(t *testing.T) {
			f := sameAsRecord(t, exportTo(t, fixtures.Ensure(t, fixtures.Ling3), prec), lingRecord(t, fixtures.Ling3, prec), false)
			if v, ok := f.Lookup("bailingmoe3.swiglu_clamp_exp"); !ok || v.Len() != 3 {
				t.Errorf("swiglu_clamp_exp %v", v)
			}
			for name, typ := range map[string]gg.GGMLType{"blk.2.layer_output_norm.weight": gg.F32, "blk.2.attn_gate.weight": gg.BF16,
				"blk.2.exp_probs_b.bias": gg.F32, "blk.2.ffn_gate_inp.weight": gg.F32} {
				if prec == "f16" && typ == gg.BF16 {
					typ = gg.F16
				}
				if i := slices.IndexFunc(f.Tensors, func(ti gg.TensorInfo) bool { return ti.Name == name }); i < 0 || f.Tensors[i].Type != typ {
					t.Errorf("%s is not %s", name, typ)
				}
			}
		})
	}
}

// The head grafted into the reference converter's --no-mtp trunk of
// Ling-3.0 (a KDA layer and a gated-MLA layer; committed as
// FIXTURE-nomtp-bf16.gguf, the rigged twin's too) is the reference's bundled
// file byte for byte, and the sidecar split from it is the reference's --mtp
// file, its tensors in the converter's order.
func TestLing3GraftAndSplitEqualReference(t *testing.T) {
	for _, fx := range []string{fixtures.Ling3, fixtures.Ling3Rigged} {
		t.Run(fx, func(t *testing.T) {
			var rec struct {
				FileSHA256 string `json:"file_sha256"`
			}
			if err := json.Unmarshal(lingRecord(t, fx, "bundled-bf16"), &rec); err != nil || rec.FileSHA256 == "" {
				t.Fatalf("record: %v", err)
			}
			trunk := filepath.Join(t.TempDir(), "Ling3-Tiny-BF16.gguf")
			b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-nomtp-bf16.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(trunk, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(source.Dir(fixtures.Ensure(t, fx)))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Checkpoint.Close()
			out := filepath.Join(t.TempDir(), "out")
			o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
			if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Out: out, NoCard: true, Version: "test"}); err != nil {
				t.Fatal(err)
			}
			bundled := filepath.Join(out, filepath.Base(trunk))
			got, err := os.ReadFile(bundled)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != rec.FileSHA256 {
				t.Errorf("the grafted file's sha256 is %x, the reference bundled file's %s", sum, rec.FileSHA256)
			}
			side := filepath.Join(t.TempDir(), "side")
			if _, err := gguf.Split(context.Background(), bundled, side, false, "test"); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(side, "*.gguf"))
			if len(files) != 1 {
				t.Fatalf("split wrote %v", files)
			}
			sameAsRecord(t, files[0], lingRecord(t, fx, "bf16"), true)
		})
	}
}
