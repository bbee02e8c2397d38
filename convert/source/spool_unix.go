//go:build unix

package source

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockSpool creates the owner lock of a new spool folder and holds it: the
// kernel drops it when the process ends, however it ends.
func lockSpool(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, spoolOwnerFile), os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// spoolAbandoned reports whether the spool folder dir belongs to no running
// process: its owner lock can be taken, or, before its owner created the
// lock, the process named in the folder's name is gone.
func spoolAbandoned(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, spoolOwnerFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		pid, ok := spoolPID(filepath.Base(dir))
		return ok && unix.Kill(pid, 0) == unix.ESRCH
	}
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// spoolPID reads the process id from a spool folder's name.
func spoolPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, spoolPrefix)
	if !ok {
		return 0, false
	}
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	return n, err == nil && n > 0
}
