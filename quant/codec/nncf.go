package codec

import (
	"fmt"
	"math"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// nncf is NNCF's weight compression as OpenVINO stores it: integer codes
// (nibble-packed at 4 bits), f16 scales and, for asymmetric modes, zero
// points of the codes' type, per output channel or per group.
type nncf struct{}

func (nncf) params(p Params) quant.NNCFParams {
	return quant.NNCFParams{Bits: p.Bits, Sym: p.Sym, GroupSize: p.Group}
}

// codeType is the storage type of NNCF codes (and zero points).
func codeType(p Params) st.DType {
	sym := 0
	if p.Sym {
		sym = 1
	}
	return map[[2]int]st.DType{{8, 0}: "U8", {8, 1}: "I8", {4, 0}: "U4", {4, 1}: "I4"}[[2]int{p.Bits, sym}]
}

func (c nncf) Validate(p Params, rowLen int64) error { return c.params(p).Validate(int(rowLen)) }

// SegmentRows: zero points pack two per byte across rows, so every run of
// rows of a 4-bit tensor must hold an even count of groups.
func (c nncf) SegmentRows(p Params, rowLen, rows int64) error {
	if p.Bits != 4 {
		return nil
	}
	groups := rowLen / int64(c.params(p).Group(int(rowLen)))
	if rows*groups%2 != 0 {
		return fmt.Errorf("%d rows of %d groups cannot be nibble-packed in pieces", rows, groups)
	}
	return nil
}

// Entries: codes [.., N, K] per channel or [.., N, K/G, G] grouped; f16 scale
// (and zero point, for asymmetric modes) [.., N, 1] or [.., N, K/G, 1].
func (nncf) Entries(name string, shape []int64, dt st.DType, p Params) []st.Entry {
	in := shape[len(shape)-1]
	q, s := lead(shape, in), lead(shape, 1)
	if g := int64(p.Group); g > 0 {
		q, s = lead(shape, in/g, g), lead(shape, in/g, 1)
	}
	es := []st.Entry{{Name: name, DType: codeType(p), Shape: q}, {Name: base(name) + ".scale", DType: st.F16, Shape: s}}
	if !p.Sym {
		es = append(es, st.Entry{Name: base(name) + ".zero_point", DType: codeType(p), Shape: s})
	}
	return es
}

func (c nncf) Encoder(name string, rowLen int64, dt st.DType, p Params) (Encoder, error) {
	qp := c.params(p)
	return &nncfEncoder{name: name, rowLen: rowLen, p: qp}, qp.Validate(int(rowLen))
}

type nncfEncoder struct {
	name   string
	rowLen int64
	p      quant.NNCFParams
}

func (e *nncfEncoder) Encode(vals []float32, rows int64, qe *quant.ErrStats, q *Bufs) []Piece {
	p := e.p
	q.codes, q.s, q.zps = quant.QuantizeNNCFStats(vals, int(e.rowLen), p, q.codes[:0], q.s[:0], q.zps[:0], qe)
	groups := e.rowLen / int64(p.Group(int(e.rowLen)))
	q.sEnc = growBytes(q.sEnc, int64(2*len(q.s)))
	quant.EncodeF32("F16", q.s, q.sEnc)
	codes, zps, den := []byte(q.codes), []byte(q.zps), int64(1)
	if p.Bits == 4 {
		// Two codes per byte; the plan keeps outRow*groups even for zero points.
		q.codesPacked = quant.PackNibbles(q.codes, q.codesPacked[:0])
		q.zpsPacked = quant.PackNibbles(q.zps, q.zpsPacked[:0])
		codes, zps, den = q.codesPacked, q.zpsPacked, 2
	}
	pieces := []Piece{{e.name, codes, e.rowLen, den}, {base(e.name) + ".scale", q.sEnc, groups * 2, 1}}
	if !p.Sym {
		pieces = append(pieces, Piece{base(e.name) + ".zero_point", zps, groups, den})
	}
	return pieces
}

// stored reads codes, scales and zero points of a chunk's rows, unpacked.
func (c nncf) stored(k Chunk, read Reader) (codes []uint8, scales []float32, zps []uint8, err error) {
	p := c.params(k.P)
	if err := p.Validate(int(k.RowLen)); err != nil {
		return nil, nil, nil, err
	}
	groups := k.RowLen / int64(p.Group(int(k.RowLen)))
	// values reads the codes (or zero points) [first, first+n) of an entry, unpacked.
	values := func(entry string, first, n int64) ([]uint8, error) {
		if p.Bits == 8 {
			return read(entry, first, n)
		}
		b, err := read(entry, first/2, (first+n+1)/2-first/2)
		if err != nil {
			return nil, err
		}
		out := make([]uint8, n)
		for i := range out {
			a := first + int64(i)
			out[i] = (b[a/2-first/2] >> (4 * (a % 2))) & 0xf
		}
		return out, nil
	}
	if codes, err = values(k.Name, k.OutRow*k.RowLen, k.Rows*k.RowLen); err != nil {
		return nil, nil, nil, err
	}
	if scales, err = readF32(read, base(k.Name)+".scale", st.F16, k.OutRow*groups, k.Rows*groups); err != nil {
		return nil, nil, nil, err
	}
	zps = make([]uint8, k.Rows*groups)
	if !p.Sym {
		if zps, err = values(base(k.Name)+".zero_point", k.OutRow*groups, k.Rows*groups); err != nil {
			return nil, nil, nil, err
		}
	}
	return codes, scales, zps, nil
}

// Check: every code dequantizes, with its stored f16 scale and zero point,
// to within one step of the source cast to f16.
func (c nncf) Check(k Chunk, read Reader) (Result, error) {
	var res Result
	p := c.params(k.P)
	codes, scales, zps, err := c.stored(k, read)
	if err != nil {
		return res, err
	}
	g := int64(p.Group(int(k.RowLen)))
	for i, want := range k.Want {
		grp := int64(i) / g
		d := math.Abs(float64(quant.DequantizeNNCF(codes[i], zps[grp], scales[grp], p) - want))
		res.Worst = max(res.Worst, d)
		if d > math.Abs(float64(scales[grp]))*1.001+1e-6 {
			res.Beyond++
		}
	}
	return res, nil
}

func (c nncf) Dequantize(k Chunk, read Reader) ([]float32, error) {
	p := c.params(k.P)
	codes, scales, zps, err := c.stored(k, read)
	if err != nil {
		return nil, err
	}
	g := int64(p.Group(int(k.RowLen)))
	out := make([]float32, len(codes))
	for i, q := range codes {
		out[i] = quant.DequantizeNNCF(q, zps[int64(i)/g], scales[int64(i)/g], p)
	}
	return out, nil
}

func (nncf) Words(p Params, dt string) string {
	kind := map[bool]string{true: "symmetric", false: "asymmetric"}[p.Sym]
	group := fmt.Sprintf("group %d", p.Group)
	if p.Group <= 0 {
		group = "per output channel"
	}
	return fmt.Sprintf("int%d %s, %s (f16 scales, NNCF)", p.Bits, kind, group)
}

func (nncf) NonFinite() string {
	return "NNCF compresses its f16 cast, where a NaN, an infinity or a value beyond ±65504 cannot be compressed"
}
