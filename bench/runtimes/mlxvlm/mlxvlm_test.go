package mlxvlm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/formats/safetensors"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// weights writes an empty safetensors file with the given metadata format.
func weights(t *testing.T, dir, format string) {
	t.Helper()
	hdr, _, err := safetensors.EncodeHeader(nil, map[string]string{"format": format})
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "model.safetensors", string(hdr))
}

func TestRegistered(t *testing.T) {
	t.Parallel()
	r, err := runtimes.Lookup("mlx-vlm")
	if err != nil || r.Name() != "mlx-vlm" {
		t.Fatal(r, err)
	}
}

func TestCheckClaimsHeadCount(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	hf, mlx, drafter, empty := filepath.Join(root, "hf"), filepath.Join(root, "mlx"), filepath.Join(root, "drafter"), filepath.Join(root, "empty")
	write(t, hf, "config.json", `{"model_type": "qwen3_5_moe"}`)
	weights(t, hf, "pt")
	write(t, mlx, "config.json", `{"model_type": "qwen3_5_moe"}`)
	weights(t, mlx, "mlx")
	write(t, drafter, "config.json", `{"model_type": "qwen3_5_mtp", "block_size": 3}`)
	os.MkdirAll(empty, 0o755)
	r := rt
	cases := []struct {
		name      string
		s         runtimes.Setup
		check     string // "" = accepted, else a piece of the error
		claims    bool
		headCount int
	}{
		{"drafter next to an HF trunk", runtimes.Setup{Model: hf, Head: drafter}, "", true, 2},
		{"a combined MLX folder", runtimes.Setup{Model: mlx}, "", true, 0},
		{"an HF folder alone", runtimes.Setup{Model: hf}, "", false, 0},
		{"no config", runtimes.Setup{Model: empty}, "no config.json in it", false, 0},
		{"head not a drafter", runtimes.Setup{Model: hf, Head: empty}, "--head " + empty + ": no config.json", false, 0},
		{"missing model", runtimes.Setup{Model: filepath.Join(root, "nope")}, "--model", false, 0},
		{"llama-server", runtimes.Setup{Model: mlx, Binary: "llama-server"}, "--llama-server does not apply to mlx-vlm", true, 0},
		{"endpoint", runtimes.Setup{Model: mlx, Endpoint: "http://127.0.0.1:1"}, "--endpoint and --plain-endpoint do not apply", true, 0},
		{"concurrency", runtimes.Setup{Model: mlx, Concurrency: 2}, "--concurrency 2 does not apply to mlx-vlm", true, 0},
	}
	for _, c := range cases {
		err := r.Check(c.s)
		if (err == nil) != (c.check == "") || err != nil && !strings.Contains(err.Error(), c.check) {
			t.Errorf("%s: Check = %v, want %q", c.name, err, c.check)
		}
		if got := r.Claims(c.s); got != c.claims {
			t.Errorf("%s: Claims = %v", c.name, got)
		}
		if got := r.HeadCount(c.s); got != c.headCount {
			t.Errorf("%s: HeadCount = %d, want %d", c.name, got, c.headCount)
		}
	}
}
