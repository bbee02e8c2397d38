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
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// Step-3.5's sidecar, its three chained heads as blocks 4, 5 and 6, is the
// reference converter's --mtp file tensor for tensor and key for key, in
// its key order (testdata/gguf_reference, recorded by
// interop/reference_gguf.py), at bf16 and f16: the per-layer head counts and
// sliding-window pattern over the 7 blocks, the SwiGLU clamps padded for the
// MTP layers, the two RoPE bases from rope_theta's list.
// Step-3.7's (nested text_config, llama3 RoPE scaling) also holds the
// converter's rope_freqs first, computed from the config.
func TestStep35SidecarEqualsReference(t *testing.T) {
	for _, c := range [][2]string{{fixtures.Step35, "bf16"}, {fixtures.Step35, "f16"}, {fixtures.Step37, "bf16"}, {fixtures.Step37, "f16"}} {
		fx, prec := c[0], c[1]
		t.Run(fx+"/"+prec, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-"+prec+".json"))
			if err != nil {
				t.Fatal(err)
			}
			path := exportTo(t, fixtures.Ensure(t, fx), prec)
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
			if n, ok := f.Uint("step35.nextn_predict_layers"); !ok || n != 3 {
				t.Errorf("nextn_predict_layers %d", n)
			}
			if got := f.Tensors[0].Name == "rope_freqs.weight"; got != (fx == fixtures.Step37) {
				t.Errorf("first tensor %s", f.Tensors[0].Name)
			}
		})
	}
}

// The heads grafted into the reference converter's --no-mtp trunk of
// Step-3.5 (committed as step3.5-flash-tiny-nomtp-bf16.gguf) are the
// reference's bundled file byte for byte, and our split of that file is the
// reference's --mtp sidecar.
//
// Step-3.7's trunk holds rope_freqs already: the graft keeps it, once.
func TestStep35GraftEqualsReferenceBundled(t *testing.T) {
	for _, fx := range []string{fixtures.Step35, fixtures.Step37} {
		t.Run(fx, func(t *testing.T) { graftEqualsReferenceBundled(t, fx) })
	}
}

func graftEqualsReferenceBundled(t *testing.T, fx string) {
	ref := filepath.Join(fixtures.Root(), "testdata", "gguf_reference")
	raw, err := os.ReadFile(filepath.Join(ref, fx+"-bundled-bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		FileSHA256 string `json:"file_sha256"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.FileSHA256 == "" {
		t.Fatalf("record: %v", err)
	}
	trunk := filepath.Join(t.TempDir(), "Step3.5-Flash-Tiny-BF16.gguf")
	b, err := os.ReadFile(filepath.Join(ref, fx+"-nomtp-bf16.gguf"))
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
		t.Fatalf("split: %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	sideRaw, err := os.ReadFile(filepath.Join(ref, fx+"-bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	equalsReference(t, data, f, sideRaw)
}

// A trunk without the rope_freqs the reference converter writes for
// Step-3.7's llama3 scaling (here Step-3.5's, alike on the trunk's layers)
// is refused naming the tensor: the heads would run with unscaled RoPE.
func TestStep37GraftRefusesTrunkWithoutRopeFreqs(t *testing.T) {
	trunk := filepath.Join(t.TempDir(), "trunk.gguf")
	b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.Step35+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.Step37)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
	_, err = export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Out: filepath.Join(t.TempDir(), "out"), NoCard: true, Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "has no rope_freqs.weight, which the reference converter writes for this config") {
		t.Fatalf("graft onto a trunk without rope_freqs: %v", err)
	}
}
