package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// completenessFixtures hold a checkpoint of every family (checked below).
var completenessFixtures = []string{
	fixtures.Qwen35, fixtures.Qwen35DenseText, fixtures.Next, fixtures.GLM45, fixtures.GLM47Flash, fixtures.GLM52,
	fixtures.GLM53Flash, fixtures.DeepSeekV3, fixtures.DeepSeekV32, fixtures.Hy3, fixtures.Ling3,
	fixtures.MiMoV25, fixtures.NemotronHMoE, fixtures.Step35, fixtures.Qwen38FlashNext, fixtures.Inkling, fixtures.Gemma4AssistantCentroid, fixtures.DeepSeekV4,
	fixtures.Hy4, fixtures.DSparkV4Flash,
}

// familyFixtures maps every registered family to its fixture among
// completenessFixtures, failing for a family without one (but a family no
// target writes a head file of).
func familyFixtures(t *testing.T) map[string]string {
	t.Helper()
	of := map[string]string{}
	for _, fixture := range completenessFixtures {
		m, err := model.Load(source.Dir(fixtures.Ensure(t, fixture)))
		if err != nil {
			t.Fatal(err)
		}
		of[m.Family.Name] = fixture
		m.Checkpoint.Close()
	}
	for _, f := range model.Registered() {
		if of[f.Name] == "" && !writesNoHead(f) {
			t.Errorf("no fixture of family %s in completenessFixtures", f)
		}
	}
	return of
}

// writesNoHead says whether every target that writes a head file inspect
// reads (the GGUF sidecar, the MLX drafter, the combined file) refuses the
// family (DeepSeek's DSpark stages): there is no such file to check.
func writesNoHead(f *model.Family) bool {
	return f.GGUF.Refusal != "" && f.MLX.Refusal != "" && f.MLX.CombinedRefusal != ""
}

// headFile is an output of one kind: the path inspect reads and the names
// of the head's own tensors in it.
type headFile struct {
	kind, out, path string
	own             []string
}

// headFiles exports a fixture to every kind of file inspect reads that its
// family's targets write: the GGUF sidecar and a graft into the reference
// converter's trunk (when one is committed), the MLX drafter, the combined
// file.
func headFiles(t *testing.T, fixture string) []headFile {
	src := fixtures.Ensure(t, fixture)
	if _, err := os.Stat(filepath.Join(src, "tokenizer.json")); err != nil { // the GGUF needs a vocabulary
		dir := filepath.Join(t.TempDir(), fixture)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		testfs.LinkDir(t, src, dir)
		testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), dir)
		src = dir
	}
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	// The head's own tensors of MTP layer 0, under the checkpoint's names.
	var own []string
	for _, rel := range m.Family.HeadOwn(0) {
		own = append(own, m.HeadName(rel))
	}
	export := func(args ...string) string {
		out := filepath.Join(t.TempDir(), "out")
		if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--quiet"}, args...)...); code != 0 {
			t.Fatalf("export %v: %s", args, stderr)
		}
		return out
	}
	var files []headFile
	if m.Family.GGUF.Refusal == "" {
		ggufNames := func(block int) []string {
			var names []string
			for _, rel := range m.Family.HeadOwn(0) {
				for suffix, n := range m.Family.GGUF.HeadTop {
					if rel == suffix {
						names = append(names, n.In(block))
					}
				}
				if _, suffix, ok := strings.Cut(strings.TrimPrefix(rel, "layers."), "."); ok {
					if n, ok := m.Family.GGUF.Layer[suffix]; ok {
						names = append(names, n.In(block))
					}
				}
			}
			return names
		}
		out := export("--target", "gguf")
		paths, _ := filepath.Glob(filepath.Join(out, "*.gguf"))
		if len(paths) != 1 {
			t.Fatalf("sidecar files %v", paths)
		}
		files = append(files, headFile{"gguf sidecar", out, paths[0], ggufNames(m.GGUFHeadBlock())})
		trunk := filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixture+"-nomtp-bf16.gguf")
		if _, err := os.Stat(trunk); err == nil && !m.Family.GGUF.StoredTypes { // a stored-type sidecar is never grafted
			out := export("--target", "gguf", "--graft", trunk)
			files = append(files, headFile{"gguf graft", out, filepath.Join(out, filepath.Base(trunk)), ggufNames(m.Config.NumHiddenLayers)})
		}
	}
	if d := m.Family.MLX.DrafterModelType; d != "" {
		var names []string
		for _, rel := range m.Family.HeadOwn(0) {
			switch {
			case m.Family.MLX.DrafterWhole: // the checkpoint's own names
				rel = m.HeadName(rel)
			case m.Family.MLX.DrafterName != nil:
				rel = m.Family.MLX.DrafterName(rel)
			}
			names = append(names, rel)
		}
		out := export("--target", "mlx")
		files = append(files, headFile{"mlx drafter", out, out, names})
	}
	if m.Family.MLX.CombinedRefusal == "" {
		out := export("--target", "combined")
		files = append(files, headFile{"combined", out, out, own})
	}
	return files
}

// Every kind of file inspect reads names each of the head's own tensors
// when it is missing, and --strict fails it, as verify does: a sidecar
// without blk.N.nextn.eh_proj.weight, a graft without nextn.enorm, a
// drafter without fc.weight, a combined file without mtp.fc.weight all
// passed before. A tensor is taken out by renaming it in the file's header
// (one byte, so every offset holds): the file stays readable, the name
// gone.
func TestInspectHeadCompleteness(t *testing.T) {
	t.Parallel()
	familyFixtures(t)
	for _, fixture := range completenessFixtures {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			files := headFiles(t, fixture)
			if len(files) == 0 {
				t.Fatal("no target writes this family's head")
			}
			for _, f := range files {
				if code, stdout, stderr := runCLI(t, "inspect", f.path, "--strict"); code != 0 {
					t.Fatalf("%s: inspect --strict of the whole head: %d %s %s", f.kind, code, stdout, stderr)
				}
				// The concat projection (Inkling's input_proj), or its halves apart (Qwen3.8-Flash-Next's fc_embedding and fc_hidden),
				// or a separate drafter's (the Gemma-4 assistant's pre_projection), or DeepSeek-V4's h_proj, or DSpark's main_proj.
				if !slices.ContainsFunc(f.own, func(n string) bool {
					return strings.Contains(n, "eh_proj") || strings.HasSuffix(n, "fc.weight") || strings.HasSuffix(n, "fc_hidden.weight") ||
						strings.HasSuffix(n, "input_proj.weight") || strings.Contains(n, "pre_projection") || n == "h_proj.weight" ||
						strings.HasSuffix(n, "main_proj.weight") // DSpark's stage 0 (the mlx folder's name; the dflash draft's is fc)
				}) {
					t.Errorf("%s: the head's own tensors %v lack the concat projection", f.kind, f.own)
				}
				for _, name := range f.own {
					path := withoutTensor(t, f, name)
					code, stdout, stderr := runCLI(t, "inspect", path, "--strict")
					if code != 1 || !strings.Contains(stdout+stderr, name+" is missing") {
						t.Errorf("%s without %s: inspect --strict exit %d, want 1 naming it: %s %s", f.kind, name, code, stdout, stderr)
					}
					if code, _, _ := runCLI(t, "inspect", path); code != 0 {
						t.Errorf("%s without %s: inspect exit %d", f.kind, name, code)
					}
					vdir := path
					if strings.HasSuffix(path, ".gguf") {
						vdir = filepath.Dir(path)
					}
					// verify names a safetensors tensor; a GGUF's entries it finds
					// by the manifest's offsets, and fails the file's hash.
					code, stdout, _ = runCLI(t, "verify", vdir)
					if code != 1 || !strings.HasSuffix(path, ".gguf") && !strings.Contains(stdout, name) {
						t.Errorf("%s without %s: verify exit %d, want 1 naming it: %s", f.kind, name, code, stdout)
					}
				}
			}
		})
	}
}

// withoutTensor copies an output with the tensor's name changed in its
// file's header (the last letter replaced) and returns the path inspect
// reads: the copied file, or the copied folder.
func withoutTensor(t *testing.T, f headFile, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.CopyFS(dir, os.DirFS(f.out)); err != nil {
		t.Fatal(err)
	}
	var files []string
	var needle []byte
	if strings.HasSuffix(f.path, ".gguf") {
		files = []string{filepath.Join(dir, filepath.Base(f.path))}
		needle = binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
		needle = append(needle, name...)
	} else {
		files, _ = filepath.Glob(filepath.Join(dir, "*.safetensors"))
		needle = []byte(`"` + name + `"`)
	}
	renamed := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, needle); i >= 0 {
			at := i + len(needle) - 1
			if !strings.HasSuffix(f.path, ".gguf") {
				at--
			}
			b[at] = 'X'
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			renamed++
		}
	}
	if renamed != 1 {
		t.Fatalf("%s: %s found in %d files", f.kind, name, renamed)
	}
	if strings.HasSuffix(f.path, ".gguf") {
		return files[0]
	}
	return dir
}
