package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// readDir returns every file of a folder by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestExportDeterministicAcrossJobs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fixture string
		args    []string
	}{
		{fixtures.Qwen36, []string{"--target", "mlx", "--head-precision", "int4"}},
		{fixtures.Qwen35, []string{"--target", "mlx", "--head-precision", "int8", "--group-size", "32"}},
		{fixtures.Next, []string{"--target", "mlx", "--head-precision", "f16"}},
		{fixtures.Qwen36, []string{"--target", "combined", "--trunk-precision", "int4", "--head-precision", "bf16"}},
		{fixtures.Qwen35, []string{"--target", "openvino", "--head-precision", "int4", "--group-size", "128"}},
		{fixtures.Next, []string{"--target", "openvino", "--head-precision", "int8", "--sym"}},
	}
	for _, c := range cases {
		t.Run(c.fixture+strings.Join(c.args, ""), func(t *testing.T) {
			src := fixtures.Ensure(t, c.fixture)
			var runs []map[string][]byte
			for _, jobs := range []string{"1", "4"} {
				out := filepath.Join(t.TempDir(), "out")
				args := append([]string{"export", "--src", src, "--out", out, "--quiet", "--jobs", jobs}, c.args...)
				if code, _, stderr := runCLI(t, args...); code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				runs = append(runs, readDir(t, out))
			}
			if len(runs[0]) == 0 || len(runs[0]) != len(runs[1]) {
				t.Fatalf("file sets differ: %d vs %d", len(runs[0]), len(runs[1]))
			}
			for name, b := range runs[0] {
				if !bytes.Equal(b, runs[1][name]) {
					t.Errorf("%s differs between --jobs 1 and the default", name)
				}
			}
		})
	}
}

// withoutTensors makes a copy of a fixture whose shards lack the dropped
// tensors (the index too); untouched shards are symlinked.
func withoutTensors(t *testing.T, fixture string, drop func(string) bool) string {
	t.Helper()
	src := fixtures.Ensure(t, fixture)
	dst := t.TempDir()
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	weightMap := map[string]string{}
	for _, sh := range ck.Shards {
		var keep []st.TensorInfo
		for _, ti := range sh.Header.Tensors {
			if !drop(ti.Name) {
				keep = append(keep, ti)
				weightMap[ti.Name] = sh.Name
			}
		}
		if len(keep) == len(sh.Header.Tensors) {
			os.Symlink(filepath.Join(src, sh.Name), filepath.Join(dst, sh.Name))
			continue
		}
		var buf bytes.Buffer
		var entries []st.Entry
		for _, ti := range keep {
			entries = append(entries, st.Entry{Name: ti.Name, DType: ti.DType, Shape: ti.Shape})
		}
		w, err := st.NewWriter(&buf, entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range keep {
			b, err := ck.ReadTensor(ck.Tensors[ti.Name], nil)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(b)
		}
		os.WriteFile(filepath.Join(dst, sh.Name), buf.Bytes(), 0o644)
	}
	idx, _ := json.Marshal(map[string]any{"weight_map": weightMap})
	os.WriteFile(filepath.Join(dst, st.IndexFile), idx, 0o644)
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	os.WriteFile(filepath.Join(dst, "config.json"), cfg, 0o644)
	return dst
}

func TestExportRefusesBadInputAndLeavesNothing(t *testing.T) {
	t.Parallel()
	missing := withoutTensors(t, fixtures.Qwen35, func(n string) bool {
		return strings.HasPrefix(n, "mtp.layers.0.mlp.experts.25") && strings.HasSuffix(n, "down_proj.weight")
	})
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"dropped head experts", []string{"--src", missing, "--target", "mlx"}, exitFailure,
			[]string{"MTP head is incomplete", "mtp.layers.0.mlp.experts.{25,250..255}.down_proj.weight"}},
		{"combined of qwen3-next", []string{"--src", fixtures.Ensure(t, fixtures.Next), "--target", "combined"}, exitFailure,
			[]string{"--target combined supports qwen3_5, qwen3_5_moe checkpoints"}},
		{"openvino bf16", []string{"--src", fixtures.Ensure(t, fixtures.Qwen36), "--target", "openvino", "--head-precision", "bf16"}, exitUsage,
			[]string{`OpenVINO precision "bf16"`}},
		{"bad precision", []string{"--src", missing, "--target", "mlx", "--head-precision", "int7"}, exitUsage,
			[]string{`precision "int7"`}},
		{"bad group size", []string{"--src", missing, "--target", "mlx", "--group-size", "48"}, exitUsage,
			[]string{"--group-size 48"}},
		{"openvino group size without int4", []string{"--src", fixtures.Ensure(t, fixtures.Qwen36), "--target", "openvino", "--group-size", "48"}, exitUsage,
			[]string{"--group-size 48: only int4 is quantized in groups"}},
		{"missing source", []string{"--src", filepath.Join(t.TempDir(), "none"), "--target", "mlx"}, exitFailure,
			[]string{"--src ", ": no such file or folder"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			code, _, stderr := runCLI(t, append([]string{"export", "--out", out}, c.args...)...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestExportOverwriteAndCancel(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	os.Mkdir(out, 0o755)
	os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644)
	code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out)
	if code != exitFailure || !strings.Contains(stderr, "already exists") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "keep")); err != nil {
		t.Fatal("existing output was touched")
	}
	// --force replaces only an earlier export, never another folder.
	code, _, stderr = runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out, "--force")
	if code != exitFailure || !strings.Contains(stderr, "is not an mtpconv output") {
		t.Fatalf("--force over a foreign folder: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "keep")); err != nil {
		t.Fatal("--force deleted a folder that is not an mtpconv output")
	}
	os.RemoveAll(out)
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx")
	os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out, "--force", "--quiet"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "keep")); err == nil {
		t.Error("--force kept the old folder's files")
	}
	// A cancelled run (Ctrl-C) exits non-zero and leaves nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e bytes.Buffer
	out2 := filepath.Join(parent, "cancelled")
	if code := run(ctx, []string{"mtpconv", "export", "--src", src, "--target", "mlx", "--out", out2}, &o, &e); code == 0 {
		t.Fatal("cancelled export exited 0")
	}
	left, _ := os.ReadDir(parent)
	if len(left) != 1 {
		t.Errorf("cancelled run left %v", left)
	}
}

func TestTokenizerAndGenerationFilesCopied(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := t.TempDir()
	testfs.LinkDir(t, src, dir)
	extra := map[string]string{
		"tokenizer.json":         `{"version":"1.0","model":{"type":"BPE"}}`,
		"tokenizer_config.json":  `{"eos_token":"<|im_end|>"}`,
		"generation_config.json": `{"eos_token_id":[248046,248044]}`,
	}
	for name, body := range extra {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	for _, target := range []string{"combined", "mlx"} {
		out := filepath.Join(t.TempDir(), "o")
		if code, _, stderr := runCLI(t, "export", "--src", dir, "--target", target, "--out", out, "--quiet"); code != 0 {
			t.Fatal(stderr)
		}
		for name, body := range extra {
			b, err := os.ReadFile(filepath.Join(out, name))
			if err != nil || string(b) != body {
				t.Errorf("%s: %s not copied: %v", target, name, err)
			}
		}
	}
}

// A bf16 value beyond the f16 range is counted and reported, never silent.
func TestF16OverflowIsReported(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := t.TempDir()
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	fc := ck.Tensors["mtp.fc.weight"]
	shard, begin := fc.Shard.Name, fc.Begin
	ck.Close()
	testfs.LinkDir(t, src, dir, shard)
	b, _ := os.ReadFile(filepath.Join(src, shard))
	for i := int64(0); i < 3; i++ { // three values of 1e6 (bf16 0x4974)
		b[begin+2*i], b[begin+2*i+1] = 0x74, 0x49
	}
	os.WriteFile(filepath.Join(dir, shard), b, 0o644)
	out := filepath.Join(t.TempDir(), "o")
	code, stdout, stderr := runCLI(t, "export", "--src", dir, "--target", "mlx", "--head-precision", "f16", "--out", out, "--json")
	if code != 0 {
		t.Fatal(stderr)
	}
	var sum exportSummary
	json.Unmarshal([]byte(stdout), &sum)
	if len(sum.Notes) != 1 || !strings.Contains(sum.Notes[0], "fc.weight: 3 values above the f16 range became infinite") {
		t.Errorf("notes %v", sum.Notes)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "mtpconv-manifest.json"))
	if !strings.Contains(string(raw), `"f16_overflows": 3`) {
		t.Error("the manifest does not record the overflow")
	}
}
