package gguf

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
)

// Limits of what Read accepts. Real files stay far below them (a 256k-token
// vocabulary with its merges is about 10 MiB of metadata, a model about a
// thousand tensors); with them, and every count checked against the bytes
// that are left before anything is allocated for it, a hostile file costs
// at most a few times its header bytes of memory, and time in proportion.
const (
	// MaxHeaderSize bounds the metadata and tensor infos, in bytes.
	MaxHeaderSize = 64 << 20
	maxKeys       = 1 << 16
	maxTensors    = 1 << 18
	maxDims       = 4  // GGML_MAX_DIMS
	maxNameLen    = 63 // GGML_MAX_NAME less its terminating zero
	maxAlignment  = 1 << 20
	// The fewest bytes a metadata entry (key length, a 1-byte key, type,
	// a 1-byte value) and a tensor info (name length, dimension count, type,
	// offset) take.
	minKVBytes     = 8 + 1 + 4 + 1
	minTensorBytes = 8 + 4 + 4 + 8
	// readChunk is the buffer of the sequential reads, and how often a
	// cancelled context is noticed.
	readChunk = 64 << 10
)

// Read parses the header of a GGUF file of the given size; see ReadContext.
func Read(r io.ReaderAt, size int64) (*File, error) {
	return ReadContext(context.Background(), r, size)
}

// ReadContext parses the header of a GGUF file of the given size: metadata
// and tensor infos, checked as llama.cpp checks them (no empty or duplicate
// key, general.alignment a u32 power of two, no duplicate tensor, at most 4
// dimensions, rows of whole blocks, counts that fit an int64, the tensors in
// order, each at the next aligned offset) and every tensor inside the file.
// It reads the header once, in order, through a buffer, and stops with
// ctx's error soon after ctx is done. A refusal names the key or tensor.
func ReadContext(ctx context.Context, r io.ReaderAt, size int64) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("a file of %d bytes", size)
	}
	rd := &reader{
		br:   bufio.NewReaderSize(ctxReader{ctx, io.NewSectionReader(r, 0, min(size, MaxHeaderSize))}, readChunk),
		size: size,
		buf:  make([]byte, readChunk),
	}
	f := rd.header()
	if rd.err == nil {
		rd.layout(ctx, f)
	}
	if rd.err != nil {
		return nil, rd.err
	}
	return f, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// reader reads a header in order; the first error sticks, prefixed with
// what was being read.
type reader struct {
	br   *bufio.Reader
	off  int64 // bytes read
	size int64 // of the file
	at   string
	buf  []byte
	err  error
}

func (rd *reader) fail(format string, a ...any) {
	if rd.err == nil {
		rd.wrap(fmt.Errorf(format, a...))
	}
}

func (rd *reader) wrap(err error) {
	if rd.err == nil {
		if rd.at != "" {
			err = fmt.Errorf("%s: %w", rd.at, err)
		}
		rd.err = err
	}
}

// room checks, before anything is read or allocated for them, that n
// values of at least each bytes can follow in the file and in the header.
func (rd *reader) room(n, each uint64, what string) bool {
	if rd.err != nil {
		return false
	}
	leftFile, leftHeader := uint64(rd.size-rd.off), uint64(MaxHeaderSize-rd.off)
	if n <= leftFile/each && n <= leftHeader/each {
		return true
	}
	if each > 1 {
		what = fmt.Sprintf("%s of %d values (at least %d bytes each)", what, n, each)
	} else {
		what = fmt.Sprintf("%s of %d bytes", what, n)
	}
	if n > leftFile/each {
		rd.fail("%s runs past the end of the file (%d bytes left after byte %d)", what, leftFile, rd.off)
	} else {
		rd.fail("%s takes the GGUF header past %d MiB, more than this tool reads", what, MaxHeaderSize>>20)
	}
	return false
}

// fill reads len(b) bytes, in chunks so that a cancellation is seen.
func (rd *reader) fill(b []byte) bool {
	if !rd.room(uint64(len(b)), 1, "the header") {
		return false
	}
	for len(b) > 0 {
		k := min(len(b), readChunk)
		if _, err := io.ReadFull(rd.br, b[:k]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("the file ended at byte %d while its header was read (it changed?)", rd.off)
			}
			rd.wrap(err)
			return false
		}
		rd.off += int64(k)
		b = b[k:]
	}
	return true
}

func (rd *reader) u32() uint32 {
	if !rd.fill(rd.buf[:4]) {
		return 0
	}
	return binary.LittleEndian.Uint32(rd.buf)
}

func (rd *reader) u64() uint64 {
	if !rd.fill(rd.buf[:8]) {
		return 0
	}
	return binary.LittleEndian.Uint64(rd.buf)
}

func (rd *reader) str() string {
	n := rd.u64()
	if !rd.room(n, 1, "string") {
		return ""
	}
	var s strings.Builder
	s.Grow(int(n))
	for left := int(n); left > 0; {
		b := rd.buf[:min(left, readChunk)]
		if !rd.fill(b) {
			return ""
		}
		s.Write(b)
		left -= len(b)
	}
	return s.String()
}

// array reads n values of type t into a typed slice ([]uint32, []string, ...).
func (rd *reader) array(t ValueType, n uint64) any {
	if rd.err != nil {
		return nil
	}
	if t == TypeString {
		if !rd.room(n, 8, "array of strings") {
			return nil
		}
		xs := make([]string, n)
		for i := range xs {
			if xs[i] = rd.str(); rd.err != nil {
				return nil
			}
		}
		return xs
	}
	gt := goTypes[t]
	if gt == nil {
		rd.fail("unknown GGUF value type %d", uint32(t))
		return nil
	}
	w := uint64(gt.Size())
	if !rd.room(n, w, "array of "+t.String()) {
		return nil
	}
	xs := reflect.MakeSlice(reflect.SliceOf(gt), int(n), int(n))
	per := uint64(len(rd.buf)) / w
	for i := uint64(0); i < n; i += per {
		j := min(i+per, n)
		b := rd.buf[:(j-i)*w]
		if !rd.fill(b) {
			return nil
		}
		if _, err := binary.Decode(b, binary.LittleEndian, xs.Slice(int(i), int(j)).Interface()); err != nil {
			rd.wrap(err)
			return nil
		}
	}
	return xs.Interface()
}

func (rd *reader) value(t ValueType) Value {
	switch {
	case t == TypeString:
		return Value{Type: t, V: rd.str()}
	case t != TypeArray:
		x := rd.array(t, 1)
		if rd.err != nil {
			return Value{}
		}
		return Value{Type: t, V: reflect.ValueOf(x).Index(0).Interface()}
	}
	elem, n := ValueType(rd.u32()), rd.u64()
	if rd.err == nil && elem == TypeArray {
		rd.fail("an array of arrays")
	}
	return Value{Type: TypeArray, Elem: elem, V: rd.array(elem, n)}
}

// header reads the metadata and the tensor infos.
func (rd *reader) header() *File {
	var magic [4]byte
	if !rd.fill(magic[:]) && (errors.Is(rd.err, context.Canceled) || errors.Is(rd.err, context.DeadlineExceeded)) {
		return nil
	}
	if string(magic[:]) != Magic { // a file too short to hold one included
		rd.err = errors.New("not a GGUF file (bad magic)")
		return nil
	}
	f := &File{Version: rd.u32(), Alignment: DefaultAlignment}
	if rd.err == nil && (f.Version < 2 || f.Version > 3) {
		rd.fail("GGUF version %d is not supported", f.Version)
	}
	nt, nkv := rd.u64(), rd.u64()
	if rd.err == nil && (nt > maxTensors || nkv > maxKeys) {
		rd.fail("GGUF header claims %d tensors and %d metadata keys; this tool reads at most %d and %d", nt, nkv, maxTensors, maxKeys)
	}
	if !rd.room(nkv*minKVBytes+nt*minTensorBytes, 1, fmt.Sprintf("%d metadata keys and %d tensor infos", nkv, nt)) {
		return nil
	}
	f.KV = make([]KV, 0, nkv)
	keys := make(map[string]bool, nkv)
	for i := range nkv {
		rd.at = fmt.Sprintf("metadata key %d", i)
		k := rd.str()
		switch {
		case rd.err != nil:
		case k == "":
			rd.fail("empty key")
		case keys[k]:
			rd.at = ""
			rd.fail("key %s twice (llama.cpp refuses a duplicate key)", k)
		}
		if rd.err != nil {
			return nil
		}
		keys[k] = true
		rd.at = "key " + k
		f.KV = append(f.KV, KV{k, rd.value(ValueType(rd.u32()))})
	}
	rd.at = ""
	if v, ok := f.Lookup("general.alignment"); ok {
		a, isU32 := v.V.(uint32)
		switch {
		case v.Type != TypeUint32 || !isU32:
			rd.fail("general.alignment is a %s; GGUF requires a u32", v.Type)
		case a == 0 || a&(a-1) != 0 || a > maxAlignment:
			rd.fail("general.alignment %d is not a power of two up to %d", a, maxAlignment)
		}
		if rd.err != nil {
			return nil
		}
		f.Alignment = int64(a)
	}
	f.Tensors = make([]TensorInfo, 0, nt)
	names := make(map[string]bool, nt)
	for i := range nt {
		rd.at = fmt.Sprintf("tensor %d", i)
		t := TensorInfo{Name: rd.str()}
		switch {
		case rd.err != nil:
		case len(t.Name) > maxNameLen:
			rd.fail("name %.80q... is %d bytes; llama.cpp takes at most %d", t.Name, len(t.Name), maxNameLen)
		case names[t.Name]:
			rd.at = ""
			rd.fail("tensor %s twice", t.Name)
		}
		if rd.err != nil {
			return nil
		}
		names[t.Name] = true
		rd.at = "tensor " + t.Name
		nd := rd.u32()
		if rd.err == nil && nd > maxDims {
			rd.fail("%d dimensions, more than %d", nd, maxDims)
		}
		if rd.err != nil {
			return nil
		}
		t.Dims = make([]int64, nd)
		for j := range t.Dims {
			d := rd.u64()
			if d > math.MaxInt64 {
				rd.fail("dimension %d is %d", j, d)
			}
			t.Dims[j] = int64(d)
		}
		t.Type = GGMLType(rd.u32())
		off := rd.u64()
		if off > math.MaxInt64 {
			rd.fail("data offset %d", off)
		}
		t.Offset = int64(off)
		f.Tensors = append(f.Tensors, t)
	}
	rd.at = ""
	f.DataOffset = pad(rd.off, f.Alignment)
	return f
}

// layout checks that the tensors follow each other in the data section,
// each at the next multiple of the alignment (as llama.cpp requires), and
// that each lies inside the file. Every sum is checked for overflow.
func (rd *reader) layout(ctx context.Context, f *File) {
	var next int64 // where the next tensor must start
	for i, t := range f.Tensors {
		if i%4096 == 0 && ctx.Err() != nil {
			rd.wrap(ctx.Err())
			return
		}
		rd.at = "tensor " + t.Name
		n, err := t.Bytes()
		if err != nil {
			rd.wrap(err)
			return
		}
		if t.Offset != next {
			rd.fail("data at offset %d; llama.cpp requires the tensors in order, this one at %d", t.Offset, next)
			return
		}
		if room := rd.size - f.DataOffset - t.Offset; n > room {
			rd.fail("data [%d, +%d bytes) outside the file (%d bytes of data)", t.Offset, n, rd.size-f.DataOffset)
			return
		}
		// t.Offset+n is at most the file's size; its padding may not overflow.
		if t.Offset+n > math.MaxInt64-f.Alignment {
			rd.fail("data ends at %d, too close to the largest offset", t.Offset+n)
			return
		}
		next = pad(t.Offset+n, f.Alignment)
	}
	rd.at = ""
}
