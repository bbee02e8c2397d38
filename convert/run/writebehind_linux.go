package run

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to disk
// now, without waiting for it.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// dropWritten lets the kernel drop [off, off+n) of f from the page cache
// where it is on disk already (dirty pages are left alone).
func dropWritten(f *os.File, off, n int64) {
	unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
