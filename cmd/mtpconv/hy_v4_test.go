package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// Hy4's drafter moves the release's MXFP8 codes and scales as they are:
// verify --src recomputes every tensor from the source, and a single
// changed byte of a moved tensor's codes or scales is found.
func TestHyV4MovedMXFP8Verified(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Hy4)
	for _, name := range []string{"decoder.mlp.switch_mlp.gate_up_proj.weight", "decoder.self_attn.q_a_proj.scales"} {
		out := exportVerified(t, src, 28)
		// The card says what the manifest records: the moved tensors as the
		// release's own mxfp8, the re-quantized ones as mxfp8, every expert.
		card, err := os.ReadFile(filepath.Join(out, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		man, err := manifests.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		moved, requantized := 0, 0
		for i := range man.Tensors {
			if _, m, ok := man.Tensors[i].StoredQuant(); ok && m {
				moved++
			} else if ok {
				requantized++
			}
		}
		for _, want := range []string{
			fmt.Sprintf("| head | mxfp8 (E4M3 codes, E8M0 scales, group 32), the release's own codes and scales | %d |", moved),
			fmt.Sprintf("| head | mxfp8 (E4M3 codes, E8M0 scales, group 32) | %d |", requantized),
			"experts: all 4 routed experts (top-2)",
		} {
			if moved != 12 || requantized != 2 || !strings.Contains(string(card), want) {
				t.Errorf("card lacks %q (manifest: %d moved, %d re-quantized)", want, moved, requantized)
			}
		}
		movedByteFound(t, src, out, "model.safetensors", name)
	}
}

// exportVerified exports src's mlx drafter and checks that verify --src
// recomputes its n tensors from the source; the output folder.
func exportVerified(t *testing.T, src string, n int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--out", out, "--quiet", "--target", "mlx"); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "verify", "--src", src, out); code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d recomputed from the source: OK", n)) {
		t.Fatalf("verify --src: exit %d: %s %s", code, stdout, stderr)
	}
	return out
}

// movedByteFound changes one byte of a moved tensor's entry (its codes or
// its scales) in an output file and checks that verify --src finds it,
// naming the planned tensor (its .weight) for codes and scales alike.
func movedByteFound(t *testing.T, src, out, file, name string) {
	t.Helper()
	path := filepath.Join(out, file)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	h, err := st.ReadHeader(f, fi.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := h.Lookup(name)
	if !ok {
		t.Fatalf("%s not written in %s", name, file)
	}
	b := make([]byte, 1)
	at := e.Begin + (e.End-e.Begin)/2
	f.ReadAt(b, at)
	b[0] ^= 0x01
	f.WriteAt(b, at)
	f.Close()
	code, stdout, _ := runCLI(t, "verify", "--src", src, out)
	planned := strings.TrimSuffix(strings.TrimSuffix(name, ".scales"), ".weight") + ".weight"
	if code == 0 || !strings.Contains(stdout, "values_differ") || !strings.Contains(stdout, planned+": 1 of 1 segments are not the source's FP4 or FP8 codes") {
		t.Errorf("%s with a byte changed: verify exit %d: %s", name, code, stdout)
	}
}
