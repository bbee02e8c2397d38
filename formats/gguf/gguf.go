// Package gguf reads and writes GGUF v3 files, the format llama.cpp loads:
// a header (magic, version, tensor and key counts), typed key/value
// metadata, tensor infos (name, dimensions innermost first, ggml type,
// offset), then the tensor data, each tensor at a multiple of the
// alignment (general.alignment, 32 by default) from the start of the data.
// Everything is little-endian.
package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Magic and version of the files written.
const (
	Magic            = "GGUF"
	Version          = 3
	DefaultAlignment = 32
)

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by GGUF.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = map[ValueType]string{
	TypeUint8: "u8", TypeInt8: "i8", TypeUint16: "u16", TypeInt16: "i16", TypeUint32: "u32", TypeInt32: "i32",
	TypeFloat32: "f32", TypeBool: "bool", TypeString: "str", TypeArray: "arr", TypeUint64: "u64", TypeInt64: "i64", TypeFloat64: "f64",
}

func (t ValueType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// Value is a typed metadata value. Scalars are held in the Go type of their
// tag (uint32 for TypeUint32, float32 for TypeFloat32, string, bool, ...);
// an array holds its element type and a slice of such values.
type Value struct {
	Type ValueType
	Elem ValueType // arrays only
	V    any       // scalar, or []any for arrays
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Constructors of the value types the writers use.
func U32(v uint32) Value    { return Value{Type: TypeUint32, V: v} }
func I32(v int32) Value     { return Value{Type: TypeInt32, V: v} }
func Float(v float32) Value { return Value{Type: TypeFloat32, V: v} }
func Bool(v bool) Value     { return Value{Type: TypeBool, V: v} }
func Str(v string) Value    { return Value{Type: TypeString, V: v} }
func Arr(elem ValueType, vs []any) Value {
	return Value{Type: TypeArray, Elem: elem, V: vs}
}

// Strings is an array of strings.
func Strings(ss []string) Value {
	vs := make([]any, len(ss))
	for i, s := range ss {
		vs[i] = s
	}
	return Arr(TypeString, vs)
}

// Int32s is an array of int32.
func Int32s(xs []int32) Value {
	vs := make([]any, len(xs))
	for i, x := range xs {
		vs[i] = x
	}
	return Arr(TypeInt32, vs)
}

// Bools is an array of bool.
func Bools(xs []bool) Value {
	vs := make([]any, len(xs))
	for i, x := range xs {
		vs[i] = x
	}
	return Arr(TypeBool, vs)
}

// TensorInfo is one tensor of a GGUF file. Dims are ggml's ne, innermost
// (row length) first: the reverse of a PyTorch shape.
type TensorInfo struct {
	Name   string
	Dims   []int64
	Type   GGMLType
	Offset int64 // from the start of the data section
}

// Elements is the number of values of the tensor.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the stored size of the tensor.
func (t TensorInfo) Bytes() (int64, error) { return t.Type.RowBytes(t.Elements()) }

// File is a parsed GGUF header.
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  int64
	DataOffset int64 // where the data section starts in the file
}

// Lookup finds a metadata value.
func (f *File) Lookup(key string) (Value, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
}

// String returns a string value, or "".
func (f *File) String(key string) string {
	if v, ok := f.Lookup(key); ok {
		if s, ok := v.V.(string); ok {
			return s
		}
	}
	return ""
}

// Uint returns an unsigned or signed integer value as int64.
func (f *File) Uint(key string) (int64, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Int()
}

// Int returns an integer scalar as int64.
func (v Value) Int() (int64, bool) {
	switch x := v.V.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Place lays out tensors of the given sizes in a data section: each at the
// next multiple of align. It returns the offsets and the section's size
// (the last tensor padded to align too, as gguf-py and llama.cpp write).
func Place(sizes []int64, align int64) ([]int64, int64) {
	offs := make([]int64, len(sizes))
	var off int64
	for i, s := range sizes {
		offs[i] = off
		off = pad(off+s, align)
	}
	return offs, off
}

func pad(n, align int64) int64 { return (n + align - 1) / align * align }

// EncodeHeader writes the header of a GGUF file holding kvs and tensors
// (whose offsets must be set), padded to the alignment so the data section
// follows it directly.
func EncodeHeader(kvs []KV, tensors []TensorInfo) ([]byte, error) {
	align := int64(DefaultAlignment)
	seen := map[string]bool{}
	var b bytes.Buffer
	b.WriteString(Magic)
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	le(uint32(Version))
	le(uint64(len(tensors)))
	le(uint64(len(kvs)))
	for _, kv := range kvs {
		if seen[kv.Key] {
			return nil, fmt.Errorf("gguf: key %s twice", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == "general.alignment" {
			n, ok := kv.Value.Int()
			if !ok || n <= 0 || n&(n-1) != 0 {
				return nil, fmt.Errorf("gguf: general.alignment must be a power of two")
			}
			align = n
		}
		writeString(&b, kv.Key)
		le(uint32(kv.Value.Type))
		if err := writeValue(&b, kv.Value); err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", kv.Key, err)
		}
	}
	names := map[string]bool{}
	for _, t := range tensors {
		if names[t.Name] {
			return nil, fmt.Errorf("gguf: tensor %s twice", t.Name)
		}
		names[t.Name] = true
		if t.Offset%align != 0 {
			return nil, fmt.Errorf("gguf: tensor %s: offset %d not aligned to %d", t.Name, t.Offset, align)
		}
		writeString(&b, t.Name)
		le(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			le(uint64(d))
		}
		le(uint32(t.Type))
		le(uint64(t.Offset))
	}
	for int64(b.Len())%align != 0 {
		b.WriteByte(0)
	}
	return b.Bytes(), nil
}

func writeString(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

func writeScalar(b *bytes.Buffer, t ValueType, v any) error {
	le := func(x any) { binary.Write(b, binary.LittleEndian, x) }
	ok := true
	switch t {
	case TypeUint8:
		x, k := v.(uint8)
		le(x)
		ok = k
	case TypeInt8:
		x, k := v.(int8)
		le(x)
		ok = k
	case TypeUint16:
		x, k := v.(uint16)
		le(x)
		ok = k
	case TypeInt16:
		x, k := v.(int16)
		le(x)
		ok = k
	case TypeUint32:
		x, k := v.(uint32)
		le(x)
		ok = k
	case TypeInt32:
		x, k := v.(int32)
		le(x)
		ok = k
	case TypeFloat32:
		x, k := v.(float32)
		le(x)
		ok = k
	case TypeBool:
		x, k := v.(bool)
		le(x)
		ok = k
	case TypeString:
		x, k := v.(string)
		writeString(b, x)
		ok = k
	case TypeUint64:
		x, k := v.(uint64)
		le(x)
		ok = k
	case TypeInt64:
		x, k := v.(int64)
		le(x)
		ok = k
	case TypeFloat64:
		x, k := v.(float64)
		le(x)
		ok = k
	default:
		return fmt.Errorf("value type %d", t)
	}
	if !ok {
		return fmt.Errorf("value %v (%T) is not a %s", v, v, t)
	}
	return nil
}

func writeValue(b *bytes.Buffer, v Value) error {
	if v.Type != TypeArray {
		return writeScalar(b, v.Type, v.V)
	}
	xs, ok := v.V.([]any)
	if !ok || v.Elem == TypeArray {
		return fmt.Errorf("bad array")
	}
	binary.Write(b, binary.LittleEndian, uint32(v.Elem))
	binary.Write(b, binary.LittleEndian, uint64(len(xs)))
	for _, x := range xs {
		if err := writeScalar(b, v.Elem, x); err != nil {
			return err
		}
	}
	return nil
}

// Limits of what Read accepts, against hostile files.
const (
	maxString = 1 << 30
	maxCount  = 1 << 24
	maxDims   = 4
	maxHeader = 1 << 31
)

// Read parses the header of a GGUF file of the given size: metadata and
// tensor infos, every tensor checked to lie inside the file.
func Read(r io.ReaderAt, size int64) (*File, error) {
	rd := &reader{r: r, size: size}
	if string(rd.bytes(4)) != Magic {
		if rd.err != nil {
			return nil, rd.err
		}
		return nil, errors.New("not a GGUF file (bad magic)")
	}
	f := &File{Version: rd.u32(), Alignment: DefaultAlignment}
	if rd.err == nil && (f.Version < 2 || f.Version > 3) {
		return nil, fmt.Errorf("GGUF version %d is not supported", f.Version)
	}
	nt, nkv := rd.u64(), rd.u64()
	if rd.err == nil && (nt > maxCount || nkv > maxCount) {
		return nil, fmt.Errorf("GGUF header claims %d tensors and %d keys", nt, nkv)
	}
	for i := uint64(0); i < nkv && rd.err == nil; i++ {
		k := rd.str()
		v := rd.value(ValueType(rd.u32()), 0)
		f.KV = append(f.KV, KV{k, v})
	}
	if a, ok := f.Uint("general.alignment"); ok {
		if a <= 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		f.Alignment = a
	}
	for i := uint64(0); i < nt && rd.err == nil; i++ {
		t := TensorInfo{Name: rd.str()}
		nd := rd.u32()
		if nd > maxDims {
			return nil, fmt.Errorf("tensor %s: %d dimensions", t.Name, nd)
		}
		for j := uint32(0); j < nd; j++ {
			d := rd.u64()
			if d > 1<<40 {
				return nil, fmt.Errorf("tensor %s: dimension %d", t.Name, d)
			}
			t.Dims = append(t.Dims, int64(d))
		}
		t.Type = GGMLType(rd.u32())
		t.Offset = int64(rd.u64())
		f.Tensors = append(f.Tensors, t)
	}
	if rd.err != nil {
		return nil, rd.err
	}
	f.DataOffset = pad(rd.off, f.Alignment)
	names := map[string]bool{}
	for _, t := range f.Tensors {
		if names[t.Name] {
			return nil, fmt.Errorf("tensor %s twice", t.Name)
		}
		names[t.Name] = true
		n, err := t.Bytes()
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if t.Offset < 0 || t.Offset%f.Alignment != 0 || f.DataOffset+t.Offset+n > size {
			return nil, fmt.Errorf("tensor %s: data [%d, %d) outside the file (%d bytes)", t.Name, t.Offset, t.Offset+n, size-f.DataOffset)
		}
	}
	return f, nil
}

type reader struct {
	r    io.ReaderAt
	size int64
	off  int64
	err  error
}

func (rd *reader) bytes(n int64) []byte {
	if rd.err != nil {
		return nil
	}
	if n < 0 || rd.off+n > rd.size || rd.off+n > maxHeader {
		rd.err = fmt.Errorf("GGUF header runs past the end of the file (at byte %d)", rd.off)
		return nil
	}
	b := make([]byte, n)
	if _, err := rd.r.ReadAt(b, rd.off); err != nil {
		rd.err = err
		return nil
	}
	rd.off += n
	return b
}

func (rd *reader) u32() uint32 {
	b := rd.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (rd *reader) u64() uint64 {
	b := rd.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (rd *reader) str() string {
	n := rd.u64()
	if n > maxString {
		if rd.err == nil {
			rd.err = fmt.Errorf("GGUF string of %d bytes", n)
		}
		return ""
	}
	return string(rd.bytes(int64(n)))
}

func (rd *reader) scalar(t ValueType) any {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		b := rd.bytes(1)
		if b == nil {
			return nil
		}
		switch t {
		case TypeUint8:
			return b[0]
		case TypeInt8:
			return int8(b[0])
		}
		return b[0] != 0
	case TypeUint16, TypeInt16:
		b := rd.bytes(2)
		if b == nil {
			return nil
		}
		x := binary.LittleEndian.Uint16(b)
		if t == TypeInt16 {
			return int16(x)
		}
		return x
	case TypeUint32:
		return rd.u32()
	case TypeInt32:
		return int32(rd.u32())
	case TypeFloat32:
		return math.Float32frombits(rd.u32())
	case TypeUint64:
		return rd.u64()
	case TypeInt64:
		return int64(rd.u64())
	case TypeFloat64:
		return math.Float64frombits(rd.u64())
	case TypeString:
		return rd.str()
	}
	if rd.err == nil {
		rd.err = fmt.Errorf("unknown GGUF value type %d", t)
	}
	return nil
}

func (rd *reader) value(t ValueType, depth int) Value {
	if t != TypeArray {
		return Value{Type: t, V: rd.scalar(t)}
	}
	elem := ValueType(rd.u32())
	n := rd.u64()
	if rd.err != nil {
		return Value{}
	}
	if n > maxCount*4 || depth > 0 || elem == TypeArray {
		rd.err = fmt.Errorf("GGUF array of %d elements (type %d)", n, elem)
		return Value{}
	}
	xs := make([]any, 0, min(n, 1<<16))
	for i := uint64(0); i < n && rd.err == nil; i++ {
		xs = append(xs, rd.scalar(elem))
	}
	return Value{Type: TypeArray, Elem: elem, V: xs}
}

// SortedKeys lists the metadata keys in name order.
func (f *File) SortedKeys() []string {
	out := make([]string, len(f.KV))
	for i, kv := range f.KV {
		out[i] = kv.Key
	}
	sort.Strings(out)
	return out
}

// Pair is a metadata entry.
func Pair(key string, v Value) KV { return KV{Key: key, Value: v} }
