package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"mtpconv"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

type inspectJSON struct {
	Family string `json:"family"`
	MTP    struct {
		Tensors int `json:"tensors"`
		Experts []struct {
			Layout string `json:"layout"`
			Count  int    `json:"count"`
		} `json:"experts"`
	} `json:"mtp"`
	Tensors []struct {
		Name   string `json:"name"`
		SHA256 string `json:"sha256"`
	} `json:"tensors"`
	Problems []string `json:"problems"`
}

func TestInspectJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fixture string
		family  string
		mtp     int
		layout  string
		experts int
	}{
		{fixtures.Qwen36, "qwen3_5_moe", 19, "fused", 256},
		{fixtures.Qwen35, "qwen3_5_moe", 785, "per_expert", 256},
		{fixtures.Next, "qwen3_next", 1553, "per_expert", 512},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			dir := fixtures.Ensure(t, c.fixture)
			// Flags after the positional argument work too.
			code, out, stderr := runCLI(t, "inspect", dir, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var r inspectJSON
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if r.Family != c.family || r.MTP.Tensors != c.mtp || len(r.MTP.Experts) != 1 ||
				r.MTP.Experts[0].Layout != c.layout || r.MTP.Experts[0].Count != c.experts || len(r.Problems) != 0 {
				t.Fatalf("report %+v", r)
			}
		})
	}
}

func TestInspectHash(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCLI(t, "inspect", "--json", "--hash", fixtures.Ensure(t, fixtures.Qwen36))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r inspectJSON
	json.Unmarshal([]byte(out), &r)
	seen := map[string]bool{}
	for _, tr := range r.Tensors {
		if len(tr.SHA256) != 64 {
			t.Fatalf("tensor %s has no hash", tr.Name)
		}
		seen[tr.SHA256] = true
	}
	if len(seen) < len(r.Tensors)/2 {
		t.Errorf("hashes are not per-tensor: %d distinct of %d", len(seen), len(r.Tensors))
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	noConfig := t.TempDir()
	os.WriteFile(filepath.Join(noConfig, "config.json"), []byte("{\"model_type\": "), 0o644)
	badShard := t.TempDir()
	os.WriteFile(filepath.Join(badShard, "config.json"), []byte(`{"model_type":"qwen3_next","hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":8,"linear_num_key_heads":1,"linear_num_value_heads":1,"linear_key_head_dim":4,"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"shared_expert_intermediate_size":4}`), 0o644)
	os.WriteFile(filepath.Join(badShard, "model.safetensors"), []byte{255, 255, 255, 255, 0, 0, 0, 0, '{', '}'}, 0o644)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no args", []string{"inspect"}, exitUsage, "one SRC (a checkpoint folder, ORG/NAME, hf://ORG/NAME, an output or MLX folder, or a .gguf file), got 0"},
		{"unknown flag", []string{"inspect", "--nope", empty}, exitUsage, "flag provided but not defined"},
		{"missing config", []string{"inspect", empty}, exitFailure, empty + ": config.json is missing"},
		{"invalid config", []string{"inspect", noConfig}, exitFailure, "config.json: invalid JSON"},
		{"hostile shard", []string{"inspect", badShard}, exitFailure, "model.safetensors: header length 4294967295"},
		{"missing folder", []string{"inspect", filepath.Join(empty, "nope")}, exitFailure, "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.want)
			}
		})
	}
}
