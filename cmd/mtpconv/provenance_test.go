package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// TestMain lets a test start this binary as the real command, signal handling
// included (for the SIGKILL and SIGINT tests).
func TestMain(m *testing.M) {
	if os.Getenv("MTPCONV_AS_MAIN") == "1" {
		os.Exit(runWithSignals(append([]string{"mtpconv"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func exportTo(t *testing.T, fixture, out string, args ...string) {
	t.Helper()
	all := append([]string{"export", "--src", fixtures.Ensure(t, fixture), "--out", out, "--quiet"}, args...)
	if code, _, stderr := runCLI(t, all...); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
}

func verifyReport(t *testing.T, out string, src string) (int, manifests.Report) {
	t.Helper()
	args := []string{"verify", "--json", out}
	if src != "" {
		args = []string{"verify", "--json", "--src", src, out}
	}
	code, stdout, stderr := runCLI(t, args...)
	var r manifests.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("verify output: %v\n%s\n%s", err, stdout, stderr)
	}
	return code, r
}

func kinds(r manifests.Report) string {
	var k []string
	for _, p := range r.Problems {
		k = append(k, p.Kind)
	}
	return strings.Join(k, ",")
}

// rewriteTensor replaces the bytes of one stored tensor in place.
func rewriteTensor(t *testing.T, path, name string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st2, _ := f.Stat()
	h, err := st.ReadHeader(f, st2.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	info, ok := h.Lookup(name)
	if !ok || info.Bytes() != int64(len(data)) {
		t.Fatalf("%s: %v %d", name, ok, info.Bytes())
	}
	if _, err := f.WriteAt(data, info.Begin); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCatchesTampering(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.Qwen36)
	base := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, base, "--target", "mlx", "--head-precision", "int4")
	if code, r := verifyReport(t, base, src); code != 0 || !r.OK || r.Recomputed != 20 {
		t.Fatalf("clean output: exit %d %+v", code, r)
	}
	// The source norm, to build a norm without its +1 and one with it twice.
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	raw, _ := ck.ReadTensor(ck.Tensors["mtp.norm.weight"], nil)
	w := make([]float32, len(raw)/2)
	quant.DecodeF32("BF16", raw, w)
	shifted := func(add float32) []byte {
		v := make([]float32, len(w))
		for i := range w {
			v[i] = w[i] + add
		}
		b := make([]byte, len(raw))
		quant.EncodeF32("BF16", v, b)
		return b
	}
	copyOut := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "o")
		os.Mkdir(dir, 0o755)
		for name, b := range readDir(t, base) {
			os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		return dir
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		src    bool
		want   []string
	}{
		{"flipped byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-100] ^= 0x01
			os.WriteFile(p, b, 0o644)
		}, false, []string{"file_hash", "tensor_hash"}},
		{"missing file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "config.json"))
		}, false, []string{"file_missing"}},
		{"norm without +1", func(t *testing.T, dir string) {
			rewriteTensor(t, filepath.Join(dir, "model.safetensors"), "norm.weight", shifted(0))
		}, true, []string{"norm_missing_plus_one"}},
		{"norm with +1 twice", func(t *testing.T, dir string) {
			rewriteTensor(t, filepath.Join(dir, "model.safetensors"), "norm.weight", shifted(2))
		}, true, []string{"norm_double_plus_one"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyOut(t)
			c.tamper(t, dir)
			s := ""
			if c.src {
				s = src
			}
			code, r := verifyReport(t, dir, s)
			if code != exitFailure || r.OK {
				t.Fatalf("tampered output passed: exit %d", code)
			}
			for _, w := range c.want {
				if !strings.Contains(kinds(r), w) {
					t.Errorf("problems %s lack %s", kinds(r), w)
				}
			}
		})
	}
}

func TestKilledExportResumes(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.Qwen35)
	want := filepath.Join(t.TempDir(), "want")
	exportTo(t, fixtures.Qwen35, want, "--target", "mlx", "--head-precision", "int4")

	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	cmd := exec.Command(os.Args[0], "export", "--src", src, "--target", "mlx", "--head-precision", "int4", "--out", out, "--quiet")
	cmd.Env = append(os.Environ(), "MTPCONV_AS_MAIN=1", holdAfterEnv+"=model.safetensors")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(parent, ".out.partial", ".mtpconv-done", "model.safetensors.json")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("export never reached the hold point")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a killed export left a complete-looking output folder")
	}
	code, stdout, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--head-precision", "int4", "--out", out, "--resume", "--json")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	var sum exportSummary
	json.Unmarshal([]byte(stdout), &sum)
	if len(sum.ReusedFiles) != 1 || sum.ReusedFiles[0] != "model.safetensors" {
		t.Errorf("resume reused %v", sum.ReusedFiles)
	}
	sameFiles(t, readDir(t, want), readDir(t, out))
	if left, _ := os.ReadDir(parent); len(left) != 1 {
		t.Errorf("resume left %v", left)
	}
}

func TestCardFrontMatter(t *testing.T) {
	for _, target := range []string{"mlx", "combined", "openvino"} {
		t.Run(target, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			exportTo(t, fixtures.Qwen36, out, "--target", target, "--base-model", "Qwen/Qwen3.6-35B-A3B", "--head-precision", "int8")
			b, err := os.ReadFile(filepath.Join(out, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.SplitN(string(b), "---\n", 3)
			if len(parts) != 3 || parts[0] != "" {
				t.Fatalf("no front matter:\n%s", b)
			}
			var fm map[string]any
			if err := yaml.Unmarshal([]byte(parts[1]), &fm); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"base_model", "base_model_relation", "library_name", "pipeline_tag", "tags", "license"} {
				if fm[k] == nil {
					t.Errorf("front matter lacks %s", k)
				}
			}
			library := map[string]string{"mlx": "mlx", "combined": "mlx", "openvino": "openvino"}[target]
			if fm["base_model"] != "Qwen/Qwen3.6-35B-A3B" || fm["library_name"] != library || fm["base_model_relation"] != "quantized" {
				t.Errorf("front matter %v", fm)
			}
			tags, _ := fm["tags"].([]any)
			if !contains(tags, "mtp") || !contains(tags, "speculative-decoding") {
				t.Errorf("tags %v", tags)
			}
			// card rewrites the same card; after verify --save it shows the result.
			if code, _, stderr := runCLI(t, "verify", "--save", out); code != 0 {
				t.Fatal(stderr)
			}
			if code, _, stderr := runCLI(t, "card", out); code != 0 {
				t.Fatal(stderr)
			}
			b2, _ := os.ReadFile(filepath.Join(out, "README.md"))
			if !strings.Contains(string(b2), "`mtpconv verify` passed") {
				t.Errorf("card lacks the verification result")
			}
		})
	}
}

func contains(xs []any, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func TestDryRunWritesNothingAndPredictsSizes(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "o")
	src := fixtures.Ensure(t, fixtures.Qwen36)
	code, stdout, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--trunk-precision", "int4", "--out", out, "--dry-run", "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Fatalf("dry run wrote %v", left)
	}
	var plan struct {
		Files []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"files"`
		Peak int64 `json:"estimated_peak_memory_bytes"`
	}
	json.Unmarshal([]byte(stdout), &plan)
	exportTo(t, fixtures.Qwen36, out, "--target", "combined", "--trunk-precision", "int4")
	fi, err := os.Stat(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// The whole file, header included (TestDryRunSizesMatchWrittenFiles checks every file of every target).
	if plan.Files[0].Name != "model.safetensors" || plan.Files[0].Bytes != fi.Size() {
		t.Errorf("dry run predicted %+v, wrote %d bytes", plan.Files[0], fi.Size())
	}
	if plan.Peak <= 0 {
		t.Error("no peak memory estimate")
	}
}

func TestInspectOwnOutputs(t *testing.T) {
	for _, c := range []struct {
		target string
		warn   bool
	}{{"mlx", false}, {"combined", true}} {
		out := filepath.Join(t.TempDir(), "o")
		exportTo(t, fixtures.Qwen36, out, "--target", c.target)
		code, stdout, stderr := runCLI(t, "inspect", "--json", out)
		if code != 0 {
			t.Fatal(stderr)
		}
		var s manifests.Summary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil || s.Kind != "mtpconv_output" || s.Target != c.target || s.Model.NumExperts != 256 {
			t.Fatalf("%s: %v %+v", c.target, err, s)
		}
		if got := len(s.Warnings) > 0; got != c.warn {
			t.Errorf("%s: warnings %v", c.target, s.Warnings)
		}
		// Text mode warns on stderr for files that carry mtp.* next to a trunk.
		_, _, stderr = runCLI(t, "inspect", out)
		if strings.Contains(stderr, "mlx-lm 0.30.7 to 0.31.3") != c.warn {
			t.Errorf("%s: stderr %q", c.target, stderr)
		}
	}
}
