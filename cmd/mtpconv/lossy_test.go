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

// A head refused as lost and written with --allow-lossy-head (MLX nvfp4 at
// the 25x column-scale ratio: the embedding half's error is 0.68, its
// stored values neither zero nor rounded away) is said lost by inspect and
// verify without the source, from the manifest's record: inspect --strict
// and verify exit 1.
func TestLossyHeadRecorded(t *testing.T) {
	t.Parallel()
	src := scaledFC(t, 25)
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--head-precision", "nvfp4", "--out", out, "--allow-lossy-head", "--quiet"); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	const lost = "fc.weight: its embedding half's quantization error is 0.68"
	code, stdout, stderr := runCLI(t, "inspect", out)
	if code != 0 || !strings.Contains(stdout, "unhealthy (recorded at export): "+lost) {
		t.Errorf("inspect: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "inspect", out, "--strict")
	if code != 1 || !strings.Contains(stderr, "the manifest records a half of the MTP head's concat projection lost") || !strings.Contains(stderr, lost) {
		t.Errorf("inspect --strict: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "inspect", out, "--strict", "--json")
	if code != 1 || !strings.Contains(stdout, `"lost_halves"`) {
		t.Errorf("inspect --strict --json: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "verify", out)
	if code != 1 || !strings.Contains(stdout, "FAIL head_half_lost") || !strings.Contains(stdout, lost) || !strings.Contains(stdout, "as the manifest records the export") {
		t.Errorf("verify without --src: exit %d\n%s", code, stdout)
	}
}

// A head weight whose source is all zero (an FP8 weight whose block scale
// is 0) is exported with a warning naming it, and inspect --strict fails
// the output for the same reason; the same export of the healthy source
// warns of nothing.
func TestZeroSourceHeadWarned(t *testing.T) {
	t.Parallel()
	const weight = "mtp.layers.0.self_attn.k_proj.weight"
	healthy := fixtures.Ensure(t, fixtures.Qwen36FP8)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.CopyFS(src, os.DirFS(healthy)); err != nil {
		t.Fatal(err)
	}
	zeroTensor(t, src, weight+"_scale_inv")
	for _, c := range []struct {
		src  string
		warn bool
	}{{healthy, false}, {src, true}} {
		out := filepath.Join(t.TempDir(), "o")
		code, stdout, stderr := runCLI(t, "export", "--src", c.src, "--target", "mlx", "--out", out)
		warned := strings.Contains(stderr, "warning: ") && strings.Contains(stderr, "k_proj.weight: every value of its source ("+weight+") is zero")
		if code != 0 || warned != c.warn || !c.warn && strings.Contains(stderr, "every value of its source") {
			t.Errorf("export of %s: exit %d, warned %v\n%s%s", c.src, code, warned, stdout, stderr)
		}
		code, stdout, _ = runCLI(t, "inspect", out, "--strict")
		if failed := code == 1 && strings.Contains(stdout, "k_proj.weight: every value is zero"); failed != c.warn {
			t.Errorf("inspect --strict of %s: exit %d\n%s", c.src, code, stdout)
		}
	}
}

// zeroTensor sets every byte of a tensor of the checkpoint folder to zero.
func zeroTensor(t *testing.T, dir, name string) {
	t.Helper()
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	tt, ok := ck.Tensors[name]
	ck.Close()
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	f, err := os.OpenFile(filepath.Join(dir, tt.Shard.Name), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, tt.End-tt.Begin), tt.Begin); err != nil {
		t.Fatal(err)
	}
}
