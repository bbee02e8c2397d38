//go:build unix

package export

import (
	"errors"
	"os"
	"path/filepath"
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, filepath.Join(t.TempDir(), ".out.lock"))
		})
	}
}
