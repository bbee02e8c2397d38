package codec

import (
	"bytes"
	"fmt"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// ggml is llama.cpp's block quantization (Q8_0, Q4_0, Q4_K, ...): one entry
// of blocks, rows of blocks back to back, its dtype the block type's name.
type ggml struct {
	noSegmentRule
	quantizedNonFinite
}

func (ggml) rowBytes(p Params, rowLen int64) (int64, error) {
	qk, bs, err := quant.GGMLBlock(p.GGMLType)
	if err != nil {
		return 0, err
	}
	if rowLen%int64(qk) != 0 {
		return 0, fmt.Errorf("rows of %d are not whole %s blocks", rowLen, p.GGMLType)
	}
	return rowLen / int64(qk) * int64(bs), nil
}

func (c ggml) Validate(p Params, rowLen int64) error {
	_, err := c.rowBytes(p, rowLen)
	return err
}

func (ggml) Entries(name string, shape []int64, dt st.DType, p Params) []st.Entry {
	return []st.Entry{{Name: name, DType: st.DType(p.GGMLType), Shape: shape}}
}

func (c ggml) Encoder(name string, rowLen int64, dt st.DType, p Params) (Encoder, error) {
	rb, err := c.rowBytes(p, rowLen)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &ggmlEncoder{name: name, rowLen: rowLen, typ: p.GGMLType, rowBytes: rb}, nil
}

type ggmlEncoder struct {
	name     string
	rowLen   int64
	typ      string
	rowBytes int64
}

func (e *ggmlEncoder) Encode(vals []float32, rows int64, qe *quant.ErrStats, q *Bufs) []Piece {
	// The type and row length were checked when the encoder was made.
	q.packed, _ = quant.QuantizeGGML(e.typ, vals, int(e.rowLen), q.packed[:0], qe)
	return []Piece{{e.name, q.packed, e.rowBytes, 1}}
}

// Check quantizes the source again with the ggml kernel the export used
// (llama.cpp's reference arithmetic, deterministic) and compares the stored
// blocks byte for byte.
func (c ggml) Check(k Chunk, read Reader) (Result, error) {
	res := Result{Again: " as " + k.P.GGMLType}
	rb, err := c.rowBytes(k.P, k.RowLen)
	if err != nil {
		return res, err
	}
	want, err := quant.QuantizeGGML(k.P.GGMLType, k.Want, int(k.RowLen), nil, nil)
	if err != nil {
		return res, err
	}
	got, err := read(k.Name, k.OutRow*rb, k.Rows*rb)
	if err != nil {
		return res, err
	}
	res.Differs = !bytes.Equal(got, want)
	return res, nil
}

func (c ggml) Dequantize(k Chunk, read Reader) ([]float32, error) {
	rb, err := c.rowBytes(k.P, k.RowLen)
	if err != nil {
		return nil, err
	}
	got, err := read(k.Name, k.OutRow*rb, k.Rows*rb)
	if err != nil {
		return nil, err
	}
	out := make([]float32, k.Rows*k.RowLen)
	return out, quant.DequantizeGGML(k.P.GGMLType, got, out)
}

func (ggml) Words(p Params, dt string) string {
	return fmt.Sprintf("%s (ggml blocks of %d)", p.GGMLType, p.Group)
}
