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

// readGGUF reads a whole GGUF file.
func readGGUF(t *testing.T, path string) ([]byte, *gg.File) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return data, f
}

// glm52Reference is a record of interop/reference_gguf.py for the GLM-5.2 fixture.
func glm52Reference(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.GLM52+"-"+name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// GLM-5.2's sidecar (glm-dsa) is the reference converter's --mtp file
// tensor for tensor and key for key, in its key order, at bf16 and f16: the
// NextN layer's DSA indexer carried (indexer.proj float32), the rotary
// width set again in place and the per-layer indexer modes
// (attention.indexer.types, true for full) after the indexer's keys.
func TestGLM52SidecarEqualsReference(t *testing.T) {
	for _, prec := range []string{"bf16", "f16"} {
		t.Run(prec, func(t *testing.T) {
			raw := glm52Reference(t, prec+".json")
			data, f := readGGUF(t, exportTo(t, fixtures.Ensure(t, fixtures.GLM52), prec))
			equalsReference(t, data, f, raw)
			if got, want := fileKeys(f), refKeys(t, raw); !slices.Equal(got, want) {
				t.Errorf("key order\n got %v\nwant %v", got, want)
			}
			var types []bool
			for _, kv := range f.KV {
				if kv.Key == "glm-dsa.attention.indexer.types" {
					types, _ = kv.Value.V.([]bool)
				}
			}
			if !slices.Equal(types, []bool{true, false}) {
				t.Errorf("attention.indexer.types %v, want [true false] (indexer_types full, shared)", types)
			}
			found := false
			for _, ti := range f.Tensors {
				found = found || ti.Name == "blk.2.indexer.proj.weight" && ti.Type == gg.F32
			}
			if !found {
				t.Error("blk.2.indexer.proj.weight is not F32")
			}
		})
	}
}

// The head grafted into the reference converter's --no-mtp trunk of GLM-5.2
// (committed as glm5.2-tiny-nomtp-bf16.gguf; its layer 1 "shared", without
// indexer tensors) is the reference's bundled file byte for byte, and the
// sidecar split from it is the reference's --mtp sidecar.
func TestGLM52GraftEqualsReferenceBundled(t *testing.T) {
	var rec struct {
		FileSHA256 string `json:"file_sha256"`
	}
	if err := json.Unmarshal(glm52Reference(t, "bundled-bf16.json"), &rec); err != nil || rec.FileSHA256 == "" {
		t.Fatalf("record: %v", err)
	}
	trunk := filepath.Join(t.TempDir(), "Glm5.2-Tiny-BF16.gguf")
	b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.GLM52+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("blk.1.indexer.")) || !bytes.Contains(b, []byte("blk.0.indexer.")) {
		t.Fatal("the reference trunk should hold the indexer of layer 0 (full) only")
	}
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.GLM52)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Out: out, NoCard: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	grafted := filepath.Join(out, filepath.Base(trunk))
	got, err := os.ReadFile(grafted)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != rec.FileSHA256 {
		t.Errorf("the grafted file's sha256 is %x, the reference bundled file's %s", sum, rec.FileSHA256)
	}
	side := filepath.Join(t.TempDir(), "side")
	if _, err := gguf.Split(context.Background(), grafted, side, false, "test"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(side)
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".gguf") {
			file = filepath.Join(side, e.Name())
		}
	}
	raw := glm52Reference(t, "bf16.json")
	data, f := readGGUF(t, file)
	equalsReference(t, data, f, raw)
	if got, want := fileKeys(f), refKeys(t, raw); !slices.Equal(got, want) {
		t.Errorf("split sidecar's key order\n got %v\nwant %v", got, want)
	}
}
