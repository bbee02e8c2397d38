package vllm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

func TestServerCommand(t *testing.T) {
	t.Parallel()
	base := []string{"-m", serverModule, "--model", "/m", "--host", "127.0.0.1", "--port", "8123", "--seed", "0", "--no-enable-prefix-caching"}
	all := features{PerRequestMetrics: true, PerRequestSpecMetrics: true}
	for _, tc := range []struct {
		name    string
		s       runtimes.Setup
		a       runtimes.Arm
		f       features
		environ []string
		args    []string
		env     []string
	}{
		{"plain", runtimes.Setup{Model: "/m", RuntimeArgs: []string{"--enforce-eager", "--max-model-len", "512"}}, runtimes.Arm{}, all, nil,
			append(slices.Clone(base), "--enable-per-request-metrics", "--enforce-eager", "--max-model-len", "512"),
			[]string{"PYTHONUNBUFFERED=1", "VLLM_CPU_KVCACHE_SPACE=1"}},
		{"mtp", runtimes.Setup{Model: "/m"}, runtimes.Arm{MTP: true, DraftTokens: 2}, all, []string{"VLLM_CPU_KVCACHE_SPACE="},
			append(slices.Clone(base), "--speculative-config", `{"method":"mtp","num_speculative_tokens":2}`,
				"--per-request-spec-decode-metrics", "summary", "--enable-per-request-metrics"),
			[]string{"PYTHONUNBUFFERED=1", "VLLM_CPU_KVCACHE_SPACE=1"}},
		{"head apart, an older vLLM, the user's cache size", runtimes.Setup{Model: "/m", Head: "/h"}, runtimes.Arm{MTP: true, DraftTokens: 1}, features{},
			[]string{"HOME=/root", "VLLM_CPU_KVCACHE_SPACE=8"},
			append(slices.Clone(base), "--speculative-config", `{"method":"mtp","model":"/h","num_speculative_tokens":1}`),
			[]string{"PYTHONUNBUFFERED=1"}},
		{"the user sizes the cache by flag", runtimes.Setup{Model: "/m", RuntimeArgs: []string{"--kv-cache-memory-bytes=4G"}}, runtimes.Arm{}, features{}, nil,
			append(slices.Clone(base), "--kv-cache-memory-bytes=4G"), []string{"PYTHONUNBUFFERED=1"}},
	} {
		got := serverCommand("/py", tc.s, tc.a, 8123, tc.f, tc.environ)
		if got.Python != "/py" || !slices.Equal(got.Args, tc.args) || !slices.Equal(got.Env, tc.env) {
			t.Errorf("%s:\n got %q %q\nwant %q %q", tc.name, got.Args, got.Env, tc.args, tc.env)
		}
	}
}

func TestCheckRuntimeArgs(t *testing.T) {
	t.Parallel()
	for _, ok := range [][]string{nil, {"--enforce-eager", "--max-model-len", "512", "--dtype=bfloat16", "--seed", "7"},
		{"--no-enable-prefix-caching"}, {"--tensor-parallel-size", "2", "--served-model-name", "x"}} {
		if err := checkRuntimeArgs(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"--port", "--port=9000", "--host", "--speculative-config", "--speculative_config={}", "-sc",
		"--enable-prefix-caching", "--enable_prefix_caching", "--disable-log-stats", "--model", "--spec-tokens=3", "--api-key"} {
		err := checkRuntimeArgs([]string{"--enforce-eager", bad, "x"})
		if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "bench's own") {
			t.Errorf("%s: got %v", bad, err)
		}
	}
}

func TestPythonPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	os.MkdirAll(filepath.Join(venv, "bin"), 0o755)
	os.WriteFile(filepath.Join(venv, "bin", "python"), nil, 0o755)
	os.MkdirAll(filepath.Join(dir, "empty"), 0o755)
	for _, tc := range []struct{ in, want, err string }{
		{"", "python3", ""},
		{venv, filepath.Join(venv, "bin", "python"), ""},
		{filepath.Join(venv, "bin", "python"), filepath.Join(venv, "bin", "python"), ""},
		{filepath.Join(dir, "empty"), "", "without bin/python"},
		{filepath.Join(dir, "nope"), "", "no such file"},
	} {
		got, err := pythonPath(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %q, %v; want %q, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}
