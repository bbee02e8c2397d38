package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
)

// MaxHeaderSize caps the JSON header; the reference implementation uses the same limit.
const MaxHeaderSize = 100_000_000

// TensorInfo describes one tensor of a file. Begin and End are absolute byte
// offsets in the file (the header's data_offsets plus the data section start).
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	Begin int64
	End   int64
}

// Elements is the number of elements (1 for a scalar).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data.
func (t TensorInfo) Bytes() int64 { return t.End - t.Begin }

// Header is the parsed header of one safetensors file.
type Header struct {
	File      string // name used in messages
	FileSize  int64
	DataStart int64
	Metadata  map[string]string
	Tensors   []TensorInfo // in data order
}

// Lookup returns the tensor named name.
func (h *Header) Lookup(name string) (TensorInfo, bool) {
	for _, t := range h.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// ReadHeader reads and validates the header of a safetensors file of size
// bytes. Every integer from the file is checked before it is used, so a
// hostile file gives an error, never a panic or an overflow.
func ReadHeader(r io.ReaderAt, size int64, file string) (*Header, error) {
	if size < 8 {
		return nil, fmt.Errorf("%s: file is %d bytes, shorter than the 8-byte header length", file, size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading header length: %w", file, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit", file, n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("%s: header length %d runs past the end of the %d-byte file", file, n, size)
	}
	raw := make([]byte, n)
	if _, err := r.ReadAt(raw, 8); err != nil {
		return nil, fmt.Errorf("%s: reading %d-byte header: %w", file, n, err)
	}
	return ParseHeader(raw, size, file)
}

type rawEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParseHeader validates the JSON header raw of a file of fileSize bytes.
func ParseHeader(raw []byte, fileSize int64, file string) (*Header, error) {
	dataStart := int64(8) + int64(len(raw))
	if fileSize < dataStart {
		return nil, fmt.Errorf("%s: header of %d bytes runs past the end of the %d-byte file", file, len(raw), fileSize)
	}
	entries, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: header is not valid JSON: %w", file, err)
	}
	h := &Header{File: file, FileSize: fileSize, DataStart: dataStart}
	dataLen := fileSize - dataStart
	for _, kv := range entries {
		if kv.key == "__metadata__" {
			md := map[string]string{}
			if err := json.Unmarshal(kv.value, &md); err != nil {
				return nil, fmt.Errorf("%s: __metadata__ must map strings to strings: %w", file, err)
			}
			h.Metadata = md
			continue
		}
		t, err := parseEntry(kv.key, kv.value, dataLen)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", file, kv.key, err)
		}
		t.Begin += dataStart
		t.End += dataStart
		h.Tensors = append(h.Tensors, t)
	}
	sort.SliceStable(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	// The tensors must tile the data section exactly: no overlap, no hole.
	pos := dataStart
	for _, t := range h.Tensors {
		if t.Begin < pos {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] overlap the previous tensor", file, t.Name, t.Begin-dataStart, t.End-dataStart)
		}
		if t.Begin > pos {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets start at %d, leaving %d bytes before it that no tensor covers", file, t.Name, t.Begin-dataStart, t.Begin-pos)
		}
		pos = t.End
	}
	if pos != fileSize {
		return nil, fmt.Errorf("%s: tensors cover %d of the %d data bytes; the rest belongs to no tensor", file, pos-dataStart, dataLen)
	}
	return h, nil
}

func parseEntry(name string, value json.RawMessage, dataLen int64) (TensorInfo, error) {
	var e rawEntry
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return TensorInfo{}, fmt.Errorf("invalid entry: %w", err)
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return TensorInfo{}, errors.New("entry needs dtype, shape and data_offsets")
	}
	dt := DType(*e.DType)
	size, err := dt.Size()
	if err != nil {
		return TensorInfo{}, err
	}
	elems := int64(1)
	for _, d := range *e.Shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("negative dimension %d in shape %v", d, *e.Shape)
		}
		hi, lo := bits.Mul64(uint64(elems), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("shape %v overflows", *e.Shape)
		}
		elems = int64(lo)
	}
	hi, nbytes := bits.Mul64(uint64(elems), uint64(size))
	if hi != 0 || nbytes > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("shape %v of %s overflows", *e.Shape, dt)
	}
	offs := *e.DataOffsets
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("data_offsets must have 2 entries, has %d", len(offs))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] are not an ordered pair of non-negative offsets", begin, end)
	}
	if end > dataLen {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] run past the %d-byte data section", begin, end, dataLen)
	}
	if uint64(end-begin) != nbytes {
		return TensorInfo{}, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but shape %v of %s needs %d", begin, end, end-begin, *e.Shape, dt, nbytes)
	}
	shape := append([]int64{}, (*e.Shape)...)
	return TensorInfo{Name: name, DType: dt, Shape: shape, Begin: begin, End: end}, nil
}

type keyValue struct {
	key   string
	value json.RawMessage
}

// decodeObject decodes a JSON object into its members in file order and
// rejects duplicate keys, which encoding/json would silently merge.
func decodeObject(raw []byte) ([]keyValue, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("top level is not a JSON object")
	}
	seen := map[string]bool{}
	var out []keyValue
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("value of %q: %w", key, err)
		}
		out = append(out, keyValue{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	// Only padding may follow the object.
	if len(bytes.TrimRight(raw[dec.InputOffset():], " \t\r\n\x00")) != 0 {
		return nil, errors.New("data after the header object")
	}
	return out, nil
}
