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
