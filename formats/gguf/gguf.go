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
	"fmt"
	"math"
	"reflect"
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

// goTypes is the Go type that holds a value of each scalar type.
var goTypes = map[ValueType]reflect.Type{
	TypeUint8: reflect.TypeFor[uint8](), TypeInt8: reflect.TypeFor[int8](), TypeUint16: reflect.TypeFor[uint16](),
	TypeInt16: reflect.TypeFor[int16](), TypeUint32: reflect.TypeFor[uint32](), TypeInt32: reflect.TypeFor[int32](),
	TypeFloat32: reflect.TypeFor[float32](), TypeBool: reflect.TypeFor[bool](), TypeString: reflect.TypeFor[string](),
	TypeUint64: reflect.TypeFor[uint64](), TypeInt64: reflect.TypeFor[int64](), TypeFloat64: reflect.TypeFor[float64](),
}

// Value is a typed metadata value. A scalar is held in the Go type of its
// tag (uint32 for TypeUint32, float32 for TypeFloat32, string, bool, ...);
// an array holds its element type and a typed slice of such values
// ([]string for an array of TypeString, []int32 for TypeInt32, ...).
type Value struct {
	Type ValueType
	Elem ValueType // arrays only
	V    any       // scalar, or a typed slice for arrays
}

// Len is the number of elements of an array value, 0 for anything else.
func (v Value) Len() int {
	if x := reflect.ValueOf(v.V); v.Type == TypeArray && x.Kind() == reflect.Slice {
		return x.Len()
	}
	return 0
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

// Strings is an array of strings.
func Strings(ss []string) Value { return Value{Type: TypeArray, Elem: TypeString, V: ss} }

// Int32s is an array of int32.
func Int32s(xs []int32) Value { return Value{Type: TypeArray, Elem: TypeInt32, V: xs} }

// Float32s is an array of float32.
func Float32s(xs []float32) Value { return Value{Type: TypeArray, Elem: TypeFloat32, V: xs} }

// Bools is an array of bool.
func Bools(xs []bool) Value { return Value{Type: TypeArray, Elem: TypeBool, V: xs} }

// TensorInfo is one tensor of a GGUF file. Dims are ggml's ne, innermost
// (row length) first: the reverse of a PyTorch shape.
type TensorInfo struct {
	Name   string
	Dims   []int64
	Type   GGMLType
	Offset int64 // from the start of the data section
}

// Elements is the number of values of the tensor, or -1 when a dimension
// is negative or their product overflows an int64 (Read refuses both).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		if d < 0 || d > 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return n
}

// Bytes is the stored size of the tensor. As llama.cpp requires, a row
// (the first dimension) is whole blocks of the type, and the count of
// values and of bytes fit an int64.
func (t TensorInfo) Bytes() (int64, error) {
	n := t.Elements()
	if n < 0 {
		return 0, fmt.Errorf("shape %v: the number of values overflows", t.Dims)
	}
	if len(t.Dims) > 0 && t.Type.Known() && t.Dims[0]%t.Type.BlockSize() != 0 {
		return 0, fmt.Errorf("rows of %d values are not whole %s blocks of %d", t.Dims[0], t.Type, t.Type.BlockSize())
	}
	return t.Type.RowBytes(n)
}

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

// writeValue encodes a value: a scalar in the Go type of its tag, an array
// as a typed slice (see Value).
func writeValue(b *bytes.Buffer, v Value) error {
	t, want := v.Type, goTypes[v.Type]
	if t == TypeArray {
		t, want = v.Elem, reflect.SliceOf(goTypes[v.Elem])
	}
	if goTypes[t] == nil {
		return fmt.Errorf("value type %s", t)
	}
	if reflect.TypeOf(v.V) != want {
		return fmt.Errorf("value %v (%T) is not a %s", v.V, v.V, v.Type)
	}
	if v.Type == TypeArray {
		binary.Write(b, binary.LittleEndian, uint32(v.Elem))
		binary.Write(b, binary.LittleEndian, uint64(v.Len()))
	}
	switch x := v.V.(type) {
	case string:
		writeString(b, x)
	case []string:
		for _, s := range x {
			writeString(b, s)
		}
	default:
		return binary.Write(b, binary.LittleEndian, x)
	}
	return nil
}

// Pair is a metadata entry.
func Pair(key string, v Value) KV { return KV{Key: key, Value: v} }
