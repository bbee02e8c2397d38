package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// inspect's plain report and --strict agree on an HF repo: a head-only repo
// written by --target hf --out is recognised as an mtpconv output whose
// trunk is the base model's (no problem listed, strict passes), and one
// whose head lacks a tensor lists it and fails --strict.
func TestInspectVerdictsAgree(t *testing.T) {
	t.Parallel()
	headOnly := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, headOnly, "--target", "hf")
	broken := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, broken, "--target", "hf")
	dropTensor(t, filepath.Join(broken, "model.safetensors"), "mtp.norm.weight")
	for _, c := range []struct {
		name, dir string
		problems  int
		output    string // the recognised output's line, "" for a source
	}{
		{"head-only hf repo", headOnly, 0, "target hf: the MTP head alone"},
		{"head-only hf repo without mtp.norm", broken, 1, "target hf: the MTP head alone"},
		{"the fixture", fixtures.Ensure(t, fixtures.Qwen36), 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "inspect", "--json", c.dir)
			var r struct {
				ProblemCount int `json:"problem_count"`
				Output       *struct {
					HeadOnly bool `json:"head_only"`
				} `json:"mtpconv_output"`
			}
			if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil {
				t.Fatalf("inspect --json: exit %d, %v: %s", code, err, stderr)
			}
			if r.ProblemCount != c.problems || (r.Output != nil && r.Output.HeadOnly) != (c.output != "") {
				t.Errorf("%d problems, output %+v; want %d problems, recognised %v", r.ProblemCount, r.Output, c.problems, c.output != "")
			}
			_, text, _ := runCLI(t, "inspect", c.dir)
			if !strings.Contains(text, c.output) || (c.output == "") == strings.Contains(text, "output:") {
				t.Errorf("the text report does not say %q:\n%s", c.output, text)
			}
			code, _, stderr = runCLI(t, "inspect", "--strict", c.dir)
			if want := map[bool]int{true: exitFailure, false: 0}[c.problems > 0]; code != want {
				t.Errorf("--strict: exit %d, want %d (the plain report lists %d problems): %s", code, want, c.problems, stderr)
			}
		})
	}
}

// dropTensor rewrites a safetensors file without one of its tensors.
func dropTensor(t *testing.T, path, name string) {
	t.Helper()
	editSafetensors(t, path, func(e *st.Entry, data []byte) []byte {
		if e.Name == name {
			return nil
		}
		return data
	})
}

// inspect describes a release's microscaling storage: DeepSeek-V4's FP4
// routed experts (e2m1 codes with an E8M0 scale per 32) are counted and
// named as such (they were only "120 I8" among the dtypes), as Hy4's MXFP8
// tensors are.
func TestInspectDescribesMXStorage(t *testing.T) {
	t.Parallel()
	for fx, want := range map[string]string{
		fixtures.DeepSeekV4: "mxfp4:         120 FP4 (e2m1, two codes a byte) tensors with an F8_E8M0 scale per 32",
		fixtures.Hy4:        "mxfp8:         48 F8_E4M3 tensors with an F8_E8M0 scale per 32",
	} {
		src := fixtures.Ensure(t, fx)
		if code, stdout, stderr := runCLI(t, "inspect", src); code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("%s: exit %d, want %q\n%s%s", fx, code, want, stdout, stderr)
		}
	}
	_, stdout, _ := runCLI(t, "inspect", fixtures.Ensure(t, fixtures.DeepSeekV4), "--json")
	var r struct {
		FP4 int   `json:"fp4_tensors"`
		Per int64 `json:"fp4_values_per_scale"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.FP4 != 120 || r.Per != 32 {
		t.Errorf("inspect --json: %v: %d FP4 tensors, %d values a scale; want 120, 32", err, r.FP4, r.Per)
	}
}
