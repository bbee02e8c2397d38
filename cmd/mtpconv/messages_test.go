package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// onePlural is "1" followed by a plural count word: "1 files", "1 weight files".
var onePlural = regexp.MustCompile(`\b1 (files|tensors|weight files|stored entries|problems|chunks)\b`)

// The messages a newcomer meets name what they typed as they typed it (no
// --src for inspect's argument, a file is not called a folder), count in
// English, never show an empty field, a Go operation word, or --jobs 0.
func TestMessagesReadRight(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "missing")
	cases := []struct {
		name    string
		args    []string
		code    int
		want    []string // substrings of stdout+stderr
		notWant []string
	}{
		{"inspect a missing folder", []string{"inspect", missing}, exitFailure,
			[]string{missing + ": no such file or folder"}, []string{"--src"}},
		{"inspect a missing ORG/NAME", []string{"inspect", "missing/path"}, exitFailure,
			[]string{"missing/path: no such file or folder, and not in the Hugging Face cache", "use hf://missing/path"}, []string{"--src"}},
		{"inspect a missing GGUF", []string{"inspect", "missing/x.gguf"}, exitFailure,
			[]string{"missing/x.gguf: no such file or folder"}, []string{"--src", "Hugging Face cache", "hf://"}},
		{"export of a missing source", []string{"export", "--src", missing, "--target", "mlx", "--out", filepath.Join(tmp, "o1")}, exitFailure,
			[]string{"--src " + missing + ": no such file or folder"}, nil},
		{"graft of a missing file", []string{"export", "--src", src, "--target", "gguf", "--graft", filepath.Join(tmp, "none.gguf"), "--out", filepath.Join(tmp, "o2")}, exitFailure,
			[]string{"--graft " + filepath.Join(tmp, "none.gguf") + ": no such file (--graft takes the trunk GGUF"}, []string{"stat ", "open "}},
		{"dry run with every core", []string{"export", "--src", src, "--target", "mlx", "--dry-run"}, exitOK,
			[]string{"with " + strconv.Itoa(runtime.GOMAXPROCS(0)) + " chunk"}, []string{"--jobs 0"}},
		{"dry run with --jobs 1", []string{"export", "--src", src, "--target", "mlx", "--dry-run", "--jobs", "1"}, exitOK,
			[]string{"with --jobs 1\n"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			all := stdout + stderr
			if code != c.code {
				t.Errorf("exit %d, want %d: %s", code, c.code, all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(all, w) {
					t.Errorf("output has %q:\n%s", w, all)
				}
			}
			if m := onePlural.FindString(all); m != "" {
				t.Errorf("output says %q", m)
			}
		})
	}

	// An output of a local folder exported without --base-model: inspect
	// shows no empty base model, and no count is "1 ...s" anywhere.
	out := filepath.Join(tmp, "drafter")
	code, stdout, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out)
	if code != 0 {
		t.Fatal(stderr)
	}
	code, istdout, istderr := runCLI(t, "inspect", out)
	if code != 0 {
		t.Fatal(istderr)
	}
	if !strings.Contains(istdout, "(family qwen3_5_moe)") || strings.Contains(istdout, "base model ,") {
		t.Errorf("inspect of an output with no base model:\n%s", istdout)
	}
	code, vstdout, vstderr := runCLI(t, "verify", out)
	if code != 0 {
		t.Fatal(vstderr)
	}
	for _, s := range []string{stdout, stderr, istdout, vstdout} {
		if m := onePlural.FindString(s); m != "" {
			t.Errorf("says %q:\n%s", m, s)
		}
	}
	// combined --into a folder of one weight file: its note says so in the singular.
	dir := headlessMLXFolder(t)
	code, stdout, stderr = runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir)
	if code != 0 {
		t.Fatal(stderr)
	}
	if !strings.Contains(stderr, "the trunk's weight file (") || onePlural.MatchString(stdout+stderr) {
		t.Errorf("combined --into a one-file folder:\n%s%s", stdout, stderr)
	}
}

// Each mistake's message names the command that does what was meant: the
// target that takes --into, --graft, the lower-case target, the precisions
// as words, --src for a positional source, another model's repo by its
// model type first.
func TestErrorsPointToTheRightCommand(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	tmp := t.TempDir()
	glmRepo := filepath.Join(tmp, "glm")
	if err := os.Mkdir(glmRepo, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.GLM45), glmRepo)
	out := filepath.Join(tmp, "o")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"mlx --into", []string{"export", "--src", src, "--target", "mlx", "--into", tmp}, exitUsage, "use --target combined --into DIR"},
		{"gguf --into", []string{"export", "--src", src, "--target", "gguf", "--into", tmp}, exitUsage, "use --graft TRUNK.gguf --out DIR"},
		{"upper-case target", []string{"export", "--src", src, "--target", "MLX", "--out", out}, exitUsage, `--target "MLX": target names are lower case: --target mlx`},
		{"hf precision", []string{"export", "--src", src, "--target", "hf", "--head-precision", "int4", "--out", out}, exitUsage, `must be bf16 or fp8 (`},
		{"positional source", []string{"export", src, "--target", "mlx", "--out", out}, exitUsage, "export needs --src: did you mean --src " + src + "?"},
		{"another model's repo", []string{"export", "--src", src, "--target", "hf", "--into", glmRepo}, exitFailure, "holds another model: its config.json says model_type glm4_moe, the source qwen3_5_moe_text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "[bf16") {
				t.Errorf("exit %d (want %d), %q; want %q", code, c.code, stdout+stderr, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written", out)
			}
		})
	}
}
