package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
