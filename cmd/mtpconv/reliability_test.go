package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/manifests"
)

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
