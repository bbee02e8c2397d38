//go:build unix

package gguf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// TestOpenRefusesNonRegularFiles: a FIFO (or a link to one) is refused
// before it is opened; it used to block the open forever.
func TestOpenRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "x.gguf")
	testfs.Mkfifo(t, fifo)
	link := filepath.Join(dir, "link.gguf")
	os.Symlink("x.gguf", link)
	for _, p := range []string{fifo, link, dir} {
		done := make(chan error, 1)
		go func() {
			_, _, err := OpenContext(context.Background(), p)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, st.ErrNotRegular) || !strings.Contains(err.Error(), p+" is not a regular file") {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: blocked", p)
		}
	}
}
