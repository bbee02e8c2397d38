package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
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
		out := filepath.Join(t.TempDir(), "o")
		if code, _, stderr := runCLI(t, "export", "--src", src, "--out", out, "--quiet", "--target", "mlx"); code != 0 {
			t.Fatalf("export: exit %d: %s", code, stderr)
		}
		if code, stdout, stderr := runCLI(t, "verify", "--src", src, out); code != 0 || !strings.Contains(stdout, "80 recomputed from the source: OK") {
			t.Fatalf("verify --src: exit %d: %s %s", code, stdout, stderr)
		}
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
		file := filepath.Join(out, c.file)
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		h, err := st.ReadHeader(f, fi.Size(), file)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := h.Lookup(c.name)
		if !ok {
			t.Fatalf("%s not written in %s", c.name, c.file)
		}
		b := make([]byte, 1)
		at := e.Begin + (e.End-e.Begin)/2
		f.ReadAt(b, at)
		b[0] ^= 0x01
		f.WriteAt(b, at)
		f.Close()
		code, stdout, _ := runCLI(t, "verify", "--src", src, out)
		planned := strings.TrimSuffix(strings.TrimSuffix(c.name, ".scales"), ".weight") + ".weight"
		if code == 0 || !strings.Contains(stdout, "values_differ") || !strings.Contains(stdout, planned+": 1 of 1 segments are not the source's FP4 or FP8 codes") {
			t.Errorf("%s with a byte changed: verify exit %d: %s", c.name, code, stdout)
		}
	}
}
