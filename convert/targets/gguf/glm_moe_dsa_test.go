package gguf_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
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

// The reference converter's --no-mtp trunk of GLM-5.2 the graft is checked
// on (glm5.2-tiny-nomtp-bf16.gguf) has its layer 1 "shared", without indexer
// tensors: the graft keeps a trunk-only per-layer array.
func TestGLM52ReferenceTrunkHasLayer0IndexerOnly(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.GLM52+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("blk.1.indexer.")) || !bytes.Contains(b, []byte("blk.0.indexer.")) {
		t.Fatal("the reference trunk should hold the indexer of layer 0 (full) only")
	}
}
