//go:build linux

package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Reading a tensor that was not in the page cache gives its pages back;
// a tensor that was cached stays cached. (The folder sits in the module, on
// a real filesystem: tmpfs pages cannot be dropped.)
func TestStreamUncachedLeavesTheCacheAsFound(t *testing.T) {
	dir, err := os.MkdirTemp(".", ".pagecache-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const size = 16 << 20
	entries := []Entry{{"cold", U8, []int64{size}}, {"warm", U8, []int64{size}}}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte{1}, size))
	w.Write(bytes.Repeat([]byte{2}, size))
	w.Close()
	path := filepath.Join(dir, "model.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(buf.Bytes())
	f.Sync() // clean pages can be dropped
	dropCached(f, 0, int64(buf.Len()))
	f.Close()

	ck, err := Open(folder(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cold, warm := ck.Tensors["cold"], ck.Tensors["warm"]
	file, _ := localFile(cold.Shard.file)
	frac := func(tn *Tensor) float64 {
		v, ok := cachedFraction(file, tn.Begin, tn.Bytes())
		if !ok {
			t.Fatal("mincore failed")
		}
		return v
	}
	if c := frac(cold); c > 0.1 {
		t.Fatalf("precondition: %.2f of the cold tensor is cached after dropping it", c)
	}
	if _, err := ck.ReadTensor(warm, nil); err != nil { // now cached
		t.Fatal(err)
	}
	if n := ck.StreamUncached([]string{"cold", "warm", "absent"}); n != 1 || !cold.dropAfterRead || warm.dropAfterRead {
		t.Fatalf("marked %d: cold %v warm %v", n, cold.dropAfterRead, warm.dropAfterRead)
	}
	var data []byte
	for off := int64(0); off < size; off += 4 << 20 {
		if data, err = ck.ReadRange(cold, off, 4<<20, data); err != nil || data[0] != 1 {
			t.Fatalf("read: %v", err)
		}
	}
	if _, err := ck.ReadTensor(warm, nil); err != nil {
		t.Fatal(err)
	}
	if c := frac(cold); c > 0.1 {
		t.Errorf("%.2f of the cold tensor is still cached after reading it", c)
	}
	if c := frac(warm); c < 0.9 {
		t.Errorf("only %.2f of the warm tensor is still cached", c)
	}
}
