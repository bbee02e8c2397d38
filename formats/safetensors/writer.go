package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Entry is a tensor to be written: its bytes come later, in order.
type Entry struct {
	Name  string
	DType DType
	Shape []int64
}

// Writer streams a safetensors file: the header is computed up front from
// the entries, then each tensor's bytes are written in entry order, so no
// tensor has to be held in memory with another. Output is deterministic:
// entries keep the caller's order and metadata keys are sorted.
type Writer struct {
	w       io.Writer
	entries []Entry
	sizes   []int64
	next    int
	written int64 // bytes of the current tensor written so far
	// HeaderSize is the length of the 8-byte prefix plus the JSON header.
	HeaderSize int64
	// DataSize is the total of the tensors' bytes.
	DataSize int64
}

// NewWriter writes the header for entries and metadata to w.
func NewWriter(w io.Writer, entries []Entry, metadata map[string]string) (*Writer, error) {
	hdr, sizes, err := EncodeHeader(entries, metadata)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	return &Writer{w: w, entries: entries, sizes: sizes, HeaderSize: int64(len(hdr)), DataSize: total}, nil
}

// EncodeHeader returns the 8-byte length and JSON header (space-padded to a
// multiple of 8) for entries in the given order, and each entry's byte size.
func EncodeHeader(entries []Entry, metadata map[string]string) ([]byte, []int64, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
		first = false
	}
	seen := map[string]bool{}
	sizes := make([]int64, len(entries))
	var off int64
	for i, e := range entries {
		if seen[e.Name] || e.Name == "__metadata__" {
			return nil, nil, fmt.Errorf("tensor %q: duplicate or reserved name", e.Name)
		}
		seen[e.Name] = true
		size, err := e.DType.Size()
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", e.Name, err)
		}
		n := size
		for _, d := range e.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("tensor %q: negative dimension in %v", e.Name, e.Shape)
			}
			n *= d
		}
		sizes[i] = n
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, e.Name)
		fmt.Fprintf(&b, `:{"dtype":"%s","shape":[`, e.DType)
		for j, d := range e.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d", d)
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, off+n)
		off += n
	}
	b.WriteByte('}')
	for (b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	out := make([]byte, 8, 8+b.Len())
	binary.LittleEndian.PutUint64(out, uint64(b.Len()))
	return append(out, b.Bytes()...), sizes, nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always marshals
	b.Write(enc)
}

// Write appends bytes of the current tensor; a tensor may arrive in pieces.
func (w *Writer) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if w.next >= len(w.entries) {
			return total, fmt.Errorf("safetensors writer: %d bytes past the last tensor", len(p))
		}
		room := w.sizes[w.next] - w.written
		n := int64(len(p))
		if n > room {
			n = room
		}
		k, err := w.w.Write(p[:n])
		total += k
		if err != nil {
			return total, err
		}
		w.written += n
		p = p[n:]
		w.advance()
	}
	return total, nil
}

func (w *Writer) advance() {
	for w.next < len(w.entries) && w.written == w.sizes[w.next] {
		w.next++
		w.written = 0
	}
}

// Close checks that every tensor received all its bytes.
func (w *Writer) Close() error {
	w.advance()
	if w.next != len(w.entries) {
		return fmt.Errorf("safetensors writer: tensor %q got %d of %d bytes", w.entries[w.next].Name, w.written, w.sizes[w.next])
	}
	return nil
}
