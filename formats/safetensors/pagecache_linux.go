package safetensors

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cachedFraction is the fraction of the pages of [off, off+n) of f that sit
// in the page cache (mincore over a mapping that is never touched).
func cachedFraction(f *os.File, off, n int64) (float64, bool) {
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	length := off + n - start
	if n <= 0 || length > 1<<40 {
		return 0, false
	}
	m, err := unix.Mmap(int(f.Fd()), start, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, false
	}
	defer unix.Munmap(m)
	vec := make([]byte, (length+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(length), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, false
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec)), true
}

// dropCached tells the kernel that [off, off+n) of f will not be read again.
func dropCached(f *os.File, off, n int64) {
	unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
