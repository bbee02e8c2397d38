// Package testfs builds test folders: a fixture's files linked into a new
// folder (so a test that changes or deletes it never harms the fixture),
// and FIFOs where a test needs a file that blocks.
package testfs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// LinkDir fills dir with symlinks to the files of src, but for those named in skip.
func LinkDir(t testing.TB, src, dir string, skip ...string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}
