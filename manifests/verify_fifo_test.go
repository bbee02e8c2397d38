//go:build unix

package manifests_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/internal/testfs"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

func TestVerifyRefusesFIFOs(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		file  string
		other []string
	}{
		{"listed file", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, "pipe"))
			editManifest(t, dir, func(m *manifests.Manifest) { m.Files = append(m.Files, manifests.File{Name: "pipe"}) })
		}, "pipe", nil},
		{"tensor file", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			testfs.Mkfifo(t, filepath.Join(dir, "model.safetensors"))
		}, "model.safetensors", nil},
		{"tensor file not listed", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, "pipe.safetensors"))
			editManifest(t, dir, func(m *manifests.Manifest) { m.Tensors[0].File = "pipe.safetensors" })
		}, "pipe.safetensors", []string{"tensor_extra"}}, // fc.weight, in model.safetensors
		{"symlink to a FIFO", func(t *testing.T, dir string) {
			testfs.Mkfifo(t, filepath.Join(dir, "pipe"))
			os.Remove(filepath.Join(dir, "config.json"))
			os.Symlink("pipe", filepath.Join(dir, "config.json"))
		}, "config.json", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, baseOutput(t, fixtures.Qwen36, "bf16"))
			c.setup(t, dir)
			start := time.Now()
			r := verify(t, dir, nil)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if !slices.Equal(kinds(r), append([]string{manifests.KindFileNotRegular}, c.other...)) || !r.Unsafe() {
				t.Fatalf("problems %+v", r.Problems)
			}
			if p := r.Problems[0]; p.File != c.file || !strings.Contains(p.Message, c.file) || !strings.Contains(p.Message, "FIFO") {
				t.Errorf("problem %+v does not name %s as a FIFO", p, c.file)
			}
		})
	}
}

func TestLoadRefusesFIFOManifest(t *testing.T) {
	dir := t.TempDir()
	testfs.Mkfifo(t, filepath.Join(dir, manifests.FileName))
	done := make(chan error, 1)
	go func() {
		_, err := manifests.Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), manifests.FileName) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
