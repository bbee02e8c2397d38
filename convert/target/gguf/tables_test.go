package gguf_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The target names nothing itself: architecture, pre-tokenizer, tensor
// names and metadata keys all come from the family's GGUF table.
func TestTargetReadsFamilyTable(t *testing.T) {
	m := testmodel.LoadDir(t, withTokenizer(t, fixtures.Qwen36))
	g := &m.Spec.GGUF
	g.Arch, g.PreTokenizer = "test_arch", "test_pre"
	g.Layer = maps.Clone(g.Layer)
	g.Layer["self_attn.q_proj.weight"] = "attn_q_test.weight"
	g.HeadTop = maps.Clone(g.HeadTop)
	g.HeadTop["fc.weight"] = "nextn.test_proj.weight"
	tg := testmodel.Target(t, "gguf")
	p, err := tg.Plan(m, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range p.Tensors {
		names = append(names, o.Name)
	}
	for _, want := range []string{"blk.4.attn_q_test.weight", "blk.4.nextn.test_proj.weight", "token_embd.weight", "output.weight"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tensor %s in %v", want, names)
		}
	}
	kv := map[string]any{}
	for _, k := range p.GGUF {
		kv[k.Key] = k.Value.V
	}
	if kv["general.architecture"] != "test_arch" || kv["tokenizer.ggml.pre"] != "test_pre" || kv["test_arch.block_count"] == nil {
		t.Errorf("metadata %v", kv)
	}
	for k := range kv {
		if strings.HasPrefix(k, "qwen35moe.") {
			t.Errorf("key %s not from the table", k)
		}
	}
	// A family without a llama.cpp architecture is refused, naming it.
	g.Arch = ""
	if _, err := tg.Plan(m, convert.Options{}); err == nil || !strings.Contains(err.Error(), "does not know llama.cpp's architecture for family qwen3_5_moe") {
		t.Errorf("no arch: %v", err)
	}
}
