//go:build unix

package export

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The lock: one holder at a time, a stale lock file does not block, and a
// process that opened the file before its holder deleted it cannot lock
// the deleted inode while another holds the new one.
func TestOutputLock(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, path string)
	}{
		{"second holder refused", func(t *testing.T, path string) {
			a, err := lockOutput(path)
			if err != nil {
				t.Fatal(err)
			}
			defer a.release()
			if _, err := lockOutput(path); !errors.Is(err, errLocked) {
				t.Fatalf("second lock: %v", err)
			}
		}},
		{"stale file does not block", func(t *testing.T, path string) {
			os.WriteFile(path, nil, 0o644)
			a, err := lockOutput(path)
			if err != nil {
				t.Fatal(err)
			}
			a.release()
			if _, err := os.Stat(path); err == nil {
				t.Error("release left the lock file")
			}
		}},
		{"released lock is free", func(t *testing.T, path string) {
			a, _ := lockOutput(path)
			a.release()
			b, err := lockOutput(path)
			if err != nil {
				t.Fatal(err)
			}
			b.release()
		}},
		{"deleted inode opened earlier", func(t *testing.T, path string) {
			a, err := lockOutput(path)
			if err != nil {
				t.Fatal(err)
			}
			early, err := os.Open(path) // a waiter that opened the file before a released it
			if err != nil {
				t.Fatal(err)
			}
			defer early.Close()
			a.release()
			c, err := lockOutput(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.release()
			if held, err := lockOpened(early, path); held || err != nil {
				t.Fatalf("the deleted inode counted as the lock: held %v, %v", held, err)
			}
		}},
		{"planted symlink refused", func(t *testing.T, path string) {
			victim := filepath.Join(filepath.Dir(path), "victim")
			os.Symlink(victim, path) // dangling: following it would create the file
			if l, err := lockOutput(path); err == nil || !strings.Contains(err.Error(), "symbolic link") {
				l.release()
				t.Fatalf("lock through a symlink: %v", err)
			}
			if _, err := os.Lstat(victim); err == nil {
				t.Error("the lock created the symlink's target")
			}
			os.WriteFile(victim, []byte("mine"), 0o644)
			if _, err := lockOutput(path); err == nil {
				t.Fatal("lock through a symlink to an existing file")
			}
			if b, _ := os.ReadFile(victim); string(b) != "mine" {
				t.Errorf("the symlink's target holds %q", b)
			}
			if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the planted symlink was changed: %v", err)
			}
		}},
		{"FIFO refused without blocking", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := lockOutput(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("lock on a FIFO: %v", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, filepath.Join(t.TempDir(), ".out.lock"))
		})
	}
}
