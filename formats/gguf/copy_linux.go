package gguf

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// kernelCopy copies by reflink or copy_file_range; ok false (and no error)
// when neither applies and nothing was copied.
func kernelCopy(dst, src *os.File, c Copy) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dst.Fd()), &st); err == nil && st.Blksize > 0 {
		bs := int64(st.Blksize)
		if c.Src%bs == 0 && c.Dst%bs == 0 && c.Len%bs == 0 {
			r := unix.FileCloneRange{Src_fd: int64(src.Fd()), Src_offset: uint64(c.Src), Src_length: uint64(c.Len), Dest_offset: uint64(c.Dst)}
			if unix.IoctlFileCloneRange(int(dst.Fd()), &r) == nil {
				return true, nil
			}
		}
	}
	roff, woff, left := c.Src, c.Dst, c.Len
	for left > 0 {
		n, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(left, 1<<30)), 0)
		if err != nil {
			if left == c.Len && (errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
				errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF)) {
				return false, nil // nothing copied yet: read and write instead
			}
			return true, fmt.Errorf("copy_file_range from %s: %w", src.Name(), err)
		}
		if n == 0 {
			return true, fmt.Errorf("%s ends %d bytes early", src.Name(), left)
		}
		left -= int64(n)
	}
	return true, nil
}
