package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// DeepSeek-V4-Flash-0731's DSpark drafter keeps the release's FP8 codes,
// each 128 × 128 block's ue8m0 scale repeated per group, and its FP4
// experts' codes and scales: verify --src recomputes every tensor of the
// three stage shards, and one changed byte of a block-FP8 tensor's codes or
// of its repeated scales is found; the card says which tensors were moved
// how.
func TestDSparkMovedFP8Verified(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.DSparkV4Flash)
	for _, c := range []struct{ file, name string }{
		{"model-00001-of-00003.safetensors", "stages.0.main_proj.scales"},
		{"model-00003-of-00003.safetensors", "stages.2.attn.wq_b.weight"},
	} {
		out := exportVerified(t, src, 80)
		card, err := os.ReadFile(filepath.Join(out, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"| head | mxfp8 (E4M3 codes, E8M0 scales, group 32), the release's own codes, each 128 × 128 block's scale repeated per group | 25 |",
			"| head | mxfp4 (E2M1 codes, E8M0 scales, group 32), the release's own codes and scales | 9 |",
			`drafter, kind = load_drafter("YOUR-ORG/deepseek-v4-flash-0731-dspark-tiny-MTP")  # kind == "dflash"`,
		} {
			if !strings.Contains(string(card), want) {
				t.Errorf("card lacks %q:\n%s", want, card)
			}
		}
		movedByteFound(t, src, out, c.file, c.name)
	}
}
