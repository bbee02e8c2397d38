package gguf_test

import (
	"context"
	"os"
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

// Step-3.5's sidecar, its three chained heads as blocks 4, 5 and 6, holds
// the per-layer head counts and sliding-window pattern over the 7 blocks,
// the SwiGLU clamps padded for the MTP layers, the two RoPE bases from
// rope_theta's list. Step-3.7's (nested text_config, llama3 RoPE scaling)
// also holds the converter's rope_freqs first, computed from the config;
// its trunk holds rope_freqs already: the graft keeps it, once.
func step35Sidecar(ropeFreqs bool) func(t *testing.T, prec string, f *gg.File) {
	return func(t *testing.T, prec string, f *gg.File) {
		if got := f.Tensors[0].Name == "rope_freqs.weight"; got != ropeFreqs {
			t.Errorf("first tensor %s", f.Tensors[0].Name)
		}
	}
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
	_, err = export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Dest: export.Out(filepath.Join(t.TempDir(), "out")), NoCard: true, Version: "test"})
	if err == nil || !strings.Contains(err.Error(), "has no rope_freqs.weight, which the reference converter writes for this config") {
		t.Fatalf("graft onto a trunk without rope_freqs: %v", err)
	}
}
