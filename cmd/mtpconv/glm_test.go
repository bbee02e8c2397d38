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
// such); GLM-4.7-Flash's mlx-vlm drafter folder, verified likewise; the
// targets without a consumer for these heads (and a quantized Flash
// drafter) refuse with the sentence naming why and leave nothing behind.
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
		refusals := map[string][]string{
			"openvino": {"--target", "openvino"},
			"combined": {"--target", "combined"},
		}
		want := map[string]string{
			"openvino": "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only.",
			"combined": "stock mlx-lm drops the NextN layer",
		}
		if fx == fixtures.GLM45 {
			refusals["mlx"], want["mlx"] = []string{"--target", "mlx"}, "mlx-vlm has no drafter model for glm4_moe heads"
		} else {
			refusals["mlx"], want["mlx"] = []string{"--target", "mlx", "--head-precision", "int4"}, "a quantized GLM-4.7-Flash drafter is not written yet"
			out := filepath.Join(t.TempDir(), "o")
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out, "--quiet"); code != 0 {
				t.Fatalf("%s: mlx export %d %s", fx, code, stderr)
			}
			if code, stdout, stderr := runCLI(t, "verify", out, "--src", src); code != 0 {
				t.Errorf("%s: mlx verify %d %s %s", fx, code, stdout, stderr)
			}
		}
		for target, args := range refusals {
			out := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, append(append([]string{"export", "--src", src}, args...), "--out", out, "--quiet")...)
			if _, err := os.Stat(out); code != 1 || !strings.Contains(stderr, want[target]) || err == nil {
				t.Errorf("%s --target %s: exit %d, %q, output left: %v", fx, target, code, stderr, err == nil)
			}
		}
	}
}
