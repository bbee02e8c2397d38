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

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fakellama"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/gguftrunk"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// TestMain lets a test start this binary as the real command, signal handling
// included (for the SIGKILL and SIGINT tests).
func TestMain(m *testing.M) {
	if os.Getenv("MTPCONV_AS_MAIN") == "1" {
		os.Exit(runWithSignals(append([]string{"mtpconv"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	if os.Getenv(fakellama.Env) == "1" { // bench's tests start this binary as llama-server
		fakellama.Main(os.Args[1:])
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
	t.Parallel()
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
	t.Parallel()
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

// hubCardFields are the model-card metadata keys the Hub documents
// (huggingface/hub-docs modelcard.md); a card uses no other.
var hubCardFields = map[string]bool{"language": true, "license": true, "license_name": true, "license_link": true,
	"library_name": true, "tags": true, "datasets": true, "metrics": true, "base_model": true, "base_model_relation": true,
	"pipeline_tag": true, "model-index": true, "inference": true}

// The card's front matter as the Hub reads it: only the Hub's fields; a head
// that drafts next to its trunk is an adapter of the base model without a
// pipeline_tag, the whole model (combined, graft) generates text and is
// quantized only when something is; library_name and tags as the Hub names
// GGUF, MLX and OpenVINO repos; license other comes with license_name and
// license_link; the title names the model without its org, the runtime and
// the precision, and a sidecar's table does not call its copies the trunk.
func TestCardFrontMatter(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36BPE)
	trunk := filepath.Join(fixtures.Dir(), "qwen3.6-moe-tiny-bpe-BF16.gguf")
	if _, err := os.Stat(trunk); err != nil {
		m, err := model.Load(source.Dir(src))
		if err != nil {
			t.Fatal(err)
		}
		trunk = filepath.Join(t.TempDir(), "qwen3.6-moe-tiny-bpe-BF16.gguf")
		if err := gguftrunk.WriteTrunk(m, trunk); err != nil {
			t.Fatal(err)
		}
		m.Checkpoint.Close()
	}
	cases := []struct {
		name     string
		args     []string
		library  string
		relation string // "" : none
		pipeline bool
		tags     []string
		title    string
	}{
		{"mlx", []string{"--target", "mlx", "--head-precision", "int8"}, "mlx", "adapter", false, []string{"mlx"},
			"# Qwen3.6-35B-A3B MTP head for MLX (int8)\n"},
		{"combined", []string{"--target", "combined", "--trunk-precision", "int4"}, "mlx", "quantized", true, []string{"mlx"},
			"# Qwen3.6-35B-A3B with its MTP head for MLX (int4, head bf16)\n"},
		{"combined bf16", []string{"--target", "combined"}, "mlx", "", true, []string{"mlx"},
			"# Qwen3.6-35B-A3B with its MTP head for MLX (bf16)\n"},
		{"openvino", []string{"--target", "openvino", "--head-precision", "int8"}, "openvino", "adapter", false, []string{"openvino", "nncf"},
			"# Qwen3.6-35B-A3B MTP head for OpenVINO (int8 head, int8 lm_head)\n"},
		{"gguf", []string{"--target", "gguf", "--gguf-type", "Q8_0"}, "gguf", "adapter", false, []string{"gguf", "llama-cpp"},
			"# Qwen3.6-35B-A3B MTP head for llama.cpp (GGUF Q8_0)\n"},
		{"graft", []string{"--target", "gguf", "--graft", trunk}, "gguf", "", true, []string{"gguf", "llama-cpp"},
			"# Qwen3.6-35B-A3B with its MTP head for llama.cpp (GGUF BF16)\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			args := append([]string{"export", "--src", src, "--out", out, "--quiet", "--base-model", "Qwen/Qwen3.6-35B-A3B", "--repo-id", "me/q36-mtp"}, c.args...)
			if code, _, stderr := runCLI(t, args...); code != 0 {
				t.Fatal(stderr)
			}
			b, err := os.ReadFile(filepath.Join(out, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			fm := frontMatter(t, b)
			for k := range fm {
				if !hubCardFields[k] {
					t.Errorf("front matter has %s, not a Hub model-card field", k)
				}
			}
			if fm["base_model"] != "Qwen/Qwen3.6-35B-A3B" || fm["library_name"] != c.library {
				t.Errorf("base_model %v, library_name %v, want %s", fm["base_model"], fm["library_name"], c.library)
			}
			if rel, _ := fm["base_model_relation"].(string); rel != c.relation {
				t.Errorf("base_model_relation %q, want %q", rel, c.relation)
			}
			if p, ok := fm["pipeline_tag"]; ok != c.pipeline || ok && p != "text-generation" {
				t.Errorf("pipeline_tag %v, want it %v", p, c.pipeline)
			}
			if fm["license"] != "other" || fm["license_name"] == nil || fm["license_link"] != "https://huggingface.co/Qwen/Qwen3.6-35B-A3B" {
				t.Errorf("license %v, license_name %v, license_link %v", fm["license"], fm["license_name"], fm["license_link"])
			}
			tags, _ := fm["tags"].([]any)
			for _, want := range append([]string{"mtp", "speculative-decoding", "qwen3_5_moe"}, c.tags...) {
				if !contains(tags, want) {
					t.Errorf("tags %v lack %s", tags, want)
				}
			}
			if !strings.Contains(string(b), "\n---\n\n"+c.title) {
				t.Errorf("title: want %q in\n%.600s", c.title, b)
			}
			if c.name == "gguf" && (strings.Contains(string(b), "| trunk |") || !strings.Contains(string(b), "| embedding, output norm (copies) |")) {
				t.Errorf("the sidecar's table calls its copies the trunk:\n%s", b)
			}
			if !strings.Contains(string(b), "me/q36-mtp") {
				t.Errorf("no snippet names the repo as published (--repo-id)")
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

// A source card's license, with its license_link, is carried over; a
// license other keeps the source's license_name and license_link. A link
// relative to the source repo (a file our output does not hold) names the
// file in the source repo (here known by --base-model), or is dropped when
// the repo is not known; a license other without a link links the source's
// LICENSE file.
func TestCardLicenseFromSource(t *testing.T) {
	t.Parallel()
	const inRepo = "https://huggingface.co/Qwen/Qwen3.6-35B-A3B/blob/main/LICENSE"
	for _, c := range []struct {
		readme, base, license, name, link string
		licenseFile                       bool
	}{
		{"---\nlicense: apache-2.0\nlicense_link: " + inRepo + "\n---\n", "", "apache-2.0", "", inRepo, false},
		{"---\nlicense: other\nlicense_name: tongyi-qianwen\nlicense_link: LICENSE\n---\n", "Qwen/Qwen3.6-35B-A3B", "other", "tongyi-qianwen", inRepo, false},
		{"---\nlicense: other\nlicense_name: tongyi-qianwen\nlicense_link: LICENSE\n---\n", "", "other", "tongyi-qianwen", "", false},
		{"---\nlicense: other\nlicense_name: tongyi-qianwen\n---\n", "Qwen/Qwen3.6-35B-A3B", "other", "tongyi-qianwen", inRepo, true},
	} {
		files := map[string]string{"README.md": c.readme}
		if c.licenseFile {
			files["LICENSE"] = "the license\n"
		}
		dir := sourceFolder(t, t.TempDir(), "Qwen3.6-35B-A3B", files)
		args := []string{"--target", "mlx"}
		if c.base != "" {
			args = append(args, "--base-model", c.base)
		}
		out := exportRun(t, dir, args...)
		fm := frontMatter(t, out[manifests.CardFile])
		name, _ := fm["license_name"].(string)
		link, _ := fm["license_link"].(string)
		if fm["license"] != c.license || name != c.name || link != c.link {
			t.Errorf("%q, base %q: license %v, name %q, link %q; want %s %q %q", c.readme, c.base, fm["license"], name, link, c.license, c.name, c.link)
		}
	}
}

// frontMatter parses a card's YAML front matter.
func frontMatter(t *testing.T, card []byte) map[string]any {
	t.Helper()
	parts := strings.SplitN(string(card), "---\n", 3)
	if len(parts) != 3 || parts[0] != "" {
		t.Fatalf("no front matter:\n%s", card)
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(parts[1]), &fm); err != nil {
		t.Fatal(err)
	}
	return fm
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
	t.Parallel()
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
	t.Parallel()
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
