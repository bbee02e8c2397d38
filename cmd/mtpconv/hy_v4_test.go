package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// inspect judges Hy4's MXFP8 head tensors from their values, decoded with
// their E8M0 scales (they were "not checked (stored F8_E4M3)"), and finds
// one whose scale byte is 0xFF (NaN).
func TestHyV4InspectDecodesMXFP8(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Hy4)
	health := func(dir string) (checked int, unchecked, problems []string) {
		t.Helper()
		_, stdout, stderr := runCLI(t, "inspect", dir, "--json")
		var r struct {
			HeadHealth *struct {
				Checked   int      `json:"tensors_checked"`
				Unchecked []string `json:"unchecked"`
				Problems  []string `json:"problems"`
			} `json:"head_health"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.HeadHealth == nil {
			t.Fatalf("inspect --json: %v\n%s%s", err, stdout, stderr)
		}
		return r.HeadHealth.Checked, r.HeadHealth.Unchecked, r.HeadHealth.Problems
	}
	if checked, unchecked, problems := health(src); checked != 27 || len(unchecked) != 0 || len(problems) != 0 {
		t.Fatalf("head health: %d checked (want 27: the 13 MXFP8 tensors too), unchecked %q, problems %q", checked, unchecked, problems)
	}
	// The first block's scale byte 0xFF: NaN.
	dir := withEditedTensors(t, src, "model.mtp_layers.0.self_attn.o_proj.weight_scale", func(ti st.TensorInfo, b []byte) { b[ti.Begin] = 0xff })
	if _, _, problems := health(dir); !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "self_attn.o_proj.weight") }) {
		t.Fatalf("an MXFP8 block scaled by NaN passed: problems %q", problems)
	}
}
