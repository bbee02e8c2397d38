package gguf_test

import (
	"bytes"
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

// hyRecord reads one of the Hy3 fixture's reference records.
func hyRecord(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.Hy3+"-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// refTensorOrder is a reference record's tensor names in the file's order.
func refTensorOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range ref.Tensors {
		names = append(names, rt.Name)
	}
	return names
}

// sameAsRecord checks a GGUF file against a reference record: every tensor
// and key, the keys' order and, with order, the tensors'.
func sameAsRecord(t *testing.T, path string, raw []byte, order bool) *gg.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	equalsReference(t, data, f, raw)
	if got, want := fileKeys(f), refKeys(t, raw); !slices.Equal(got, want) {
		t.Errorf("key order\n got %v\nwant %v", got, want)
	}
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	if want := refTensorOrder(t, raw); order && !slices.Equal(names, want) {
		t.Errorf("tensor order\n got %v\nwant %v", names, want)
	}
	return f
}

// Hy3's sidecar is the reference converter's --mtp file tensor for tensor
// and key for key (in its order), at bf16 and f16 (the tensors in the
// target's order, as for every family: the shared ones, then block by
// block, the stacked experts last): its three
// chained MTP layers blk.2..4, final_layernorm as nextn.shared_head_norm,
// the expert bias named bare (blk.N.exp_probs_b) and float32, the router float32.
func TestHy3SidecarEqualsReference(t *testing.T) {
	for _, prec := range []string{"bf16", "f16"} {
		t.Run(prec, func(t *testing.T) {
			f := sameAsRecord(t, exportTo(t, fixtures.Ensure(t, fixtures.Hy3), prec), hyRecord(t, prec), false)
			if n, ok := f.Uint("hy_v3.nextn_predict_layers"); !ok || n != 3 {
				t.Errorf("nextn_predict_layers %d", n)
			}
			for name, typ := range map[string]gg.GGMLType{"blk.4.exp_probs_b": gg.F32, "blk.4.ffn_gate_inp.weight": gg.F32,
				"blk.4.nextn.shared_head_norm.weight": gg.F32, "blk.3.nextn.eh_proj.weight": gg.BF16} {
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

// The head grafted into the reference converter's --no-mtp trunk of Hy3
// (committed as hy3-tiny-nomtp-bf16.gguf) is the reference's bundled file
// byte for byte, and the sidecar split from it is the reference's --mtp file,
// its tensors in the converter's order too.
func TestHy3GraftAndSplitEqualReference(t *testing.T) {
	ref := filepath.Join(fixtures.Root(), "testdata", "gguf_reference")
	var rec struct {
		FileSHA256 string `json:"file_sha256"`
	}
	if err := json.Unmarshal(hyRecord(t, "bundled-bf16"), &rec); err != nil || rec.FileSHA256 == "" {
		t.Fatalf("record: %v", err)
	}
	trunk := filepath.Join(t.TempDir(), "Hy3-Tiny-BF16.gguf")
	b, err := os.ReadFile(filepath.Join(ref, fixtures.Hy3+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.Hy3)))
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
	sameAsRecord(t, files[0], hyRecord(t, "bf16"), true)
}
