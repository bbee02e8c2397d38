package run

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// The hash of a file written out of order is the hash of its bytes, with or
// without write-behind (which only starts writeback and drops clean pages).
func TestFileHasherOutOfOrder(t *testing.T) {
	for _, lag := range []int64{0, 1 << 16} {
		data := make([]byte, 3<<20+123)
		rand.Read(data)
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fh := startFileHasher(f, int64(len(data)), lag, nil)
		// Pieces land back to front, each marked after it is written.
		const piece = 1 << 19
		for off := (int64(len(data)) - 1) / piece * piece; off >= 0; off -= piece {
			end := min(off+piece, int64(len(data)))
			if _, err := f.WriteAt(data[off:end], off); err != nil {
				t.Fatal(err)
			}
			fh.mark(off, end-off)
		}
		got, err := fh.sum()
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		if got != hex.EncodeToString(want[:]) {
			t.Errorf("lag %d: sha256 %s, want %x", lag, got, want)
		}
		if w := fh.behind; lag > 0 && (w.sent != int64(len(data)) || w.dropped != int64(len(data))-lag) {
			t.Errorf("lag %d: sent %d bytes to disk and let go of %d, want %d and %d", lag, w.sent, w.dropped, len(data), int64(len(data))-lag)
		}
	}
}
