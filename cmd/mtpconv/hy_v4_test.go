package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// Hy4's drafter moves the release's MXFP8 codes and scales as they are:
// verify --src recomputes every tensor from the source, and a single
// changed byte of a moved tensor's codes or scales is found.
func TestHyV4MovedMXFP8Verified(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Hy4)
	for _, name := range []string{"decoder.mlp.switch_mlp.gate_up_proj.weight", "decoder.self_attn.q_a_proj.scales"} {
		out := filepath.Join(t.TempDir(), "o")
		if code, _, stderr := runCLI(t, "export", "--src", src, "--out", out, "--quiet", "--target", "mlx"); code != 0 {
			t.Fatalf("export: exit %d: %s", code, stderr)
		}
		if code, stdout, stderr := runCLI(t, "verify", "--src", src, out); code != 0 || !strings.Contains(stdout, "28 recomputed from the source: OK") {
			t.Fatalf("verify --src: exit %d: %s %s", code, stdout, stderr)
		}
		file := filepath.Join(out, "model.safetensors")
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		h, err := st.ReadHeader(f, fi.Size(), file)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := h.Lookup(name)
		if !ok {
			t.Fatalf("%s not written", name)
		}
		b := make([]byte, 1)
		at := e.Begin + (e.End-e.Begin)/2
		f.ReadAt(b, at)
		b[0] ^= 0x01
		f.WriteAt(b, at)
		f.Close()
		code, stdout, _ := runCLI(t, "verify", "--src", src, out)
		// The recomputation names the planned tensor (its .weight) for its codes and scales alike.
		planned := strings.TrimSuffix(name, ".scales")
		if !strings.HasSuffix(planned, ".weight") {
			planned += ".weight"
		}
		if code == 0 || !strings.Contains(stdout, "values_differ") || !strings.Contains(stdout, planned+": 1 of 1 segments are not the source's FP4 or MX fp8 codes") {
			t.Errorf("%s with a byte changed: verify exit %d: %s", name, code, stdout)
		}
	}
}
