package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// -list names every fixture of the catalog and every GGUF trunk, each with
// what it is, and marks the defaults; an unknown name fails naming it.
func TestList(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-list"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	listed := func(name string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && strings.TrimSuffix(f[0], "*") == name {
				return l
			}
		}
		return ""
	}
	for _, f := range fixtures.Catalog {
		if l := listed(f.Name); !strings.Contains(l, f.About) {
			t.Errorf("%s is not listed with its description", f.Name)
		}
	}
	for _, tr := range trunks {
		if listed(tr.File) == "" {
			t.Errorf("%s is not listed", tr.File)
		}
	}
	for _, n := range optimum {
		if l := listed(optimumDir(n)); !strings.Contains(l, "optimum-intel export of "+n) {
			t.Errorf("%s is not listed", optimumDir(n))
		}
		if _, err := os.Stat(filepath.Join(fixtures.Root(), optimumDir(n), "openvino_language_model.xml")); err != nil {
			t.Errorf("the listed folder is not there: %v", err)
		}
	}
	for _, n := range defaults {
		if l := listed(n); !strings.HasPrefix(l, n+"*") {
			t.Errorf("the default %s is not marked: %q", n, l)
		}
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"-out", t.TempDir(), "nope"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `unknown fixture "nope"`) {
		t.Errorf("unknown name: exit %d, %q", code, errb.String())
	}
}

// The trunk GGUF is written from its fixture, whole (no temporary left
// beside it), the same bytes every time, and holds a trunk without a head.
func TestWriteTrunk(t *testing.T) {
	base := t.TempDir()
	tr := trunks[0]
	var out, errb bytes.Buffer
	if code := run([]string{"-out", base, tr.File}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	path := filepath.Join(base, tr.File)
	if strings.TrimSpace(out.String()) != path {
		t.Errorf("printed %q, want %s", out.String(), path)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"-out", base, tr.File}, &out, &errb); code != 0 {
		t.Fatalf("again: exit %d: %s", code, errb.String())
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(first, again) {
		t.Error("a second run wrote other bytes")
	}
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left %s behind", e.Name())
		}
	}
	f, size, err := gg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s := gg.Summarize(tr.File, size, f)
	if s.Architecture != "qwen35moe" || s.MTPHead || s.NextnLayers != 0 || s.BlockCount != fixtures.Tiny.Layers || s.TokenizerModel != "gpt2" {
		t.Errorf("trunk: arch %s, head %v, nextn %d, blocks %d, tokenizer %s", s.Architecture, s.MTPHead, s.NextnLayers, s.BlockCount, s.TokenizerModel)
	}
}
