package gguf_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// GLM-5.2's sidecar (glm-dsa) carries the NextN layer's DSA indexer
// (indexer.proj float32), the rotary width set again in place and the
// per-layer indexer modes (attention.indexer.types, true for full) after the
// indexer's keys.
func glm52Sidecar(t *testing.T, prec string, f *gg.File) {
	var types []bool
	for _, kv := range f.KV {
		if kv.Key == "glm-dsa.attention.indexer.types" {
			types, _ = kv.Value.V.([]bool)
		}
	}
	if !slices.Equal(types, []bool{true, false}) {
		t.Errorf("attention.indexer.types %v, want [true false] (indexer_types full, shared)", types)
	}
	tensorTypes(t, f, prec, map[string]gg.GGMLType{"blk.2.indexer.proj.weight": gg.F32})
}

// The reference converter's --no-mtp trunks of GLM-5.2 and 5.3 the graft is
// checked on (FIXTURE-nomtp-bf16.gguf) have their layer 1 "shared", without
// indexer tensors: the graft keeps a trunk-only per-layer array.
func TestGLM52ReferenceTrunkHasLayer0IndexerOnly(t *testing.T) {
	for _, fx := range []string{fixtures.GLM52, fixtures.GLM53} {
		b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-nomtp-bf16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("blk.1.indexer.")) || !bytes.Contains(b, []byte("blk.0.indexer.")) {
			t.Errorf("%s: the reference trunk should hold the indexer of layer 0 (full) only", fx)
		}
	}
}

// GLM-5.3's FP8 release exports byte for byte as its dequantized twin.
func TestGLM53FP8SidecarEqualsDequantized(t *testing.T) {
	fp8SidecarEqualsTwin(t, fixtures.GLM53, fixtures.GLM53Dequant, "glm5.3", nil)
}

// GLM-5 and GLM-5.1 configure the same layout without indexer_types: the
// reference converter, which reads config.json as stored under its pinned
// transformers, writes no attention.indexer.types, and neither do we
// (glm5-tiny: glm5.2-tiny's config without the list, its modes derived from
// index_topk_freq, recorded by interop/reference_gguf.py's VARIANTS).
func TestGLM5SidecarEqualsReference(t *testing.T) {
	base := fixtures.Ensure(t, fixtures.GLM52)
	src := filepath.Join(t.TempDir(), "glm5-tiny")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, base, src)
	raw, err := os.ReadFile(filepath.Join(base, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "indexer_types")
	cfg["index_topk_freq"], cfg["index_skip_topk_offset"] = 2, 1
	edited, _ := json.Marshal(cfg)
	os.Remove(filepath.Join(src, "config.json"))
	if err := os.WriteFile(filepath.Join(src, "config.json"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prec := range []string{"bf16", "f16"} {
		f := sameAsRecord(t, exportTo(t, src, prec), referenceRecord(t, "glm5-tiny", prec), false)
		for _, kv := range f.KV {
			if kv.Key == "glm-dsa.attention.indexer.types" {
				t.Errorf("%s: attention.indexer.types written for a config without indexer_types", prec)
			}
		}
	}
}
