//go:build linux || darwin

package run

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// hashWindow is how much of the file one mapping covers.
const hashWindow = 64 << 20

// hashRange hashes [off, end) of f where its pages are: from shared
// read-only mappings of the page cache, so the bytes the copy or the workers
// just wrote are not first copied into a buffer (the hash is a graft's
// critical path, and that copy cost a third of it). MAP_POPULATE maps a
// window's pages in one call rather than a fault per few pages.
func hashRange(h io.Writer, f *os.File, off, end int64, _ *[]byte) error {
	page := int64(os.Getpagesize())
	for off < end {
		start := off &^ (page - 1)
		stop := min(end, start+hashWindow)
		m, err := unix.Mmap(int(f.Fd()), start, int(stop-start), unix.PROT_READ, unix.MAP_SHARED|mapPopulate)
		if err != nil {
			return &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
		}
		h.Write(m[off-start:])
		if err := unix.Munmap(m); err != nil {
			return &os.PathError{Op: "munmap", Path: f.Name(), Err: err}
		}
		off = stop
	}
	return nil
}
