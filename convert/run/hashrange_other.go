//go:build !linux && !darwin

package run

import (
	"io"
	"os"
)

// hashRange hashes [off, end) of f, read back through buf.
func hashRange(h io.Writer, f *os.File, off, end int64, buf *[]byte) error {
	if need := min(end-off, 8<<20); int64(len(*buf)) < need {
		*buf = make([]byte, need)
	}
	for off < end {
		n := min(int64(len(*buf)), end-off)
		if _, err := f.ReadAt((*buf)[:n], off); err != nil {
			return err
		}
		h.Write((*buf)[:n])
		off += n
	}
	return nil
}
