package gguf

import (
	"fmt"
	"io"
	"os"
)

// CopyRange copies c.Len bytes of src at c.Src to dst at c.Dst: shared by a
// reflink where the file system offers one and the offsets line up with its
// blocks, else by copy_file_range, else through a small buffer. The bytes
// are never decoded and never held in memory whole.
func CopyRange(dst, src *os.File, c Copy) error {
	if c.Len <= 0 {
		return nil
	}
	if ok, err := kernelCopy(dst, src, c); ok || err != nil {
		return err
	}
	buf := make([]byte, min(c.Len, 1<<20))
	r := io.NewSectionReader(src, c.Src, c.Len)
	off := c.Dst
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
				return werr
			}
			off += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if off != c.Dst+c.Len {
		return fmt.Errorf("%s ends %d bytes early", src.Name(), c.Dst+c.Len-off)
	}
	return nil
}
