package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// raw builds GGUF headers byte by byte, hostile ones included.
type raw struct{ bytes.Buffer }

func header(tensors, keys uint64) *raw {
	r := &raw{}
	r.WriteString(Magic)
	return r.u32(Version).u64(tensors).u64(keys)
}

func (r *raw) u32(x uint32) *raw { binary.Write(r, binary.LittleEndian, x); return r }
func (r *raw) u64(x uint64) *raw { binary.Write(r, binary.LittleEndian, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }

// kv starts a metadata entry of type t (its value follows).
func (r *raw) kv(key string, t ValueType) *raw { return r.str(key).u32(uint32(t)) }

// tensor writes a tensor info.
func (r *raw) tensor(name string, typ GGMLType, offset uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(offset)
}

// padded is the header padded to the default alignment, then data bytes of zeros.
func (r *raw) padded(data int) []byte {
	b := r.Bytes()
	b = append(b, make([]byte, (DefaultAlignment-len(b)%DefaultAlignment)%DefaultAlignment+data)...)
	return b
}

// allocated is the number of bytes fn allocates.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// sparseFile writes head at the start of a file of size bytes (a hole after it).
func sparseFile(t *testing.T, head []byte, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(p, head, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadAllRoundTrips: every value type, scalar and array, reads back as
// written, arrays as typed slices.
func TestReadAllRoundTrips(t *testing.T) {
	kvs := []KV{
		Pair("u8", Value{Type: TypeUint8, V: uint8(200)}), Pair("i8", Value{Type: TypeInt8, V: int8(-3)}),
		Pair("u16", Value{Type: TypeUint16, V: uint16(60000)}), Pair("i16", Value{Type: TypeInt16, V: int16(-300)}),
		Pair("u32", U32(1<<31)), Pair("i32", I32(-1)), Pair("f32", Float(-0.5)), Pair("bool", Bool(true)),
		Pair("str", Str("é")), Pair("u64", Value{Type: TypeUint64, V: uint64(1 << 63)}),
		Pair("i64", Value{Type: TypeInt64, V: int64(-1 << 62)}), Pair("f64", Value{Type: TypeFloat64, V: math.Pi}),
		Pair("a.u8", Value{Type: TypeArray, Elem: TypeUint8, V: []uint8{1, 255}}),
		Pair("a.i16", Value{Type: TypeArray, Elem: TypeInt16, V: []int16{-1, 7}}),
		Pair("a.f32", Value{Type: TypeArray, Elem: TypeFloat32, V: []float32{1.5, -2}}),
		Pair("a.u64", Value{Type: TypeArray, Elem: TypeUint64, V: []uint64{math.MaxUint64}}),
		Pair("a.f64", Value{Type: TypeArray, Elem: TypeFloat64, V: []float64{}}),
		Pair("a.bool", Bools([]bool{true, false, true})), Pair("a.i32", Int32s([]int32{-5, 6})),
		Pair("a.str", Strings([]string{"", "b", strings.Repeat("c", readChunk+5)})),
	}
	hdr, err := EncodeHeader(kvs, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(hdr), int64(len(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.KV) != len(kvs) {
		t.Fatalf("%d keys, want %d", len(f.KV), len(kvs))
	}
	for i, kv := range kvs {
		got := f.KV[i]
		if got.Key != kv.Key || got.Value.Type != kv.Value.Type || got.Value.Elem != kv.Value.Elem ||
			reflect.TypeOf(got.Value.V) != reflect.TypeOf(kv.Value.V) || !bytes.Equal(encoded(t, got.Value), encoded(t, kv.Value)) {
			t.Errorf("%s: read %#v, wrote %#v", kv.Key, got.Value, kv.Value)
		}
	}
	if n := f.KV[len(kvs)-1].Value.Len(); n != 3 {
		t.Errorf("Len of a 3-string array is %d", n)
	}
	if _, err := EncodeHeader([]KV{Pair("x", Value{Type: TypeArray, Elem: TypeInt32, V: []int64{1}})}, nil); err == nil {
		t.Error("an array of int64 was written as an array of i32")
	}
}

// encoded is a value's bytes in a file.
func encoded(t *testing.T, v Value) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeValue(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadBoundedByHeaderBytes: reading a large array costs a bounded
// number of allocations and about its own bytes of memory (it was one
// ReadAt and one boxed value per element: a 64 MiB file took 33 s and 4 GiB).
func TestReadBoundedByHeaderBytes(t *testing.T) {
	const n = 1 << 20
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i) * 2654435761
	}
	toks := make([]string, 1<<16)
	for i := range toks {
		toks[i] = "tok"
	}
	hdr, err := EncodeHeader([]KV{
		Pair("big", Value{Type: TypeArray, Elem: TypeUint32, V: vals}),
		Pair("tokenizer.ggml.tokens", Strings(toks)),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var f *File
	bytesUsed := allocated(func() { f, err = Read(bytes.NewReader(hdr), int64(len(hdr))) })
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.KV[0].Value.V.([]uint32); !ok || len(got) != n || got[n-1] != vals[n-1] {
		t.Fatalf("the u32 array read back as %T", f.KV[0].Value.V)
	}
	// The slices themselves (4 MiB of u32, 1 MiB of string headers and the
	// strings) plus the read buffers; no per-element boxing.
	if limit := uint64(2*len(hdr) + 1<<20); bytesUsed > limit {
		t.Errorf("reading a %d-byte header allocated %d bytes, want at most %d", len(hdr), bytesUsed, limit)
	}
	only, err := EncodeHeader([]KV{Pair("big", Value{Type: TypeArray, Elem: TypeUint32, V: vals})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := Read(bytes.NewReader(only), int64(len(only))); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 200 {
		t.Errorf("reading an array of %d u32 made %.0f allocations", n, allocs)
	}
}

// TestReadRefusesBeforeAllocating: counts that the bytes left in the file
// (or the header limit) cannot hold are refused before anything is
// allocated for them, naming the key.
func TestReadRefusesBeforeAllocating(t *testing.T) {
	cases := []struct {
		name string
		file func(t *testing.T) (*os.File, int64)
		want string
	}{
		{"u32 array past the end", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(0, 1).kv("big", TypeArray).u32(uint32(TypeUint32)).u64(1<<26-1).padded(64), 200))
		}, "key big: array of u32 of 67108863 values (at least 4 bytes each) runs past the end of the file"},
		{"strings past the end", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(0, 1).kv("tokenizer.ggml.tokens", TypeArray).u32(uint32(TypeString)).u64(1<<40).padded(0), 4096))
		}, "key tokenizer.ggml.tokens: array of strings of 1099511627776 values"},
		{"string past the end", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(0, 1).kv("general.name", TypeString).u64(1<<30).padded(0), 4096))
		}, "key general.name: string of 1073741824 bytes runs past the end of the file"},
		// A sparse file of 1 GiB whose header claims 8M+1 empty strings:
		// 64 MiB and 8 bytes of lengths, over the header limit.
		{"header over the limit", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(0, 1).kv("tokenizer.ggml.merges", TypeArray).u32(uint32(TypeString)).u64(MaxHeaderSize/8+1).padded(0), 1<<30))
		}, "key tokenizer.ggml.merges: array of strings of 8388609 values (at least 8 bytes each) takes the GGUF header past 64 MiB"},
		{"keys and tensors past the end", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(maxTensors, maxKeys).padded(0), 4096))
		}, "65536 metadata keys and 262144 tensor infos"},
		{"too many keys", func(t *testing.T) (*os.File, int64) {
			return open(t, sparseFile(t, header(0, maxKeys+1).padded(0), 1<<30))
		}, "claims 0 tensors and 65537 metadata keys"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, size := c.file(t)
			var err error
			if used := allocated(func() { _, err = Read(f, size) }); used > 512<<10 {
				t.Errorf("allocated %d bytes before refusing", used)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func open(t *testing.T, path string) (*os.File, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fi, _ := f.Stat()
	return f, fi.Size()
}

// cancelAfter cancels its context at its first read and counts the bytes
// read after that.
type cancelAfter struct {
	r      *bytes.Reader
	cancel context.CancelFunc
	reads  int
	bytes  int
}

func (c *cancelAfter) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	if c.reads == 1 {
		c.cancel()
	}
	n, err := c.r.ReadAt(p, off)
	c.bytes += n
	return n, err
}

// TestReadStopsWhenCancelled: a cancelled context stops the parse within a
// chunk (SIGINT was ignored while a header was parsed).
func TestReadStopsWhenCancelled(t *testing.T) {
	big := make([]uint8, 8<<20)
	hdr, err := EncodeHeader([]KV{Pair("big", Value{Type: TypeArray, Elem: TypeUint8, V: big})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &cancelAfter{r: bytes.NewReader(hdr), cancel: cancel}
	_, err = ReadContext(ctx, r, int64(len(hdr)))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "key big") {
		t.Fatalf("error %v, want the cancellation while reading key big", err)
	}
	if r.bytes > 2*readChunk {
		t.Errorf("read %d bytes of %d after the cancellation", r.bytes, len(hdr))
	}
	if _, err := ReadContext(ctx, r, int64(len(hdr))); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled context: %v", err)
	}
}

// TestReadRefusesHostileHeaders: what llama.cpp refuses, and bounds checks
// that overflowed (a tensor at 2^62 of 2^62 bytes "fitted" a small file,
// dimensions of 2^40 each wrapped to 0 values).
func TestReadRefusesHostileHeaders(t *testing.T) {
	const e40, e62 = 1 << 40, 1 << 62
	kv1 := func() *raw { return header(0, 1) }
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"offset and size of 2^62", header(1, 0).tensor("w", F32, e62, e40, 1<<20).padded(256), "tensor w: data at offset 4611686018427387904; llama.cpp requires the tensors in order, this one at 0"},
		{"2^62 bytes at 0", header(1, 0).tensor("w", F32, 0, e40, 1<<20).padded(256), "tensor w: data [0, +4611686018427387904 bytes) outside the file"},
		{"dims wrap to 0", header(1, 0).tensor("w", F32, 0, e40, e40, e40, e40).padded(256), "tensor w: shape [1099511627776 1099511627776 1099511627776 1099511627776]: the number of values overflows"},
		{"bytes overflow", header(1, 0).tensor("w", F32, 0, 1<<31, 1<<31).padded(256), "tensor w: 4611686018427387904 values of F32: the byte count overflows"},
		{"negative dimension", header(1, 0).tensor("w", F32, 0, 1<<63).padded(256), "tensor w: dimension 0 is 9223372036854775808"},
		{"five dimensions", header(1, 0).tensor("w", F32, 0, 1, 1, 1, 1, 1).padded(256), "tensor w: 5 dimensions"},
		{"row not whole blocks", header(1, 0).tensor("w", Q8_0, 0, 16, 4).padded(256), "tensor w: rows of 16 values are not whole Q8_0 blocks of 32"},
		{"gap between tensors", header(2, 0).tensor("a", F32, 0, 8).tensor("b", F32, 64, 8).padded(256), "tensor b: data at offset 64; llama.cpp requires the tensors in order, this one at 32"},
		{"tensor twice", header(2, 0).tensor("a", F32, 0, 8).tensor("a", F32, 32, 8).padded(256), "tensor a twice"},
		{"long tensor name", header(1, 0).tensor(strings.Repeat("n", 64), F32, 0, 8).padded(256), "is 64 bytes; llama.cpp takes at most 63"},
		{"duplicate key", header(0, 2).kv("general.name", TypeString).str("a").kv("general.name", TypeString).str("b").padded(0), "key general.name twice"},
		{"empty key", kv1().kv("", TypeUint8).padded(1), "metadata key 0: empty key"},
		{"alignment u64", kv1().kv("general.alignment", TypeUint64).u64(32).padded(0), "general.alignment is a u64; GGUF requires a u32"},
		{"alignment i32", kv1().kv("general.alignment", TypeInt32).u32(32).padded(0), "general.alignment is a i32; GGUF requires a u32"},
		{"alignment 0", kv1().kv("general.alignment", TypeUint32).u32(0).padded(0), "general.alignment 0 is not a power of two"},
		{"alignment 48", kv1().kv("general.alignment", TypeUint32).u32(48).padded(0), "general.alignment 48 is not a power of two"},
		{"array of arrays", kv1().kv("a", TypeArray).u32(uint32(TypeArray)).u64(0).padded(0), "key a: an array of arrays"},
		{"unknown value type", kv1().kv("a", 13).u64(0).padded(0), "key a: unknown GGUF value type 13"},
		{"unknown array type", kv1().kv("a", TypeArray).u32(99).u64(1).padded(8), "key a: unknown GGUF value type 99"},
		{"version 1", func() []byte { b := header(0, 0).padded(0); b[4] = 1; return b }(), "GGUF version 1 is not supported"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), "not a GGUF file (bad magic)"},
		{"short", []byte("GG"), "not a GGUF file (bad magic)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(c.file), int64(len(c.file)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// The same shapes, well formed, are read.
	for _, b := range [][]byte{
		header(2, 1).kv("general.alignment", TypeUint32).u32(64).tensor("a", Q8_0, 0, 32, 2).tensor("b", F32, 128, 8).padded(0),
		header(2, 0).tensor("a", F32, 0, 8).tensor("b", F32, 32, 0, 3).padded(32),
	} {
		if _, err := Read(bytes.NewReader(append(b, make([]byte, 256)...)), int64(len(b)+256)); err != nil {
			t.Errorf("well-formed header refused: %v", err)
		}
	}
}

// FuzzRead: no input panics or reads past what it holds, and a header Read
// accepts is one EncodeHeader writes again and Read reads back the same.
func FuzzRead(f *testing.F) {
	sizes := []int64{4 * 8, 34 * 2}
	offs, total := Place(sizes, DefaultAlignment)
	seed, err := EncodeHeader([]KV{
		Pair("general.architecture", Str("qwen35moe")), Pair("qwen35moe.block_count", U32(2)),
		Pair("qwen35moe.rope.dimension_sections", Int32s([]int32{3, 3, 2, 0})),
		Pair("tokenizer.ggml.tokens", Strings([]string{"a", "", "<|im_end|>"})),
		Pair("tokenizer.ggml.scores", Value{Type: TypeArray, Elem: TypeFloat32, V: []float32{0, -1, 2}}),
		Pair("x.bools", Bools([]bool{true})), Pair("x.f64", Value{Type: TypeFloat64, V: 1.5}),
	}, []TensorInfo{
		{Name: "output_norm.weight", Dims: []int64{8}, Type: F32, Offset: offs[0]},
		{Name: "blk.0.attn_k.weight", Dims: []int64{32, 2}, Type: Q8_0, Offset: offs[1]},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append(seed, make([]byte, total)...))
	f.Add(header(2, 1).kv("general.alignment", TypeUint32).u32(64).tensor("a", Q8_0, 0, 32, 2).tensor("b", F32, 128, 8).padded(256))
	f.Add(header(1, 0).tensor("w", F32, 0, 1<<40, 1<<40, 1<<40, 1<<40).padded(256))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if g.DataOffset%g.Alignment != 0 {
			t.Fatalf("data section at %d, alignment %d", g.DataOffset, g.Alignment)
		}
		for _, ti := range g.Tensors {
			if n, err := ti.Bytes(); err != nil || g.DataOffset+ti.Offset+n > int64(len(b)) {
				t.Fatalf("accepted tensor %+v of %d bytes (%v) in %d bytes", ti, n, err, len(b))
			}
		}
		hdr, err := EncodeHeader(g.KV, g.Tensors)
		if err != nil {
			t.Fatalf("an accepted header does not encode: %v", err)
		}
		again := append(hdr, make([]byte, max(0, int64(len(b))-g.DataOffset))...)
		g2, err := Read(bytes.NewReader(again), int64(len(again)))
		if err != nil {
			t.Fatalf("an accepted header, encoded again, is refused: %v", err)
		}
		if hdr2, err := EncodeHeader(g2.KV, g2.Tensors); err != nil || !bytes.Equal(hdr, hdr2) {
			t.Fatalf("an accepted header reads back differently (%v)", err)
		}
	})
}
