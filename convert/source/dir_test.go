package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	d := Dir(dir)
	f, err := d.Open("config.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != 3 {
		t.Errorf("size %d", f.Size())
	}
	// A local file exposes its *os.File, so the safetensors reader manages
	// its page cache (StreamUncached).
	if of, ok := f.(interface{ OSFile() *os.File }); !ok || of.OSFile() == nil {
		t.Error("a folder's file does not expose its *os.File")
	}
	if _, err := d.Open("absent.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	for name, want := range map[string]string{
		"sub":         "not a regular file",
		"../x":        "leaves the checkpoint folder",
		"/etc/passwd": "leaves the checkpoint folder",
		`a\b`:         "leaves the checkpoint folder",
	} {
		if _, err := d.Open(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", name, err, want)
		}
	}
}
