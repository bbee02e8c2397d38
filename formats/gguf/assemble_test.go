package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Copied tensors consecutive in the source and the output are one range,
// padding included; the rest keep their bytes at their new offsets.
func TestAssembleCopiesRuns(t *testing.T) {
	dir := t.TempDir()
	vals := map[string][]byte{"a": bytes.Repeat([]byte{1}, 40), "b": bytes.Repeat([]byte{2}, 8), "c": bytes.Repeat([]byte{3}, 64)}
	src := []TensorInfo{{Name: "a", Dims: []int64{10}, Type: F32}, {Name: "b", Dims: []int64{2}, Type: F32}, {Name: "c", Dims: []int64{16}, Type: F32}}
	offs, total := Place([]int64{40, 8, 64}, DefaultAlignment)
	for i := range src {
		src[i].Offset = offs[i]
	}
	kvs := []KV{Pair("general.architecture", Str("x"))}
	hdr, err := EncodeHeader(kvs, src)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, int64(len(hdr))+total)
	copy(raw, hdr)
	for i, ti := range src {
		copy(raw[int64(len(hdr))+offs[i]:], vals[ti.Name])
	}
	srcPath := filepath.Join(dir, "src.gguf")
	os.WriteFile(srcPath, raw, 0o644)
	f, _, err := Open(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	parts := []Part{{Info: TensorInfo{Name: "new", Dims: []int64{3}, Type: F32}}}
	for _, ti := range f.Tensors[:2] {
		parts = append(parts, Part{Info: ti, Copied: true, From: ti.Offset})
	}
	parts = append(parts, Part{Info: TensorInfo{Name: "new2", Dims: []int64{1}, Type: F32}}, Part{Info: f.Tensors[2], Copied: true, From: f.Tensors[2].Offset})
	kvs = append(kvs, Pair("x.extra", U32(7)))
	a, err := Assemble(kvs, parts, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Copies) != 2 || a.Copies[0].Len != 64+8 {
		t.Fatalf("copies %+v: want a and b as one range, c alone", a.Copies)
	}
	s, _ := os.Open(srcPath)
	defer s.Close()
	// new and new2 stay zero: WriteAssembly is for all-copied files, so copy by hand here.
	out := filepath.Join(dir, "out.gguf")
	o, _ := os.Create(out)
	o.WriteAt(a.Header, 0)
	o.Truncate(a.Size)
	for _, c := range a.Copies {
		if err := CopyRange(o, s, c); err != nil {
			t.Fatal(err)
		}
	}
	o.Close()
	g, size, err := Open(out)
	if err != nil || size != a.Size {
		t.Fatalf("%v, size %d want %d", err, size, a.Size)
	}
	got, _ := os.ReadFile(out)
	for _, ti := range g.Tensors {
		n, _ := ti.Bytes()
		b := got[g.DataOffset+ti.Offset : g.DataOffset+ti.Offset+n]
		want := vals[ti.Name]
		if want == nil {
			want = make([]byte, n)
		}
		if !bytes.Equal(b, want) {
			t.Errorf("%s: %v", ti.Name, b)
		}
	}
	if v, ok := g.Uint("x.extra"); !ok || v != 7 {
		t.Error("metadata lost")
	}
}

// A range that runs past the end of the source is an error naming it.
func TestCopyRangeShortSource(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s")
	os.WriteFile(p, make([]byte, 100), 0o644)
	s, _ := os.Open(p)
	defer s.Close()
	o, _ := os.Create(filepath.Join(dir, "o"))
	defer o.Close()
	if err := CopyRange(o, s, Copy{Src: 50, Dst: 0, Len: 100}); err == nil {
		t.Error("no error for a short source")
	}
}
