//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A second --into waits for nothing and deletes nothing of a run that holds
// the folder: the lock is taken before any change, and a usage error is
// found before the lock.
func TestIntoSecondRunTouchesNothing(t *testing.T) {
	t.Parallel()
	src, dir := intoFixture(t)
	// A first run, still writing: its lock held, its staging folder in use.
	lock, err := os.OpenFile(filepath.Join(dir, ".mtpconv-into.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dir, ".mtpconv-into")
	os.MkdirAll(staging, 0o755)
	os.WriteFile(filepath.Join(staging, ".mtpconv-plan"), []byte("the marker a run stages with"), 0o644)
	os.WriteFile(filepath.Join(staging, "openvino_mtp_model.bin"), []byte("being written"), 0o644)
	snap := tree(t, dir)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--router-bits", "4"}, exitUsage, "does not take --router-bits"},
		{[]string{"--resume"}, exitUsage, "--resume"},
		{[]string{"--force"}, exitFailure, "another export is adding into"},
		{nil, exitFailure, "another export is adding into"},
	} {
		args := append([]string{"export", "--src", src, "--target", "openvino", "--into", dir, "--quiet"}, c.args...)
		code, _, stderr := runCLI(t, args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
		if d := diffTrees(snap, tree(t, dir)); d != "" {
			t.Fatalf("%v changed %s", c.args, d)
		}
	}
}
