package run

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
)

// A source file copied into the output (a tokenizer) is streamed: its
// bytes and hash arrive whole, and it is never held in memory whole.
func TestCopySourceFileStreams(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	data := make([]byte, 48<<20+5)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(src, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := copySourceFile(source.Dir(src), "tokenizer.json", out, "tokenizer.json")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if f.Size != int64(len(data)) || f.SHA256 != hex.EncodeToString(want[:]) {
		t.Errorf("record %+v, want %d bytes, sha256 %x", f, len(data), want)
	}
	if got, err := os.ReadFile(filepath.Join(out, "tokenizer.json")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("copy differs (%v)", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("copying a %d-byte file allocated %d bytes", len(data), n)
	}
}
