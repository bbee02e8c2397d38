package run

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
	"sort"
	"sync"
)

// fileHasher computes a file's sha256 while it is being written out of
// order: workers report each range they finish, and the hasher reads back
// and hashes the completed prefix as it grows (from the page cache), so the
// file's hash is ready moments after its last byte instead of after a second
// full pass.
type fileHasher struct {
	f      *os.File
	total  int64
	mu     sync.Mutex
	cond   *sync.Cond
	done   [][2]int64 // completed ranges, sorted and merged
	hashed int64
	h      hash.Hash
	err    error
	quit   bool
	ended  chan struct{}
}

func newFileHasher(f *os.File, total int64) *fileHasher {
	fh := &fileHasher{f: f, total: total, h: sha256.New(), ended: make(chan struct{})}
	fh.cond = sync.NewCond(&fh.mu)
	go fh.run()
	return fh
}

// mark records that [off, off+n) holds its final bytes.
func (fh *fileHasher) mark(off, n int64) {
	if n <= 0 {
		return
	}
	fh.mu.Lock()
	fh.done = append(fh.done, [2]int64{off, off + n})
	sort.Slice(fh.done, func(i, j int) bool { return fh.done[i][0] < fh.done[j][0] })
	merged := fh.done[:1]
	for _, r := range fh.done[1:] {
		if last := &merged[len(merged)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
		} else {
			merged = append(merged, r)
		}
	}
	fh.done = merged
	fh.cond.Signal()
	fh.mu.Unlock()
}

// ready is the end of the completed prefix past what is hashed.
func (fh *fileHasher) ready() int64 {
	if len(fh.done) > 0 && fh.done[0][0] <= fh.hashed {
		return fh.done[0][1]
	}
	return fh.hashed
}

func (fh *fileHasher) run() {
	defer close(fh.ended)
	var buf []byte // grown when needed: a file waiting for its turn holds only its header's worth
	for {
		fh.mu.Lock()
		for fh.ready() <= fh.hashed && fh.hashed < fh.total && !fh.quit {
			fh.cond.Wait()
		}
		end, start, quit := fh.ready(), fh.hashed, fh.quit
		fh.mu.Unlock()
		if quit || start >= fh.total {
			return
		}
		if need := min(end-start, 8<<20); int64(len(buf)) < need {
			buf = make([]byte, need)
		}
		for off := start; off < end; {
			n := min(int64(len(buf)), end-off)
			if _, err := fh.f.ReadAt(buf[:n], off); err != nil {
				fh.mu.Lock()
				fh.err = err
				fh.mu.Unlock()
				return
			}
			fh.h.Write(buf[:n])
			off += n
		}
		fh.mu.Lock()
		fh.hashed = end
		fh.mu.Unlock()
	}
}

// sum waits for the whole file and returns its hex sha256.
func (fh *fileHasher) sum() (string, error) {
	<-fh.ended
	if fh.err != nil {
		return "", fh.err
	}
	if fh.hashed != fh.total {
		return "", os.ErrClosed
	}
	return hex.EncodeToString(fh.h.Sum(nil)), nil
}

// stop abandons hashing (after a failure).
func (fh *fileHasher) stop() {
	fh.mu.Lock()
	fh.quit = true
	fh.cond.Signal()
	fh.mu.Unlock()
	<-fh.ended
}
