package vllm

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

func TestRegistered(t *testing.T) {
	t.Parallel()
	r, err := runtimes.Lookup(Name)
	if err != nil || r.Name() != "vllm" {
		t.Fatalf("Lookup(vllm) = %v, %v", r, err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "config.json"), []byte("{}"), 0o644)
	bare := filepath.Join(dir, "bare")
	os.MkdirAll(bare, 0o755)
	file := filepath.Join(dir, "model.gguf")
	os.WriteFile(file, nil, 0o644)
	ep := "http://127.0.0.1:8000"
	for _, tc := range []struct {
		name string
		s    runtimes.Setup
		err  string
	}{
		{"a repo folder", runtimes.Setup{Model: repo, RuntimeArgs: []string{"--enforce-eager"}}, ""},
		{"a repo and a head folder", runtimes.Setup{Model: repo, Head: repo}, ""},
		{"a Hub id", runtimes.Setup{Model: "Qwen/Qwen3.5-35B-A3B"}, ""},
		{"endpoints", runtimes.Setup{Endpoint: ep, PlainEndpoint: ep + "/v1"}, ""},
		{"no model", runtimes.Setup{}, "give the model"},
		{"a GGUF file", runtimes.Setup{Model: file}, "is a file"},
		{"a folder without config.json", runtimes.Setup{Model: bare}, "no config.json"},
		{"a missing path", runtimes.Setup{Model: filepath.Join(dir, "a", "b", "c")}, "no such file"},
		{"a head without config.json", runtimes.Setup{Model: repo, Head: bare}, "--head"},
		{"--llama-server", runtimes.Setup{Model: repo, Binary: "/usr/bin/llama-server"}, "--llama-server does not apply"},
		{"an owned flag", runtimes.Setup{Model: repo, RuntimeArgs: []string{"--port", "1"}}, "bench's own"},
		{"the MTP arm's endpoint, the plain arm started", runtimes.Setup{Endpoint: ep, Model: repo, Python: file, RuntimeArgs: []string{"-x"}}, ""},
		{"the plain arm's endpoint, the MTP arm started", runtimes.Setup{PlainEndpoint: ep, Model: repo, Head: repo}, ""},
		{"one endpoint without a model", runtimes.Setup{Endpoint: ep}, "give the model"},
		{"the plain endpoint, an owned flag", runtimes.Setup{PlainEndpoint: ep, Model: repo, RuntimeArgs: []string{"--host=x"}}, "bench's own"},
		{"--python with endpoints", runtimes.Setup{Endpoint: ep, PlainEndpoint: ep, Python: "/py"}, "--python does not apply"},
		{"arguments with endpoints", runtimes.Setup{Endpoint: ep, PlainEndpoint: ep, RuntimeArgs: []string{"-x"}}, "do not apply with --endpoint"},
		{"--head with endpoints", runtimes.Setup{Endpoint: ep, PlainEndpoint: ep, Head: repo}, "--head does not apply"},
		{"--head with the MTP endpoint", runtimes.Setup{Endpoint: ep, Model: repo, Head: repo}, "--head does not apply"},
		{"a bad endpoint", runtimes.Setup{Endpoint: "127.0.0.1:8000", PlainEndpoint: ep}, "want http://HOST:PORT"},
		{"a missing --python", runtimes.Setup{Model: repo, Python: filepath.Join(dir, "venv")}, "no such file"},
		{"a bad plain endpoint", runtimes.Setup{PlainEndpoint: "ftp://x", Model: repo}, "want http://HOST:PORT"},
	} {
		err := runtime{}.Check(tc.s)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
		// bench exits 1 (bad input), not 2, for a path that is not there.
		if missing := tc.err == "no such file"; errors.Is(err, fs.ErrNotExist) != missing {
			t.Errorf("%s: %v wraps fs.ErrNotExist: %v", tc.name, err, !missing)
		}
	}
}

func TestBaseURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:8000":      "http://127.0.0.1:8000",
		"http://127.0.0.1:8000/":     "http://127.0.0.1:8000",
		"http://127.0.0.1:8000/v1":   "http://127.0.0.1:8000",
		"https://box:8000/proxy/v1/": "https://box:8000/proxy",
	} {
		if got, err := baseURL(in); got != want || err != nil {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestClaimsAndHeadCount(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen35DenseText)
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mk := func(name string, files map[string]string) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		for f, text := range files {
			os.WriteFile(filepath.Join(d, f), []byte(text), 0o644)
		}
		return d
	}
	hf := mk("hf", map[string]string{"config.json": string(cfg), "model.safetensors": ""})
	mlx := mk("mlx", map[string]string{"config.json": `{"quantization": {"group_size": 64, "bits": 4}}`, "model.safetensors": ""})
	ov := mk("ov", map[string]string{"config.json": "{}", "model.safetensors": "", "openvino_model.xml": ""})
	noWeights := mk("noweights", map[string]string{"config.json": string(cfg)})
	unknown := mk("unknown", map[string]string{"config.json": `{"architectures": ["LlamaForCausalLM"]}`, "model.safetensors": ""})
	for _, tc := range []struct {
		name   string
		s      runtimes.Setup
		claims bool
		heads  int
	}{
		{"an HF repo", runtimes.Setup{Model: hf}, true, 1},
		{"an HF repo with a head folder", runtimes.Setup{Model: unknown, Head: hf}, true, 1},
		{"an MLX folder", runtimes.Setup{Model: mlx}, false, 0},
		{"an OpenVINO folder", runtimes.Setup{Model: ov}, false, 0},
		{"no weights", runtimes.Setup{Model: noWeights}, false, 1},
		{"a family mtpconv does not know", runtimes.Setup{Model: unknown}, true, 0},
		{"a GGUF", runtimes.Setup{Model: filepath.Join(dir, "x.gguf")}, false, 0},
	} {
		if got := (runtime{}).Claims(tc.s); got != tc.claims {
			t.Errorf("%s: Claims = %v", tc.name, got)
		}
		if got := (runtime{}).HeadCount(tc.s); got != tc.heads {
			t.Errorf("%s: HeadCount = %d, want %d", tc.name, got, tc.heads)
		}
	}
}
