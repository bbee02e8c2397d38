package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// What a user expects from help, version, typos and bad flags: the right
// stream, one error line with a hint, and the usage exit code.
func TestCLIHygiene(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	out := filepath.Join(t.TempDir(), "o")
	cases := []struct {
		args       []string
		code       int
		stdout     string // substring of stdout ("" : stdout must be empty)
		stderr     string // substring of stderr ("" : stderr must be empty)
		maxErrLine int
	}{
		{[]string{"help"}, 0, "COMMANDS", "", 0},
		{[]string{"version"}, 0, "mtpconv " + version, "", 0},
		{[]string{"--version"}, 0, "mtpconv version " + version, "", 0},
		{[]string{"export", "help"}, 0, "mtpconv export - ", "", 0},
		{[]string{"help", "export"}, 0, "--head-precision", "", 0},
		{[]string{"exprot"}, 2, "", "did you mean export?", 1},
		{[]string{"help", "verfy"}, 2, "", "did you mean verify?", 1},
		{[]string{"export", "--bogus"}, 2, "", "see mtpconv export --help", 1},
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--jobs", "0"}, 2, "", "--jobs 0: must be 1 or more", 1},
		// Flags a target does not take are errors, never silently ignored.
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--trunk-precision", "int4"}, 2, "", "--target mlx does not take --trunk-precision", 1},
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--sym"}, 2, "", "does not take --sym", 1},
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--lm-head-precision", "int8"}, 2, "", "does not take --lm-head-precision", 1},
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--max-shard-size", "5GB"}, 2, "", "does not take --max-shard-size", 1},
		// ... and an option the reference tool has says why: mlx-vlm's spelling, or no drafter is made so.
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--q-bits", "4"}, 2, "", "--q-bits: mlx-vlm's --q-bits/--q-mode/--q-group-size are --head-precision", 1},
		{[]string{"export", "--src", src, "--target", "mlx", "--out", out, "--quant-predicate", "mixed_3_6"}, 2, "", "--quant-predicate: no mlx-vlm drafter is quantized by a mixed recipe", 1},
		{[]string{"export", "--src", src, "--target", "openvino", "--out", out, "--mlx-rounding", "cpu"}, 2, "", "--target openvino does not take --mlx-rounding", 1},
		{[]string{"export", "--src", src, "--target", "openvino", "--out", out, "--router-bits", "0"}, 2, "", "does not take --router-bits", 1},
		{[]string{"export", "--src", src, "--target", "nope", "--out", out}, 2, "", "must be combined, gguf, hf, mlx, openvino", 1},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if c.stdout == "" && stdout != "" || !strings.Contains(stdout, c.stdout) {
				t.Errorf("stdout %q, want %q", stdout, c.stdout)
			}
			if c.stderr == "" && stderr != "" || !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q, want %q", stderr, c.stderr)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n") + 1; c.maxErrLine > 0 && n > c.maxErrLine {
				t.Errorf("stderr has %d lines: %q", n, stderr)
			}
		})
	}
}

// The per-file log lines, the --json summary, the dry run and the folder on
// disk give the same files and sizes.
func TestNumbersAgree(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	for _, target := range [][]string{{"--target", "openvino", "--head-precision", "int4"}, {"--target", "mlx"}, {"--target", "combined", "--trunk-precision", "int4"}} {
		t.Run(target[1], func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "log")
			code, stdout, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out}, target...)...)
			if code != 0 {
				t.Fatal(stderr)
			}
			disk := map[string]int64{}
			var total int64
			ents, _ := os.ReadDir(out)
			for _, e := range ents {
				fi, _ := e.Info()
				disk[e.Name()] = fi.Size()
				total += fi.Size()
			}
			logged := 0
			for _, l := range strings.Split(stderr, "\n") {
				var name string
				var n int64
				if _, err := fmt.Sscanf(l, "wrote %s (%d bytes)", &name, &n); err == nil {
					logged++
					if disk[name] != n {
						t.Errorf("log says %s is %d bytes, disk %d", name, n, disk[name])
					}
				}
			}
			if logged == 0 {
				t.Errorf("no per-file lines in %q", stderr)
			}
			if want := fmt.Sprintf("%d files, %d bytes", len(disk), total); !strings.Contains(stdout, want) {
				t.Errorf("summary %q lacks %q", stdout, want)
			}
			jout := filepath.Join(dir, "json")
			code, js, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", jout, "--json"}, target...)...)
			if code != 0 {
				t.Fatal(stderr)
			}
			var sum exportSummary
			if err := json.Unmarshal([]byte(js), &sum); err != nil {
				t.Fatal(err)
			}
			if len(sum.Files) != len(disk) || sum.BytesOut != total {
				t.Errorf("--json lists %d files, %d bytes; disk %d files, %d bytes", len(sum.Files), sum.BytesOut, len(disk), total)
			}
			for _, f := range sum.Files {
				if _, ok := disk[f]; !ok {
					t.Errorf("--json lists %s, not on disk", f)
				}
			}
		})
	}
}

// inspect's text shows no Go maps or stray dots, --hash shows the hashes, and
// a file given for a folder or a folder that is not an output gets a plain sentence.
func TestInspectAndVerifyText(t *testing.T) {
	t.Parallel()
	for _, fx := range []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Next} {
		src := fixtures.Ensure(t, fx)
		code, out, stderr := runCLI(t, "inspect", src, "--hash")
		if code != 0 {
			t.Fatal(stderr)
		}
		for _, bad := range []string{"map[", "experts. ", "%!"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: inspect shows %q:\n%s", fx, bad, out)
			}
		}
		if !strings.Contains(out, "  ") || !strings.Contains(out, "sha256 of each") || strings.Count(out, "\n") < 20 {
			t.Errorf("%s: --hash shows no hashes:\n%s", fx, out)
		}
	}
	src := fixtures.Ensure(t, fixtures.Qwen36)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", filepath.Join(src, "config.json")}, "this is a file, not a folder"},
		{[]string{"verify", filepath.Join(src, "config.json")}, "this is a file, not a folder"},
		{[]string{"verify", src}, "not an mtpconv output (it has no mtpconv-manifest.json)"},
		{[]string{"verify", filepath.Join(t.TempDir(), "nope")}, "no such folder"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != exitFailure || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "stat ") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want one plain line with %q", c.args, code, stderr, c.want)
		}
	}
}

// The card names a base model only when one is known, says quantized only
// when something is, and speaks each target's terms.
func TestCardWords(t *testing.T) {
	t.Parallel()
	src, glm := fixtures.Ensure(t, fixtures.Qwen36), fixtures.Ensure(t, fixtures.GLM45)
	cases := []struct {
		args    []string
		has     []string
		hasNot  []string
		warning bool
		src     string // Qwen3.6's fixture when empty
	}{
		{[]string{"--target", "openvino", "--head-precision", "int4"},
			[]string{"int8 asymmetric, per output channel (f16 scales, NNCF)", "int4 asymmetric, group 64", "| lm_head |", "gather-matmuls"},
			[]string{"switch_mlp", "group -1", "base_model:", "base_model_relation"}, true, ""},
		{[]string{"--target", "openvino", "--base-model", "Qwen/Qwen3.6-35B-A3B"},
			[]string{`base_model: "Qwen/Qwen3.6-35B-A3B"`, "base_model_relation: adapter"}, []string{"pipeline_tag"}, false, ""},
		{[]string{"--target", "mlx", "--base-model", "Qwen/Qwen3.6-35B-A3B"},
			[]string{`base_model: "Qwen/Qwen3.6-35B-A3B"`, "switch_mlp", "base_model_relation: adapter"},
			[]string{"quantized", "pipeline_tag"}, false, ""},
		{[]string{"--target", "combined", "--base-model", "Qwen/Qwen3.6-35B-A3B"},
			[]string{"pipeline_tag: text-generation", "the whole model"},
			[]string{"base_model_relation", "MTP head ("}, false, ""},
		{[]string{"--target", "mlx", "--base-model", "not a hub id"},
			nil, []string{"base_model:", "not a hub id`"}, true, ""},
		// The +1 of zero-centred norms is Qwen's: GLM's plain norms are copied as applied.
		{[]string{"--target", "mlx", "--base-model", "Qwen/Qwen3.6-35B-A3B"},
			[]string{"zero-centred RMSNorm weights stored shifted: 1+w"}, []string{"plain RMSNorm"}, false, ""},
		{[]string{"--target", "gguf", "--base-model", "zai-org/GLM-4.5"},
			[]string{"plain RMSNorm weights, stored as the source stores them"}, []string{"1+w", "zero-centred"}, false, glm},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "o")
		code, _, stderr := runCLI(t, append([]string{"export", "--src", cmp.Or(c.src, src), "--out", out}, c.args...)...)
		if code != 0 {
			t.Fatal(stderr)
		}
		card, err := os.ReadFile(filepath.Join(out, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.has {
			if !strings.Contains(string(card), s) {
				t.Errorf("%v: card lacks %q", c.args, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(string(card), s) {
				t.Errorf("%v: card has %q", c.args, s)
			}
		}
		if got := strings.Contains(stderr, "warning: ") && strings.Contains(stderr, "base model"); got != c.warning {
			t.Errorf("%v: base-model warning %v, want %v: %q", c.args, got, c.warning, stderr)
		}
	}
}
