package quant

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// fileSource is a single safetensors file seen as an unsharded checkpoint.
type fileSource string

func (f fileSource) Name() string { return string(f) }
func (f fileSource) Open(name string) (st.File, error) {
	if name != st.SingleFile {
		return nil, fs.ErrNotExist
	}
	return source.Dir(filepath.Dir(string(f))).Open(filepath.Base(string(f)))
}

// TestNNCFGolden compares our NNCF compression with vectors produced by real
// NNCF (interop/golden_nncf.py): codes, f16 scales and zero points, every
// mode, with the Go and the vector kernels.
func TestNNCFGolden(t *testing.T) { forEachPath(t, testNNCFGolden) }

func testNNCFGolden(t *testing.T) {
	ck, err := st.Open(fileSource(filepath.Join("..", "testdata", "golden", "nncf_int.safetensors")))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	read := func(name string) []byte {
		tt, ok := ck.Tensors[name]
		if !ok {
			t.Fatalf("golden lacks %s", name)
		}
		b, err := ck.ReadTensor(tt, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in := read("input")
	w := make([]float32, 32*256)
	if err := DecodeF32("F16", in, w); err != nil {
		t.Fatal(err)
	}
	modes := []struct {
		p    NNCFParams
		name string
	}{
		{NNCFParams{8, false, -1}, "INT8_ASYM.g-1"}, {NNCFParams{8, true, -1}, "INT8_SYM.g-1"},
		{NNCFParams{4, false, 64}, "INT4_ASYM.g64"}, {NNCFParams{4, false, 128}, "INT4_ASYM.g128"},
		{NNCFParams{4, true, 64}, "INT4_SYM.g64"}, {NNCFParams{4, true, 128}, "INT4_SYM.g128"},
	}
	for _, m := range modes {
		codes, scales, zps := QuantizeNNCF(w, 256, m.p, nil, nil, nil)
		if !bytes.Equal(codes, read(m.name+".q")) {
			t.Errorf("%s: codes differ", m.name)
		}
		s16 := make([]byte, 2*len(scales))
		for i, s := range scales {
			h, _ := F32ToF16(s)
			binary.LittleEndian.PutUint16(s16[2*i:], h)
		}
		if !bytes.Equal(s16, read(m.name+".scale")) {
			t.Errorf("%s: scales differ", m.name)
		}
		if !m.p.Sym && !bytes.Equal(zps, read(m.name+".zp")) {
			t.Errorf("%s: zero points differ", m.name)
		}
		// Dequantized values stay within a step of the input: half a step of
		// rounding, and at a clipped end (a signed scale, a rounded zero point) up to one.
		g := m.p.Group(256)
		for i, c := range codes {
			grp := i / g
			var zp uint8
			if !m.p.Sym {
				zp = zps[grp]
			}
			s := scales[grp]
			d := DequantizeNNCF(c, zp, s, m.p) - w[i]
			if d < 0 {
				d = -d
			}
			if d > abs32(s)+1e-6 {
				t.Fatalf("%s: element %d error %g above one step %g", m.name, i, d, s)
			}
		}
	}
}

func TestPackNibbles(t *testing.T) {
	got := PackNibbles([]uint8{1, 2, 0xf, 0x8, 3}, nil)
	if !bytes.Equal(got, []byte{0x21, 0x8f, 0x03}) {
		t.Fatalf("% x", got)
	}
}
