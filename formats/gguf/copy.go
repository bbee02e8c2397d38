package gguf

import (
	"fmt"
	"io"
	"os"
)

// CopyMethod says how a range was copied.
type CopyMethod string

const (
	CopyReflink CopyMethod = "reflink"         // FICLONERANGE: the blocks are shared, nothing is copied
	CopyKernel  CopyMethod = "copy_file_range" // in the kernel, no byte passes through user space
	CopyUser    CopyMethod = "read/write"      // a file system or platform without either
)

// CopyRange copies c.Len bytes of src at c.Src to dst at c.Dst: shared by a
// reflink where the file system offers one and the offsets line up with its
// blocks, else by copy_file_range, else through a small buffer. The bytes
// are never decoded and never held in memory whole.
func CopyRange(dst, src *os.File, c Copy) (CopyMethod, error) {
	if c.Len <= 0 {
		return CopyKernel, nil
	}
	if m, ok, err := kernelCopy(dst, src, c); ok || err != nil {
		return m, err
	}
	buf := make([]byte, min(c.Len, 1<<20))
	r := io.NewSectionReader(src, c.Src, c.Len)
	off := c.Dst
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
				return CopyUser, werr
			}
			off += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return CopyUser, err
		}
	}
	if off != c.Dst+c.Len {
		return CopyUser, fmt.Errorf("%s ends %d bytes early", src.Name(), c.Dst+c.Len-off)
	}
	return CopyUser, nil
}
