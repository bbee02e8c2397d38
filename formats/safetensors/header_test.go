package safetensors

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	nlp "github.com/nlpodyssey/safetensors"
)

// rawFile builds a safetensors file from a literal header and data length.
func rawFile(header string, dataLen int) []byte {
	b := make([]byte, 8, 8+len(header)+dataLen)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, dataLen)...)
}

func TestReadHeaderHostile(t *testing.T) {
	big := make([]byte, 8)
	binary.LittleEndian.PutUint64(big, MaxHeaderSize+1)
	past := make([]byte, 16)
	binary.LittleEndian.PutUint64(past, 1000)
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, ^uint64(0))
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"short file", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header over 100 MB", append(big, make([]byte, 32)...), "exceeds the 100000000-byte limit"},
		{"header past end", past, "runs past the end"},
		{"header length max uint64", huge, "exceeds"},
		{"invalid json", rawFile(`{"a": [`, 0), "not valid JSON"},
		{"not an object", rawFile(`[1,2]`, 0), "not a JSON object"},
		{"trailing data", rawFile(`{} {}`, 0), "data after the header"},
		{"duplicate key", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `key "a" appears twice`},
		{"unknown dtype", rawFile(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, 1), `tensor "a": unknown dtype "Q4"`},
		{"offsets out of bounds", rawFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 4), `tensor "a": data_offsets [0, 8] run past the 4-byte data section`},
		{"offsets reversed", rawFile(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, 4), "not an ordered pair"},
		{"negative offset", rawFile(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,0]}}`, 4), "not an ordered pair"},
		{"three offsets", rawFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 1), "must have 2 entries"},
		{"bytes differ from shape", rawFile(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}`, 4), "shape [3] of BF16 needs 6"},
		{"shape overflow", rawFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4), "overflows"},
		{"bytes overflow", rawFile(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}}`, 4), "overflows"},
		{"negative dim", rawFile(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0), "negative dimension"},
		{"overlap", rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4), `tensor "b": data_offsets [2, 4] overlap`},
		{"hole", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}}`, 4), `tensor "b": data_offsets start at 3`},
		{"uncovered tail", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 4), "cover 2 of the 4 data bytes"},
		{"missing field", rawFile(`{"a":{"dtype":"U8","shape":[2]}}`, 2), "needs dtype, shape and data_offsets"},
		{"unknown field", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1}}`, 2), "invalid entry"},
		{"metadata not strings", rawFile(`{"__metadata__":{"n":1}}`, 0), "__metadata__ must map strings to strings"},
		{"float offsets", rawFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0.5,2]}}`, 2), "invalid entry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadHeader(bytes.NewReader(c.file), int64(len(c.file)), "shard-x.safetensors")
			if err == nil {
				t.Fatalf("accepted hostile header")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "shard-x.safetensors: ") {
				t.Fatalf("error %q: want the file name and %q", err, c.want)
			}
		})
	}
}

func TestReadHeaderValid(t *testing.T) {
	f := rawFile(`{"__metadata__":{"format":"pt"},"b":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[2,6]},"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"s":{"dtype":"F32","shape":[],"data_offsets":[6,10]},"z":{"dtype":"U8","shape":[0],"data_offsets":[10,10]}}   `, 10)
	h, err := ReadHeader(bytes.NewReader(f), int64(len(f)), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Metadata["format"]; got != "pt" {
		t.Errorf("metadata format = %q", got)
	}
	var names []string
	for _, ti := range h.Tensors {
		names = append(names, ti.Name)
	}
	if strings.Join(names, ",") != "a,b,s,z" {
		t.Errorf("data order = %v", names)
	}
	b, _ := h.Lookup("b")
	if !b.DType.IsFloat8() || b.Elements() != 4 || b.Begin != h.DataStart+2 {
		t.Errorf("b = %+v", b)
	}
	if s, _ := h.Lookup("s"); s.Elements() != 1 || s.Bytes() != 4 {
		t.Errorf("scalar = %+v", s)
	}
}

// TestWriterRoundTrip checks our streaming writer against an independent
// reader (nlpodyssey/safetensors) and against our own.
func TestWriterRoundTrip(t *testing.T) {
	entries := []Entry{
		{"z.weight", BF16, []int64{2, 3}},
		{"a.bias", F32, []int64{3}},
		{"m", U8, []int64{0}},
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, entries, map[string]string{"format": "mlx", "b": "x\"y"})
	if err != nil {
		t.Fatal(err)
	}
	data := [][]byte{bytes.Repeat([]byte{1}, 12), bytes.Repeat([]byte{2}, 12), nil}
	w.Write(data[0][:5]) // tensors may arrive in pieces
	w.Write(append(data[0][5:], data[1]...))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if (w.HeaderSize-8)%8 != 0 {
		t.Errorf("header not 8-aligned: %d", w.HeaderSize)
	}
	ref, err := nlp.Deserialize(buf.Bytes())
	if err != nil {
		t.Fatalf("reference reader: %v", err)
	}
	tv, ok := ref.Tensor("a.bias")
	if !ok || !bytes.Equal(tv.Data(), data[1]) || tv.DType().String() != "F32" {
		t.Errorf("reference reader sees a.bias = %v %v", ok, tv.Data())
	}
	h, err := ReadHeader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if h.Tensors[0].Name != "z.weight" || h.Metadata["b"] != "x\"y" {
		t.Errorf("order or metadata lost: %+v", h)
	}
	// Too many bytes, too few bytes.
	w2, _ := NewWriter(&bytes.Buffer{}, entries[:1], nil)
	if _, err := w2.Write(make([]byte, 13)); err == nil {
		t.Error("writer accepted bytes past the last tensor")
	}
	w3, _ := NewWriter(&bytes.Buffer{}, entries[:1], nil)
	w3.Write(make([]byte, 11))
	if err := w3.Close(); err == nil {
		t.Error("writer closed with a short tensor")
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`), int64(4))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"b":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,4]}}`), int64(4))
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}}`), int64(4))
	f.Fuzz(func(t *testing.T, header []byte, dataLen int64) {
		if dataLen < 0 || dataLen > 1<<40 {
			return
		}
		fileSize := 8 + int64(len(header)) + dataLen
		h, err := ParseHeader(header, fileSize, "fuzz")
		if err != nil {
			return
		}
		// An accepted header must tile the data section exactly.
		pos := h.DataStart
		for _, ti := range h.Tensors {
			if ti.Begin != pos || ti.End < ti.Begin {
				t.Fatalf("accepted header with bad tiling: %+v", ti)
			}
			sz, err := ti.DType.Size()
			if err != nil || ti.Elements()*sz != ti.Bytes() {
				t.Fatalf("accepted header with wrong size: %+v", ti)
			}
			pos = ti.End
		}
		if pos != fileSize {
			t.Fatalf("accepted header covering %d of %d", pos, fileSize)
		}
	})
}
