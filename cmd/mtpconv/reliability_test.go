package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// A graft resumed after the trunk's tensor data changed under an unchanged
// header (a re-upload, a requant of the same recipe) does not reuse the
// bundled file built from the old bytes: it is written again, a note says
// why, and the output is the fresh graft of the trunk as it is now. An
// unchanged trunk is reused.
func TestGraftResumeProvesTrunkBytes(t *testing.T) {
	src := ggufSource(t)
	for _, change := range []bool{false, true} {
		name := map[bool]string{false: "unchanged trunk", true: "trunk data changed"}[change]
		t.Run(name, func(t *testing.T) {
			trunk := graftTrunk(t, src)
			file := filepath.Base(trunk)
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			args := []string{"--src", src, "--target", "gguf", "--graft", trunk}
			kill(startHeld(t, out, file, args...))
			if change {
				f, _ := ggufTensors(t, trunk)
				raw, err := os.ReadFile(trunk)
				if err != nil {
					t.Fatal(err)
				}
				ti := f.Tensors[len(f.Tensors)/2]
				raw[f.DataOffset+ti.Offset+3] ^= 0x40
				if err := os.WriteFile(trunk, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runCLI(t, append([]string{"export", "--out", out, "--resume", "--json"}, args...)...)
			if code != 0 {
				t.Fatalf("resume: exit %d: %s", code, stderr)
			}
			var sum exportSummary
			if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if reused := slices.Contains(sum.ReusedFiles, file); reused == change {
				t.Errorf("reused %v, notes %v", sum.ReusedFiles, sum.Notes)
			}
			if change && !slices.ContainsFunc(sum.Notes, func(n string) bool {
				return strings.Contains(n, file+": not reused") && strings.Contains(n, "trunk")
			}) {
				t.Errorf("no note says why %s was written again: %v", file, sum.Notes)
			}
			want := filepath.Join(t.TempDir(), "want")
			if code, _, stderr := runCLI(t, append([]string{"export", "--out", want, "--quiet"}, args...)...); code != 0 {
				t.Fatalf("fresh graft: exit %d: %s", code, stderr)
			}
			a, _ := os.ReadFile(filepath.Join(out, file))
			b, _ := os.ReadFile(filepath.Join(want, file))
			if !bytes.Equal(a, b) {
				t.Error("the resumed graft differs from a fresh graft of the trunk as it is now")
			}
		})
	}
}

// An output file named as a file the export itself writes (the card, the
// manifest, the resume markers) is refused before anything is written,
// naming both; with --no-card the card's name is free.
func TestOutputNameClashRefused(t *testing.T) {
	src := ggufSource(t)
	base := graftTrunk(t, src)
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra []string
		ok    bool
	}{
		{manifests.CardFile, nil, false},
		{strings.ToLower(manifests.CardFile), nil, false},
		{manifests.CardFile, []string{"--no-card"}, true},
		{manifests.FileName, []string{"--no-card"}, false},
		{".mtpconv-plan", nil, false},
		{".mtpconv-done", nil, false},
	} {
		t.Run(c.name+strings.Join(c.extra, ""), func(t *testing.T) {
			trunk := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(trunk, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "gguf", "--graft", trunk, "--out", out, "--quiet"}, c.extra...)...)
			if c.ok {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if b, _ := os.ReadFile(filepath.Join(out, c.name)); !bytes.HasPrefix(b, []byte("GGUF")) {
					t.Error("the bundled file is not there")
				}
				return
			}
			if code != 1 || !strings.Contains(stderr, c.name) || !strings.Contains(stderr, "clash") {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
		})
	}
}

// hfCacheSnapshot moves every file of dir into the blob store of a Hugging
// Face cache entry and links it from a snapshot folder, as the cache lays
// out a download; it returns the snapshot and the blob store.
func hfCacheSnapshot(t *testing.T, dir string) (snapshot, blobs string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "models--mlx-community--tiny")
	blobs = filepath.Join(repo, "blobs")
	snapshot = filepath.Join(repo, "snapshots", "0123456789abcdef")
	for _, d := range []string{blobs, snapshot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := manifests.SHA256(b)
		if err := os.WriteFile(filepath.Join(blobs, sum), b, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", sum), filepath.Join(snapshot, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot, blobs
}

// One rule for links, followed by --into and verify alike: an MLX folder
// that is a Hugging Face cache snapshot (every file a link into the repo's
// blobs) takes the head, nothing is written through a link (the blobs are
// unchanged, the replaced config.json and index are regular files of the
// snapshot) and verify passes; a folder whose file links anywhere else is
// refused by --into, naming the file, and left as it was.
func TestIntoFollowsVerifysLinkRule(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.Qwen36)
	snapshot, blobs := hfCacheSnapshot(t, headlessMLXFolder(t, "--trunk-precision", "int4"))
	before := tree(t, blobs)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", snapshot, "--quiet"); code != 0 {
		t.Fatalf("--into a cache snapshot: exit %d: %s", code, stderr)
	}
	if d := diffTrees(before, tree(t, blobs)); d != "" {
		t.Errorf("the blob store changed: %s", d)
	}
	for _, f := range []string{"config.json", st.IndexFile, "model-mtp.safetensors"} {
		if fi, err := os.Lstat(filepath.Join(snapshot, f)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file of the snapshot: %v", f, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(snapshot, "model.safetensors")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the trunk's link was replaced: %v", err)
	}
	if code, stdout, _ := runCLI(t, "verify", snapshot); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify of the snapshot: exit %d: %s", code, stdout)
	}

	// A link out of the folder and out of any blob store.
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	elsewhere := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.Rename(filepath.Join(dir, "model.safetensors"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, dir, 1, "model.safetensors: file name", "export", "--src", src, "--target", "combined", "--into", dir)
}
