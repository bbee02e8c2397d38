//go:build unix

package export

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked: another process holds the output's lock.
var errLocked = errors.New("locked")

// outputLock is an exclusive flock on a lock file beside the output. The
// kernel drops it when the process ends, however it ends, so a lock file
// left by a killed run has no holder and does not block the next one.
//
// The holder deletes the file before unlocking. A process that opened the
// file before it was deleted may then lock the deleted inode; so a lock
// counts only if the locked file is still the one at the path, else the
// path is opened again. Every holder thus holds the inode the path names,
// and two processes never both believe they hold the lock.
type outputLock struct {
	f    *os.File
	path string
}

// lockOutput takes the lock at path without waiting: errLocked if another
// process holds it.
func lockOutput(path string) (*outputLock, error) {
	for range 100 {
		// Never through a symlink planted at the path: the lock would create
		// or hold a file elsewhere, and release would not remove it.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link, not a lock file mtpconv made; refusing to follow it (remove it if it is not yours)", path)
		}
		if err != nil {
			return nil, err
		}
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%s is not a regular file, not a lock file mtpconv made; refusing to use it", path)
		}
		held, err := lockOpened(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if held {
			return &outputLock{f: f, path: path}, nil
		}
		f.Close() // the file was replaced or deleted meanwhile: try again
	}
	return nil, fmt.Errorf("%s: the lock file keeps being replaced", path)
}

// lockOpened flocks an open lock file and reports whether it is still the
// file at path (false: a stale inode, deleted or replaced since it was
// opened). errLocked if another process holds it.
func lockOpened(f *os.File, path string) (bool, error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, errLocked
		}
		return false, fmt.Errorf("%s: %w", path, err)
	}
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &named); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return held.Dev == named.Dev && held.Ino == named.Ino, nil
}

// release deletes the lock file, then unlocks it.
func (l *outputLock) release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}
