//go:build unix

package source

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// writeIndex writes a checkpoint index naming shards.
func writeIndex(t *testing.T, dir string, m map[string]string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 9}, "weight_map": m})
	if err := os.WriteFile(filepath.Join(dir, st.IndexFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// within runs fn and fails the test if it does not return in time.
func within(t *testing.T, d time.Duration, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("blocked for %v", d)
		return nil
	}
}

func TestLocalSourceRefusesNonRegularFiles(t *testing.T) {
	const a = "model-00001-of-00001.safetensors"
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		open  func(dir string) error
		want  string
	}{
		{"FIFO shard", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, a))
			writeIndex(t, dir, map[string]string{"x": a})
		}, func(dir string) error {
			ck, err := st.Open(Dir(dir))
			if err == nil {
				ck.Close()
			}
			return err
		}, a + " is not a regular file: it is a named pipe (FIFO)"},
		{"FIFO single file", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, st.SingleFile))
		}, func(dir string) error {
			_, err := st.Open(Dir(dir))
			return err
		}, st.SingleFile + " is not a regular file"},
		{"FIFO index", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, st.IndexFile))
		}, func(dir string) error {
			_, err := st.Open(Dir(dir))
			return err
		}, st.IndexFile},
		{"FIFO config.json", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, "config.json"))
		}, func(dir string) error {
			_, err := st.ReadSmallFile(Dir(dir), "config.json", 1<<20)
			return err
		}, "config.json is not a regular file: it is a named pipe (FIFO)"},
		{"symlink to a FIFO", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, "pipe"))
			os.Symlink("pipe", filepath.Join(dir, "config.json"))
		}, func(dir string) error {
			_, err := st.ReadSmallFile(Dir(dir), "config.json", 1<<20)
			return err
		}, "config.json is not a regular file"},
		{"character device", func(t *testing.T, dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "config.json")); err != nil {
				t.Skip(err)
			}
		}, func(dir string) error {
			_, err := st.ReadSmallFile(Dir(dir), "config.json", 1<<20)
			return err
		}, "config.json is not a regular file: it is a character device"},
		{"folder", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "config.json"), 0o755)
		}, func(dir string) error {
			_, err := st.ReadSmallFile(Dir(dir), "config.json", 1<<20)
			return err
		}, "config.json is not a regular file: it is a folder"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			err := within(t, 5*time.Second, func() error { return c.open(dir) })
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, st.ErrNotRegular) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestOpenRegularRegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	f, fi, err := st.OpenRegular(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 3)
	if n, err := f.ReadAt(b, 0); n != 3 || err != nil || string(b) != "abc" || fi.Size() != 3 {
		t.Fatalf("%d %v %q %d", n, err, b, fi.Size())
	}
}

// TestCacheRefFIFO: a refs file of the Hugging Face cache that is a FIFO is
// refused at once (reading it blocked forever).
func TestCacheRefFIFO(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	refs := filepath.Join(cache, "models--org--name", "refs")
	os.MkdirAll(refs, 0o755)
	testfs.Mkfifo(t, filepath.Join(refs, "main"))
	err := within(t, 5*time.Second, func() error { _, err := CacheSnapshot("org/name", "main"); return err })
	if !errors.Is(err, st.ErrNotRegular) || !strings.Contains(err.Error(), "refs/main is not a regular file") {
		t.Fatalf("error %v", err)
	}
}

// TestTokenFileFIFO: a FIFO where the Hugging Face token file goes is
// refused at once, naming it (opening it blocked forever), whether named by
// $HF_TOKEN_PATH or found at $HF_HOME/token; $HF_TOKEN still wins over it.
func TestTokenFileFIFO(t *testing.T) {
	for _, env := range []string{"HF_TOKEN_PATH", "HF_HOME"} {
		t.Run(env, func(t *testing.T) {
			for _, k := range []string{"HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "XDG_CACHE_HOME"} {
				t.Setenv(k, "")
			}
			dir := t.TempDir()
			fifo := filepath.Join(dir, "token")
			testfs.Mkfifo(t, fifo)
			if env == "HF_TOKEN_PATH" {
				t.Setenv(env, fifo)
			} else {
				t.Setenv(env, dir)
			}
			err := within(t, 5*time.Second, func() error { _, err := FindToken(); return err })
			if !errors.Is(err, st.ErrNotRegular) || !strings.Contains(err.Error(), fifo+" is not a regular file: it is a named pipe (FIFO)") || !strings.Contains(err.Error(), "$HF_TOKEN") {
				t.Fatalf("error %v", err)
			}
			t.Setenv("HF_TOKEN", "hf_env")
			if tok, err := FindToken(); tok != "hf_env" || err != nil {
				t.Fatalf("with $HF_TOKEN: %q, %v", tok, err)
			}
		})
	}
}
