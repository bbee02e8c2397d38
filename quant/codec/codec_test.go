package codec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// cases are one parameter set per mode.
var cases = []struct {
	mode Mode
	p    Params
	dt   st.DType
}{
	{ModeMLXAffine, Params{Bits: 4, Group: 64, Rounding: "gpu"}, st.BF16},
	{ModeMLXAffine, Params{Bits: 8, Group: 32, Rounding: "cpu"}, st.F16},
	{ModeMLXMXFP4, Params{Bits: 4, Group: 32, Rounding: "gpu"}, st.BF16},
	{ModeMLXMXFP8, Params{Bits: 8, Group: 32, Rounding: "gpu"}, st.BF16},
	{ModeMLXNVFP4, Params{Bits: 4, Group: 16, Rounding: "gpu"}, st.BF16},
	{ModeNNCF, Params{Bits: 8, Group: -1}, st.F16},
	{ModeNNCF, Params{Bits: 4, Group: 64, Sym: true}, st.F16},
	{ModeNNCF, Params{Bits: 4, Group: 64}, st.F16},
	{ModeGGML, Params{Bits: 8, Group: 32, GGMLType: "Q8_0"}, st.BF16},
	{ModeGGML, Params{Bits: 4, Group: 256, GGMLType: "Q4_K"}, st.BF16},
}

// store is an output file in memory: the entries a codec declares, filled
// with the pieces its encoder makes.
type store map[string][]byte

func (s store) read(entry string, off, n int64) ([]byte, error) {
	b, ok := s[entry]
	if !ok || off < 0 || off+n > int64(len(b)) {
		return nil, fmt.Errorf("entry %s: [%d, %d) of %d bytes", entry, off, off+n, len(b))
	}
	return b[off : off+n], nil
}

// cast rounds values to dt, as the executor does before quantizing.
func cast(v []float32, dt st.DType) []float32 {
	size, _ := dt.Size()
	enc := make([]byte, int64(len(v))*size)
	quant.EncodeF32(string(dt), v, enc)
	out := make([]float32, len(v))
	quant.DecodeF32(string(dt), enc, out)
	return out
}

// Every codec's entries hold exactly what its encoder writes, chunk by
// chunk, and its check accepts them; a changed byte or a changed source
// value is found.
func TestCodecsRoundTrip(t *testing.T) {
	const rows, rowLen = 8, 256
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-%+v", c.mode, c.p), func(t *testing.T) {
			cd, err := For(c.mode)
			if err != nil {
				t.Fatal(err)
			}
			if err := cd.Validate(c.p, rowLen); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			vals := make([]float32, rows*rowLen)
			for i := range vals {
				vals[i] = float32(r.NormFloat64())
			}
			vals = cast(vals, c.dt)
			out := store{}
			for _, e := range cd.Entries("w.weight", []int64{rows, rowLen}, c.dt, c.p) {
				n := int64(1)
				for _, d := range e.Shape {
					n *= d
				}
				if qk, bs, err := quant.GGMLBlock(string(e.DType)); err == nil { // ggml: blocks
					n = n / int64(qk) * int64(bs)
				} else if e.DType == "U4" || e.DType == "I4" { // nibbles
					n = (n + 1) / 2
				} else {
					size, err := e.DType.Size()
					if err != nil {
						t.Fatal(err)
					}
					n *= size
				}
				out[e.Name] = make([]byte, n)
			}
			enc, err := cd.Encoder("w.weight", rowLen, c.dt, c.p)
			if err != nil {
				t.Fatal(err)
			}
			var bufs Bufs
			var qe quant.ErrStats
			for row := int64(0); row < rows; row += 2 { // chunks of two rows, as the executor's even counts
				for _, pc := range enc.Encode(append([]float32{}, vals[row*rowLen:(row+2)*rowLen]...), 2, &qe, &bufs) {
					b, ok := out[pc.Name]
					if !ok || pc.Offset(row)+int64(len(pc.Data)) > int64(len(b)) {
						t.Fatalf("piece %s at row %d (%d bytes) outside its entry (%d bytes)", pc.Name, row, len(pc.Data), len(b))
					}
					copy(b[pc.Offset(row):], pc.Data)
				}
			}
			check := func(want []float32) Result {
				res, err := cd.Check(Chunk{Name: "w.weight", RowLen: rowLen, DType: c.dt, P: c.p, Want: want, Rows: rows}, out.read)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := check(vals); res.Differs || res.Beyond > 0 {
				t.Fatalf("own output refused: %+v", res)
			}
			// The decoder reconstructs what the encoder measured its error against.
			deq, err := cd.Dequantize(Chunk{Name: "w.weight", RowLen: rowLen, DType: c.dt, P: c.p, Rows: rows - 2, OutRow: 2}, out.read)
			if err != nil {
				t.Fatal(err)
			}
			// (MLX's affine decoder rounds to the weights' dtype twice: up to an ulp of it more.)
			var worst, amax float64
			for i, v := range deq {
				worst = max(worst, math.Abs(float64(v)-float64(vals[2*rowLen+i])))
				amax = max(amax, math.Abs(float64(vals[2*rowLen+i])))
			}
			if len(deq) != (rows-2)*rowLen || worst == 0 || worst > qe.Max+amax/128 {
				t.Errorf("rows 2.. decode to %d values, worst error %g, the encoder's %g", len(deq), worst, qe.Max)
			}
			moved := append([]float32{}, vals...)
			for i := range moved[:rowLen] {
				moved[i] += 8
			}
			if res := check(moved); !res.Differs && res.Beyond == 0 {
				t.Errorf("a moved source row passes: %+v", res)
			}
			if w := cd.Words(c.p, string(c.dt)); w == "" || cd.NonFinite() == "" {
				t.Errorf("words %q, non-finite %q", w, cd.NonFinite())
			}
		})
	}
}

// An unknown mode, or parameters a mode does not take, are refused by name.
func TestCodecRefusals(t *testing.T) {
	if _, err := For("mlx_int3"); err == nil || !strings.Contains(err.Error(), `"mlx_int3"`) {
		t.Errorf("unknown mode: %v", err)
	}
	for _, c := range []struct {
		mode Mode
		p    Params
		want string
	}{
		{ModeMLXMXFP4, Params{Bits: 4, Group: 64, Rounding: "gpu"}, "mlx_mxfp4 is 4-bit in groups of 32, not 4-bit in groups of 64"},
		{ModeGGML, Params{GGMLType: "Q4_K"}, "rows of 96 are not whole Q4_K blocks"},
		{ModeMLXAffine, Params{Bits: 4, Group: 64, Rounding: "fast"}, "fast"},
	} {
		cd, _ := For(c.mode)
		if err := cd.Validate(c.p, 96); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.mode, c.p, err, c.want)
		}
	}
	nncf, _ := For(ModeNNCF)
	if err := nncf.SegmentRows(Params{Bits: 4, Group: -1}, 64, 3); err == nil {
		t.Error("3 rows of 4-bit zero points, one per row, accepted")
	}
	if err := nncf.SegmentRows(Params{Bits: 8, Group: -1}, 64, 3); err != nil {
		t.Error(err)
	}
}
