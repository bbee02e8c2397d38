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
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// The Gemma-4 assistant's file (its reference equality is in
// referenceFamilies): blocks 0..3 with no trunk before them, the
// projections top-level, the centroid head dropped, the vocabulary as
// LlamaHfVocab's (scores, BYTE tokens), rope_freqs computed.
func gemma4AssistantFile(t *testing.T, prec string, f *gg.File) {
	tensorTypes(t, f, prec, map[string]gg.GGMLType{"rope_freqs.weight": gg.F32, "blk.3.layer_output_scale.weight": gg.F32,
		"nextn.pre_projection.weight": map[string]gg.GGMLType{"bf16": gg.BF16, "f16": gg.F16}[prec]})
	for _, ti := range f.Tensors {
		if strings.HasPrefix(ti.Name, "masked_embd") || strings.HasPrefix(ti.Name, "blk.4.") {
			t.Errorf("%s: the converter writes no such tensor", ti.Name)
		}
	}
	if f.String("tokenizer.ggml.model") != "gemma4" {
		t.Errorf("tokenizer.ggml.model %q", f.String("tokenizer.ggml.model"))
	}
}

// --graft has nothing to graft (the assistant is its own model); verify
// --src recomputes every tensor of the file, rope_freqs included.
func TestGemma4AssistantGraftRefusedAndVerify(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Gemma4AssistantCentroid)
	if _, err := testmodel.Plan(t, m, "gguf", targets.Options{Graft: "trunk.gguf", Set: map[string]bool{targets.OptGraft: true}}); err == nil ||
		!strings.Contains(err.Error(), "separate drafter model") {
		t.Errorf("--graft: %v", err)
	}
	for _, prec := range []string{"bf16", "int4"} {
		path := exportTo(t, fixtures.Ensure(t, fixtures.Gemma4AssistantCentroid), prec)
		src, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.Gemma4AssistantCentroid)))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := manifests.Verify(context.Background(), filepath.Dir(path), src.Checkpoint)
		src.Checkpoint.Close()
		if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != 49 {
			t.Errorf("%s: verify --src: %v %+v", prec, err, rep)
		}
	}
}

// The card says what the file is: the drafter, paired with its target's
// GGUF, no trunk component (rope_freqs is the drafter's), its dense MLP.
func TestGemma4AssistantCard(t *testing.T) {
	t.Parallel()
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.Gemma4Assistant)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Dest: export.Out(out), Version: "test"}); err != nil {
		t.Fatal(err)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a separate drafter model that shares its target's KV cache", "llama-server -m TARGET.gguf -md ",
		"- MLP: dense, in every block of the drafter", "| head | F32 | 26 |"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(string(card), "| trunk |") || strings.Contains(string(card), "SwiGLU") {
		t.Errorf("the card names a trunk or SwiGLU:\n%s", card)
	}
}
