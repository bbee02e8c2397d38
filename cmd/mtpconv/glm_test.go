package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The GLM families end to end through the CLI: the gguf sidecar at bf16
// and a k-quant, each verified against its source (GLM-4.7-Flash's
// attn_k_b is kv_b_proj's key rows transposed per head, recomputed as
// such); the targets without a consumer for these heads refuse with the
// sentence naming it and leave nothing behind.
func TestGLMCLI(t *testing.T) {
	for _, fx := range []string{fixtures.GLM45, fixtures.GLM47Flash} {
		src := fixtures.Ensure(t, fx)
		for _, typ := range []string{"BF16", "Q4_K_M"} {
			out := filepath.Join(t.TempDir(), "o")
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--gguf-type", typ, "--out", out, "--quiet"); code != 0 {
				t.Fatalf("%s %s: export %d %s", fx, typ, code, stderr)
			}
			code, stdout, stderr := runCLI(t, "verify", out, "--src", src)
			if code != 0 || !strings.Contains(stdout, "recomputed from the source: OK") {
				t.Errorf("%s %s: verify %d %s %s", fx, typ, code, stdout, stderr)
			}
			man, err := os.ReadFile(filepath.Join(out, "mtpconv-manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			if mla := fx == fixtures.GLM47Flash; mla != strings.Contains(string(man), `"transpose"`) {
				t.Errorf("%s %s: transpose recorded: %v", fx, typ, !mla)
			}
		}
		for target, want := range map[string]string{
			"openvino": "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only.",
			"mlx":      "mlx-vlm has no drafter model for",
			"combined": "stock mlx-lm drops the NextN layer",
		} {
			out := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, "export", "--src", src, "--target", target, "--out", out, "--quiet")
			if _, err := os.Stat(out); code != 1 || !strings.Contains(stderr, want) || err == nil {
				t.Errorf("%s --target %s: exit %d, %q, output left: %v", fx, target, code, stderr, err == nil)
			}
		}
	}
}
