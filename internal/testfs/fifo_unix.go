//go:build unix

package testfs

import (
	"os"
	"syscall"
	"testing"
)

// Mkfifo makes a FIFO at path. If a test leaves a reader blocked on it,
// cleanup opens the write end once, so the reader sees end of file.
func Mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}
