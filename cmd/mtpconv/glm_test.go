package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The GLM families end to end through the CLI: the gguf sidecar at bf16
// and a k-quant, each verified against its source (GLM-4.7-Flash's
// attn_k_b is kv_b_proj's key rows transposed per head, recomputed as
// such); GLM-4.7-Flash's mlx-vlm drafter folder, float and at every kind
// of quantization mlx-vlm's splitter offers (its transposed embed_q
// quantized along its stored rows at group 32 and 16), verified likewise;
// the targets without a consumer for these heads refuse with the sentence
// naming why, --router-bits for the Flash drafter (whose routers stay float)
// is a usage error, and nothing is left behind.
func TestGLMCLI(t *testing.T) {
	t.Parallel()
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
			for _, q := range []struct{ prec, group, embedQ string }{
				{"bf16", "", ""}, {"int4", "", "BF16"}, {"int4", "32", "U32"}, {"int8", "", "BF16"}, {"int3", "128", "BF16"},
				{"mxfp4", "", "U32"}, {"mxfp8", "", "U32"}, {"nvfp4", "", "U32"},
			} {
				out := filepath.Join(t.TempDir(), "o")
				args := []string{"export", "--src", src, "--target", "mlx", "--head-precision", q.prec, "--out", out, "--quiet"}
				if q.group != "" {
					args = append(args, "--group-size", q.group)
				}
				if code, _, stderr := runCLI(t, args...); code != 0 {
					t.Fatalf("%s %s/%s: mlx export %d %s", fx, q.prec, q.group, code, stderr)
				}
				if code, stdout, stderr := runCLI(t, "verify", out, "--src", src); code != 0 || !strings.Contains(stdout, "recomputed from the source: OK") {
					t.Errorf("%s %s/%s: mlx verify %d %s %s", fx, q.prec, q.group, code, stdout, stderr)
				}
				if q.embedQ == "" {
					continue
				}
				// embed_q [heads, kv_lora, nope] is quantized when nope (32)
				// divides by the group; the router never is.
				ck, err := st.Open(source.Dir(out))
				if err != nil {
					t.Fatal(err)
				}
				e, g := ck.Tensors["model.mtp_block.self_attn.embed_q.weight"], ck.Tensors["model.mtp_block.mlp.gate.weight"]
				ck.Close()
				if e == nil || string(e.DType) != q.embedQ || g == nil || g.DType != st.BF16 {
					t.Errorf("%s %s/%s: embed_q %+v (want %s), router %+v", fx, q.prec, q.group, e, q.embedQ, g)
				}
			}
			for _, args := range [][]string{
				{"--head-precision", "int4", "--router-bits", "8"},  // the splitter keeps routers float
				{"--head-precision", "int4", "--group-size", "16"},  // affine groups: 32, 64, 128
				{"--head-precision", "nvfp4", "--group-size", "32"}, // nvfp4: 16 only
			} {
				out := filepath.Join(t.TempDir(), "o")
				code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "mlx", "--out", out, "--quiet"}, args...)...)
				if _, err := os.Stat(out); code != 2 || err == nil {
					t.Errorf("%s mlx %v: exit %d, %q, output left: %v", fx, args, code, stderr, err == nil)
				}
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
