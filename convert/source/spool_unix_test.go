//go:build unix

package source

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The spools of runs that are gone (killed before they could remove them)
// are removed by the next run's prefetch; a running export's spool, and
// anything not named and made like a spool, stays.
func TestPrefetchRemovesAbandonedSpools(t *testing.T) {
	isolate(t)
	h := newHub(t, repoDir(t))
	spools := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := gone.Process.Pid
	mk := func(name string, lock bool) string {
		dir := filepath.Join(spools, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "0.part"), []byte("spooled bytes"), 0o644)
		if lock {
			os.WriteFile(filepath.Join(dir, spoolOwnerFile), nil, 0o600)
		}
		return dir
	}
	killed := mk(fmt.Sprintf("%s%d-1", spoolPrefix, os.Getpid()), true) // lock file left, lock released
	unlocked := mk(fmt.Sprintf("%s%d-2", spoolPrefix, deadPID), false)  // killed before it locked
	starting := mk(fmt.Sprintf("%s%d-3", spoolPrefix, os.Getpid()), false)
	running := mk(fmt.Sprintf("%s%d-4", spoolPrefix, os.Getpid()), true)
	held, err := os.Open(filepath.Join(running, spoolOwnerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	other := mk("other-"+spoolPrefix+"1", true)
	target := mk("elsewhere", true)
	link := filepath.Join(spools, spoolPrefix+"link")
	os.Symlink(target, link)

	opt := fastOptions(h, &syncBuffer{})
	opt.SpoolDir = spools
	r, err := OpenRemote(testRepo, "main", opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Prefetch(map[string][]Range{"big.bin": {{0, 1000}}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(r.spool), fmt.Sprintf("%s%d-", spoolPrefix, os.Getpid())) {
		t.Errorf("spool %s is not named for its process", r.spool)
	}
	for dir, want := range map[string]bool{killed: false, unlocked: false, starting: true, running: true, other: true, target: true, link: true, r.spool: true} {
		if _, err := os.Lstat(dir); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(target, "0.part")); err != nil {
		t.Errorf("the folder a spool-named symlink points to lost its files: %v", err)
	}
	// A second remote in the same process does not take the first one's spool for abandoned.
	r2, err := OpenRemote(testRepo, "main", opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Prefetch(map[string][]Range{"big.bin": {{0, 1000}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.spool); err != nil {
		t.Errorf("a running spool was removed: %v", err)
	}
	spool := r.spool
	r.Close()
	r2.Close()
	if _, err := os.Stat(spool); err == nil {
		t.Error("Close left the spool")
	}
}
