package run

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/mtpconv/mtpconv/manifests"
)

// A file of writeBehindMin bytes or more is streamed through the page cache
// (writeBehind); writeBehindLag is how far behind the hashed prefix its pages
// are let go.
const (
	writeBehindMin = 4 << 30
	writeBehindLag = 1 << 30
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
	behind *writeBehind // nil for a file small enough to leave to the page cache
	h      hash.Hash
	tap    *copyTap // the copied ranges' own checksum, nil when none are copied
	err    error
	quit   bool
	ended  chan struct{}
}

// copied are the ranges (sorted, disjoint) whose bytes another file's
// copy provides: they are also checksummed on their own (copyTap).
func newFileHasher(f *os.File, total int64, copied [][2]int64) *fileHasher {
	var lag int64
	if total >= writeBehindMin {
		lag = writeBehindLag
	}
	return startFileHasher(f, total, lag, copied)
}

// startFileHasher starts hashing f, with write-behind lag bytes behind the
// hash if lag > 0.
func startFileHasher(f *os.File, total, lag int64, copied [][2]int64) *fileHasher {
	fh := &fileHasher{f: f, total: total, h: sha256.New(), ended: make(chan struct{})}
	if len(copied) > 0 {
		fh.tap = &copyTap{ranges: copied, crc: manifests.NewTensorHash()}
	}
	if lag > 0 {
		fh.behind = newWriteBehind(f, lag)
	}
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
	defer fh.behind.stop()
	var buf []byte // hashRange's read buffer where it maps no pages
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
		var w io.Writer = fh.h
		if fh.tap != nil {
			fh.tap.h, fh.tap.pos, w = fh.h, start, fh.tap
		}
		if err := hashRange(w, fh.f, start, end, &buf); err != nil {
			fh.mu.Lock()
			fh.err = err
			fh.mu.Unlock()
			return
		}
		fh.behind.hashed(end)
		fh.mu.Lock()
		fh.hashed = end
		fh.mu.Unlock()
	}
}

// copyTap passes the bytes the hasher reads (in file order) to its sha256
// and those of the copied ranges also to a CRC-32C of their own: the
// checksum of the bytes a copy put in the file, which a resumed run
// compares with the copy source's bytes before it reuses the file (the
// file's sha256 alone proves the file unchanged, not its source).
type copyTap struct {
	h      hash.Hash
	pos    int64      // the file offset of the next byte written
	ranges [][2]int64 // the copied ranges not yet passed, sorted
	crc    hash.Hash32
}

func (t *copyTap) Write(b []byte) (int, error) {
	t.h.Write(b)
	start, end := t.pos, t.pos+int64(len(b))
	for len(t.ranges) > 0 && t.ranges[0][0] < end {
		r := t.ranges[0]
		if lo, hi := max(r[0], start), min(r[1], end); lo < hi {
			t.crc.Write(b[lo-start : hi-start])
		}
		if r[1] > end {
			break
		}
		t.ranges = t.ranges[1:]
	}
	t.pos = end
	return len(b), nil
}

// copiedSum is the CRC-32C of the copied ranges, once the whole file is hashed.
func (fh *fileHasher) copiedSum() string {
	if fh.tap == nil {
		return ""
	}
	return manifests.TensorSum(fh.tap.crc)
}

// writeBehind streams a large output through the page cache instead of
// filling it: what the hasher has read is sent to disk at once, and what it
// read lag bytes earlier (on disk by then) is let go. A graft writes more than
// the trunk it copies; its own pages piling up would evict the trunk's before
// they are copied. It runs beside the hasher, whose sha256 is a graft's
// critical path: letting pages go costs as much as a tenth of it.
type writeBehind struct {
	f             *os.File
	lag           int64
	end           atomic.Int64  // how far the hash has read
	wake          chan struct{} // end has moved
	stopped       chan struct{}
	sent, dropped int64 // the prefixes sent to disk and let go (read after stop)
}

func newWriteBehind(f *os.File, lag int64) *writeBehind {
	w := &writeBehind{f: f, lag: lag, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go w.run()
	return w
}

func (w *writeBehind) run() {
	defer close(w.stopped)
	for range w.wake {
		end := w.end.Load()
		startWriteback(w.f, w.sent, end-w.sent)
		w.sent = end
		if d := end - w.lag; d > w.dropped {
			dropWritten(w.f, w.dropped, d-w.dropped)
			w.dropped = d
		}
	}
}

// hashed tells it the hash has reached end (it catches up with the latest
// end whenever it is done with the one before).
func (w *writeBehind) hashed(end int64) {
	if w == nil {
		return
	}
	w.end.Store(end)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop ends it; the file may be closed after.
func (w *writeBehind) stop() {
	if w == nil {
		return
	}
	close(w.wake)
	<-w.stopped
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
