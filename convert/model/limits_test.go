package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// withConfig copies a fixture into a temporary folder (files symlinked)
// with its text configuration (text_config, or the root of a flat config)
// changed by mutate.
func withConfig(t *testing.T, fixture string, mutate func(text map[string]any)) string {
	t.Helper()
	src := fixtures.Ensure(t, fixture)
	dir := t.TempDir()
	testfs.LinkDir(t, src, dir, ConfigFile)
	raw, err := os.ReadFile(filepath.Join(src, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	text := root
	if tc, ok := root["text_config"].(map[string]any); ok {
		text = tc
	}
	mutate(text)
	raw, _ = json.Marshal(root)
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// allocated runs fn and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Counts from config.json that the checkpoint cannot back are refused fast,
// in little memory, with the key named; so is an MTP depth from a name.
func TestHugeCountsAreRefusedCheaply(t *testing.T) {
	set := func(kv map[string]any) func(map[string]any) {
		return func(text map[string]any) {
			delete(text, "layer_types")
			for k, v := range kv {
				text[k] = v
			}
		}
	}
	cases := []struct {
		name    string
		fixture string
		mutate  func(map[string]any)
		want    string
	}{
		{"16M layers", fixtures.Qwen36, set(map[string]any{"num_hidden_layers": 16000000}), "num_hidden_layers is 16000000"},
		{"60000 layers", fixtures.Qwen36, set(map[string]any{"num_hidden_layers": 60000}), "config.json: num_hidden_layers is 60000, more layers than the checkpoint's 97 tensors can hold"},
		{"16M per-expert experts", fixtures.Next, set(map[string]any{"num_experts": 16000000}), "config.json: num_experts is 16000000, but the checkpoint's 7755 tensors cannot hold its 5 blocks of experts stored one by one"},
		{"16M experts, mtp per-expert", fixtures.Qwen35, set(map[string]any{"num_experts": 16000000}), "config.json: num_experts is 16000000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := withConfig(t, c.fixture, c.mutate)
			var err error
			n := allocated(func() {
				var m *Model
				if m, err = Load(source.Dir(dir)); err == nil {
					m.Checkpoint.Close()
				}
			})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %v, want %q naming the folder", err, c.want)
			}
			if n > 64<<20 || len(err.Error()) > 1024 {
				t.Errorf("%d bytes allocated, a %d-byte message", n, len(err.Error()))
			}
		})
	}
}

// A fused checkpoint whose config declares millions of experts is described
// without work in proportion to them, its problems in a bounded message.
func TestHugeFusedExpertCountStaysCheap(t *testing.T) {
	dir := withConfig(t, fixtures.Qwen36, func(text map[string]any) { text["num_experts"] = 16000000 })
	var m *Model
	var err error
	n := allocated(func() { m, err = Load(source.Dir(dir)) })
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	head, trunk := m.HeadError(), m.TrunkError()
	if head == nil || trunk == nil || !strings.Contains(head.Error(), "the config implies [16000000 256 128]") {
		t.Fatalf("head %v\ntrunk %v", head, trunk)
	}
	if n > 64<<20 || len(head.Error()) > 8<<10 || len(trunk.Error()) > 8<<10 {
		t.Errorf("%d bytes allocated, messages of %d and %d bytes", n, len(head.Error()), len(trunk.Error()))
	}
}

// Many blocks with a single expert tensor each would make describing list
// blocks x num_experts missing tensors: their sum is bounded by the headers.
func TestManyPerExpertBlocksAreRefused(t *testing.T) {
	m := load(t, fixtures.Qwen36)
	c := *m.Config
	c.NumHiddenLayers, c.NumExperts, c.LayerTypes = 1024, 300, nil
	for i := range c.NumHiddenLayers {
		c.LayerTypes = append(c.LayerTypes, LinearAttention)
		s := *m.Checkpoint.Tensors["mtp.norm.weight"]
		s.Name = m.TextPrefix + "layers." + strconv.Itoa(i) + ".mlp.experts.0.gate_proj.weight"
		m.Checkpoint.Tensors[s.Name] = &s
		m.Checkpoint.Names = append(m.Checkpoint.Names, s.Name)
	}
	var err error
	n := allocated(func() { _, err = Describe(&c, m.Checkpoint) })
	if err == nil || !strings.Contains(err.Error(), "config.json: num_experts is 300, but the checkpoint's 1121 tensors cannot hold its 1020 blocks") {
		t.Fatalf("error %v", err)
	}
	if n > 16<<20 {
		t.Errorf("%d bytes allocated", n)
	}
}

func TestDeepMTPNameIsRefused(t *testing.T) {
	for _, layer := range []string{"65535", "99999999", "9223372036854775807"} {
		t.Run(layer, func(t *testing.T) {
			m := load(t, fixtures.Qwen36)
			s := *m.Checkpoint.Tensors["mtp.norm.weight"]
			s.Name = "mtp.layers." + layer + ".x"
			m.Checkpoint.Tensors[s.Name] = &s
			m.Checkpoint.Names = append(m.Checkpoint.Names, s.Name)
			var err error
			n := allocated(func() { _, err = Describe(m.Config, m.Checkpoint) })
			want := "model-00003-of-00003.safetensors: tensor mtp.layers." + layer + ".x names MTP layer " + layer + ", but the checkpoint has only 20 mtp.* tensors"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q", err, want)
			}
			if n > 16<<20 {
				t.Errorf("%d bytes allocated", n)
			}
		})
	}
}

// Problem lists, and the runs of a missing-tensor list, are capped.
func TestProblemListsAreCapped(t *testing.T) {
	m := load(t, fixtures.Next)
	// Every other expert of the head, and every trunk layer's norm, missing;
	// every head tensor of the wrong shape.
	drop(m.Checkpoint, func(n string) bool {
		if rest, ok := strings.CutPrefix(n, "mtp.layers.0.mlp.experts."); ok {
			num, _, _ := strings.Cut(rest, ".")
			e, _ := strconv.Atoi(num)
			return e%2 == 0
		}
		return !strings.HasSuffix(n, "input_layernorm.weight")
	})
	for _, n := range m.Checkpoint.Names {
		if !strings.Contains(n, ".experts.") {
			m.Checkpoint.Tensors[n].Shape = []int64{3}
		}
	}
	m = redescribe(t, m)
	head, trunk := m.HeadError(), m.TrunkError()
	if head == nil || trunk == nil {
		t.Fatal("accepted")
	}
	if w := "mtp.layers.0.mlp.experts.{1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,and 236 more ranges}.down_proj.weight"; !strings.Contains(head.Error(), w) {
		t.Errorf("head error does not say %q:\n%s", w, head)
	}
	msg := trunk.Error()
	if w := "  - and " + strconv.Itoa(len(m.TrunkProblems)-MaxListed) + " more problems"; len(m.TrunkProblems) <= MaxListed || !strings.HasSuffix(msg, w) {
		t.Errorf("trunk error of %d problems does not end with %q:\n%s", len(m.TrunkProblems), w, msg)
	}
	if len(msg) > 8<<10 || strings.Count(msg, "\n  - ") != MaxListed+1 {
		t.Errorf("%d bytes, %d lines:\n%s", len(msg), strings.Count(msg, "\n"), msg)
	}
	r, err := m.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if r.ProblemCount != len(m.MTPProblems)+len(m.TrunkProblems) || len(r.Problems) != MaxListed+1 {
		t.Errorf("report: %d problems listed of %d", len(r.Problems), r.ProblemCount)
	}
}

// The cap counts what it leaves out in English: "and 1 more problem".
func TestCapListCountsInEnglish(t *testing.T) {
	for n, want := range map[int]string{1: "and 1 more problem", 2: "and 2 more problems"} {
		items := make([]string, MaxListed+n)
		if got := CapList(items, "problems"); len(got) != MaxListed+1 || got[MaxListed] != want {
			t.Errorf("%d over: %q, want %q", n, got[len(got)-1], want)
		}
	}
}
