package gguf_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
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
		src := fixtures.Ensure(t, fixtures.Gemma4AssistantCentroid)
		if n := verifiedTensors(t, src, exportTo(t, src, prec)); n != 49 {
			t.Errorf("%s: %d tensors verified, want 49", prec, n)
		}
	}
}

// The card says what the file is: the drafter, paired with its target's
// GGUF, no trunk component (rope_freqs is the drafter's), its dense MLP.
func TestGemma4AssistantCard(t *testing.T) {
	t.Parallel()
	card := cardOf(t, fixtures.Gemma4Assistant)
	for _, want := range []string{"a separate drafter model that shares its target's KV cache", "llama-server -m TARGET.gguf -md ",
		"- MLP: dense, in every block of the drafter", "| head | F32 | 26 |"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(card, "| trunk |") || strings.Contains(card, "SwiGLU") {
		t.Errorf("the card names a trunk or SwiGLU:\n%s", card)
	}
}
