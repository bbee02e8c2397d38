package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fakehub"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// sourceFolder links the fixture and the test tokenizer into parent/name,
// with extra files written there.
func sourceFolder(t *testing.T, parent, name string, extra map[string]string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36), dir)
	testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), dir)
	for n, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// exportRun exports and returns the output folder's files.
func exportRun(t *testing.T, src string, args ...string) map[string][]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--quiet"}, args...)...)
	if code != 0 {
		t.Fatalf("export --src %s %v: exit %d: %s", src, args, code, stderr)
	}
	return readDir(t, out)
}

// Same source, same bytes: the fixture exported from two folders (one named
// like the release with Qwen's README front matter, one named otherwise with
// --base-model), from a Hugging Face cache snapshot and from the (fake) Hub
// gives byte-identical model files on every target. The model files name
// the repo, never a path; the manifest keeps where the source was read from.
func TestSameSourceSameBytes(t *testing.T) {
	const repo = "Qwen/Qwen3.6-35B-A3B"
	readme := "---\nlibrary_name: transformers\nlicense: apache-2.0\nlicense_link: https://huggingface.co/Qwen/Qwen3.6-35B-A3B/blob/main/LICENSE\npipeline_tag: image-text-to-text\n---\n\n# Qwen3.6-35B-A3B\n"
	root := t.TempDir()
	named := sourceFolder(t, filepath.Join(root, "downloads"), "Qwen3.6-35B-A3B", map[string]string{"README.md": readme})
	other := sourceFolder(t, filepath.Join(root, "elsewhere"), "my-copy", nil)
	cache := filepath.Join(root, "hub")
	cacheSnapshot(t, cache, repo, fakehub.Commit, other)
	hub := fakehub.New(repo, other)
	defer hub.Close()
	hubEnv(t, hub.URL)
	t.Setenv("HF_HUB_CACHE", cache)

	sources := []struct {
		name string
		src  string
		args []string
	}{
		{"folder named like the release, README front matter", named, nil},
		{"folder named otherwise, --base-model", other, []string{"--base-model", repo}},
		{"Hugging Face cache", repo, nil},
		{"hf://", "hf://" + repo, nil},
	}
	for _, target := range [][]string{
		{"--target", "openvino", "--head-precision", "int8"},
		{"--target", "gguf"},
		{"--target", "mlx", "--head-precision", "int4"},
	} {
		t.Run(target[1], func(t *testing.T) {
			var first map[string][]byte
			for _, s := range sources {
				files := exportRun(t, s.src, append(append([]string{}, target...), s.args...)...)
				var man manifests.Manifest
				if err := json.Unmarshal(files[manifests.FileName], &man); err != nil {
					t.Fatal(err)
				}
				if man.Model.BaseModel != repo || man.Model.Name != repo || man.Source.Repo != repo {
					t.Errorf("%s: manifest names %q / %q / %q, want %s", s.name, man.Model.BaseModel, man.Model.Name, man.Source.Repo, repo)
				}
				card := string(files[manifests.CardFile])
				if !strings.Contains(card, "# "+path.Base(repo)+" MTP head for ") || strings.Contains(card, root) {
					t.Errorf("%s: card title or a path: %.200s", s.name, card)
				}
				for n, b := range files {
					if n != manifests.FileName && n != manifests.CardFile && bytes.Contains(b, []byte(root)) {
						t.Errorf("%s: %s holds the source's path", s.name, n)
					}
				}
				delete(files, manifests.FileName)
				delete(files, manifests.CardFile)
				if first == nil {
					first = files
					continue
				}
				if len(files) != len(first) {
					t.Errorf("%s: %d files, the first source gave %d", s.name, len(files), len(first))
				}
				for n, b := range first {
					if !bytes.Equal(files[n], b) {
						t.Errorf("%s: %s differs from the first source's", s.name, n)
					}
				}
			}
			if target[1] == "gguf" {
				checkGGUFName(t, first, "Qwen3.6-35B-A3B")
			}
		})
	}
}

// checkGGUFName checks that the sidecar among files is named after name,
// in its file name and general.name.
func checkGGUFName(t *testing.T, files map[string][]byte, name string) {
	t.Helper()
	b, ok := files["mtp-"+name+"-BF16.gguf"]
	if !ok {
		t.Fatalf("no mtp-%s-BF16.gguf among %v", name, slices.Collect(maps.Keys(files)))
	}
	f, err := gg.Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Lookup("general.name"); v.V != name {
		t.Errorf("general.name %v, want %s", v.V, name)
	}
}

// A folder the source does not identify is named by its base name, however
// it was given (--src . included), never by its path; the manifest keeps
// the path, the card shows the name. A README whose base_model names another
// model (the model this one was made from) does not name the folder.
func TestSourceNamedByFolderName(t *testing.T) {
	readme := "---\nbase_model:\n- Qwen/Qwen3.6-35B-A3B\nlicense: apache-2.0\n---\n"
	dir := sourceFolder(t, t.TempDir(), "my-finetune", map[string]string{"README.md": readme})
	t.Chdir(dir)
	files := exportRun(t, ".", "--target", "gguf")
	checkGGUFName(t, files, "my-finetune")
	var man manifests.Manifest
	if err := json.Unmarshal(files[manifests.FileName], &man); err != nil {
		t.Fatal(err)
	}
	if man.Source.Name != "." || man.Model.Name != "my-finetune" || man.Model.BaseModel != "" || man.Source.Repo != "" {
		t.Errorf("manifest: source %q, name %q, base model %q, repo %q", man.Source.Name, man.Model.Name, man.Model.BaseModel, man.Source.Repo)
	}
	if card := string(files[manifests.CardFile]); !strings.Contains(card, "# my-finetune MTP head for llama.cpp (GGUF BF16)") {
		t.Errorf("card: %.300s", card)
	}
	ov := exportRun(t, dir, "--target", "openvino")
	for _, n := range []string{"openvino_mtp_model.xml", "openvino_mtp_lm_head.xml"} {
		if x := string(ov[n]); !strings.Contains(x, `"my-finetune"`) || strings.Contains(x, dir) {
			t.Errorf("%s: mtpconv_source is not the folder's name", n)
		}
	}
}
