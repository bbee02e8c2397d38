package codec

import (
	"bytes"
	"fmt"
	"math"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// mlxAffine is MLX's affine mode: packed U32 codes, scales and biases in the
// weight's float dtype, one of each per group.
type mlxAffine struct {
	noSegmentRule
	quantizedNonFinite
}

func (mlxAffine) params(p Params) (quant.MLXAffineParams, error) {
	r, err := quant.ParseMLXRounding(p.Rounding)
	return quant.MLXAffineParams{Bits: p.Bits, GroupSize: p.Group, Rounding: r}, err
}

func (c mlxAffine) Validate(p Params, rowLen int64) error {
	qp, err := c.params(p)
	if err != nil {
		return err
	}
	return qp.Validate(int(rowLen))
}

func (mlxAffine) Entries(name string, shape []int64, dt st.DType, p Params) []st.Entry {
	in := shape[len(shape)-1]
	return []st.Entry{
		{Name: base(name) + ".biases", DType: dt, Shape: lead(shape, in/int64(p.Group))},
		{Name: base(name) + ".scales", DType: dt, Shape: lead(shape, in/int64(p.Group))},
		{Name: name, DType: st.U32, Shape: lead(shape, in*int64(p.Bits)/32)},
	}
}

func (c mlxAffine) Encoder(name string, rowLen int64, dt st.DType, p Params) (Encoder, error) {
	qp, err := c.params(p)
	if err != nil {
		return nil, err
	}
	return &affineEncoder{name: name, rowLen: rowLen, dt: dt, p: qp}, qp.Validate(int(rowLen))
}

type affineEncoder struct {
	name   string
	rowLen int64
	dt     st.DType
	p      quant.MLXAffineParams
}

func (e *affineEncoder) Encode(vals []float32, rows int64, qe *quant.ErrStats, q *Bufs) []Piece {
	p, dt := e.p, string(e.dt)
	outSize, _ := e.dt.Size()
	q.packed, q.s, q.b = quant.QuantizeMLXAffineStats(vals, int(e.rowLen), p, q.packed[:0], q.s[:0], q.b[:0], dt, qe)
	groups := e.rowLen / int64(p.GroupSize)
	q.sEnc = growBytes(q.sEnc, int64(len(q.s))*outSize)
	q.bEnc = growBytes(q.bEnc, int64(len(q.b))*outSize)
	quant.EncodeF32(dt, q.s, q.sEnc)
	quant.EncodeF32(dt, q.b, q.bEnc)
	rowBytes := int64(p.PackedWords(int(e.rowLen)) * 4)
	return []Piece{{e.name, q.packed, rowBytes, 1}, {base(e.name) + ".scales", q.sEnc, groups * outSize, 1}, {base(e.name) + ".biases", q.bEnc, groups * outSize, 1}}
}

// Check dequantizes the stored codes with their stored scales and biases:
// each value within one step of the source, widened by the scale's own
// rounding to the dtype over the code range.
func (c mlxAffine) Check(k Chunk, read Reader) (Result, error) {
	qp, err := c.params(k.P)
	if err != nil {
		return Result{}, err
	}
	res := Result{RecordsError: true}
	groups := k.RowLen / int64(qp.GroupSize)
	rowBytes := k.RowLen * int64(qp.Bits) / 8
	packed, err := read(k.Name, k.OutRow*rowBytes, k.Rows*rowBytes)
	if err != nil {
		return res, err
	}
	scales, err := readF32(read, base(k.Name)+".scales", k.DType, k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return res, err
	}
	biases, err := readF32(read, base(k.Name)+".biases", k.DType, k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return res, err
	}
	// The stored scale is rounded to the dtype (relative error rel),
	// which moves code c by up to c*rel steps.
	rel := map[st.DType]float64{st.BF16: 1.0 / 256, st.F16: 1.0 / 2048}[k.DType]
	slack := 1 + float64(int(1)<<qp.Bits-1)*rel
	deq := make([]float32, k.RowLen)
	for i := int64(0); i < k.Rows; i++ {
		quant.DequantizeMLXAffine(packed[i*rowBytes:(i+1)*rowBytes], int(k.RowLen), qp, scales[i*groups:], biases[i*groups:], deq)
		for j, x := range deq {
			step := math.Abs(float64(scales[i*groups+int64(j)/int64(qp.GroupSize)]))
			d := math.Abs(float64(x - k.Want[i*k.RowLen+int64(j)]))
			res.Worst = max(res.Worst, d)
			// One step at a clamped end, plus the scale's own rounding over the code range.
			if d > step*slack+1e-6 {
				res.Beyond++
			}
		}
	}
	return res, nil
}

func (c mlxAffine) Dequantize(k Chunk, read Reader) ([]float32, error) {
	qp, err := c.params(k.P)
	if err != nil {
		return nil, err
	}
	if err := qp.Validate(int(k.RowLen)); err != nil {
		return nil, err
	}
	groups := k.RowLen / int64(qp.GroupSize)
	rowBytes := k.RowLen * int64(qp.Bits) / 8
	packed, err := read(k.Name, k.OutRow*rowBytes, k.Rows*rowBytes)
	if err != nil {
		return nil, err
	}
	scales, err := readF32(read, base(k.Name)+".scales", k.DType, k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return nil, err
	}
	biases, err := readF32(read, base(k.Name)+".biases", k.DType, k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return nil, err
	}
	out := make([]float32, k.Rows*k.RowLen)
	for i := int64(0); i < k.Rows; i++ {
		quant.DequantizeMLXAffineAs(packed[i*rowBytes:(i+1)*rowBytes], int(k.RowLen), qp, scales[i*groups:], biases[i*groups:], string(k.DType), out[i*k.RowLen:(i+1)*k.RowLen])
	}
	return out, nil
}

func (mlxAffine) Words(p Params, dt string) string {
	return fmt.Sprintf("%d-bit affine, group %d (%s scales)", p.Bits, p.Group, dt)
}

// mlxFP is one of MLX's microscaling modes: packed U32 codes and U8 scales, no biases.
type mlxFP struct {
	noSegmentRule
	quantizedNonFinite
	name Mode
	mode quant.MLXFPMode
}

func (c mlxFP) params(p Params) (quant.MLXFPParams, error) {
	r, err := quant.ParseMLXRounding(p.Rounding)
	return quant.MLXFPParams{Mode: c.mode, Rounding: r}, err
}

func (c mlxFP) Validate(p Params, rowLen int64) error {
	qp, err := c.params(p)
	if err != nil {
		return err
	}
	if p.Bits != c.mode.Bits() || p.Group != c.mode.GroupSize() {
		return fmt.Errorf("%s is %d-bit in groups of %d, not %d-bit in groups of %d", c.name, c.mode.Bits(), c.mode.GroupSize(), p.Bits, p.Group)
	}
	return qp.Validate(int(rowLen))
}

func (mlxFP) Entries(name string, shape []int64, dt st.DType, p Params) []st.Entry {
	in := shape[len(shape)-1]
	return []st.Entry{
		{Name: base(name) + ".scales", DType: st.U8, Shape: lead(shape, in/int64(p.Group))},
		{Name: name, DType: st.U32, Shape: lead(shape, in*int64(p.Bits)/32)},
	}
}

func (c mlxFP) Encoder(name string, rowLen int64, dt st.DType, p Params) (Encoder, error) {
	if err := c.Validate(p, rowLen); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	qp, _ := c.params(p)
	return &fpEncoder{name: name, rowLen: rowLen, dt: dt, p: qp}, nil
}

type fpEncoder struct {
	name   string
	rowLen int64
	dt     st.DType
	p      quant.MLXFPParams
}

func (e *fpEncoder) Encode(vals []float32, rows int64, qe *quant.ErrStats, q *Bufs) []Piece {
	q.packed, q.sEnc = quant.QuantizeMLXFP(vals, int(e.rowLen), e.p, string(e.dt), q.packed[:0], q.sEnc[:0], qe)
	groups := e.rowLen / int64(e.p.Mode.GroupSize())
	return []Piece{{e.name, q.packed, int64(e.p.RowBytes(int(e.rowLen))), 1}, {base(e.name) + ".scales", q.sEnc, groups, 1}}
}

// Check encodes the source again (deterministic) and compares codes and scales byte for byte.
func (c mlxFP) Check(k Chunk, read Reader) (Result, error) {
	res := Result{Again: fmt.Sprintf(" (%s, %s rounding)", c.name, k.P.Rounding)}
	qp, err := c.params(k.P)
	if err != nil {
		return res, err
	}
	if err := qp.Validate(int(k.RowLen)); err != nil {
		return res, err
	}
	rowBytes, groups := int64(qp.RowBytes(int(k.RowLen))), k.RowLen/int64(c.mode.GroupSize())
	packed, scales := quant.QuantizeMLXFP(k.Want, int(k.RowLen), qp, string(k.DType), nil, nil, nil) // no error statistics: only the bytes are compared
	gotCodes, err := read(k.Name, k.OutRow*rowBytes, k.Rows*rowBytes)
	if err != nil {
		return res, err
	}
	gotScales, err := read(base(k.Name)+".scales", k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return res, err
	}
	res.Differs = !bytes.Equal(packed, gotCodes) || !bytes.Equal(scales, gotScales)
	return res, nil
}

func (c mlxFP) Dequantize(k Chunk, read Reader) ([]float32, error) {
	qp, err := c.params(k.P)
	if err != nil {
		return nil, err
	}
	if err := qp.Validate(int(k.RowLen)); err != nil {
		return nil, err
	}
	rowBytes, groups := int64(qp.RowBytes(int(k.RowLen))), k.RowLen/int64(c.mode.GroupSize())
	codes, err := read(k.Name, k.OutRow*rowBytes, k.Rows*rowBytes)
	if err != nil {
		return nil, err
	}
	scales, err := read(base(k.Name)+".scales", k.OutRow*groups, k.Rows*groups)
	if err != nil {
		return nil, err
	}
	out := make([]float32, k.Rows*k.RowLen)
	for i := int64(0); i < k.Rows; i++ {
		quant.DequantizeMLXFP(codes[i*rowBytes:(i+1)*rowBytes], int(k.RowLen), qp, scales[i*groups:(i+1)*groups], out[i*k.RowLen:(i+1)*k.RowLen])
	}
	return out, nil
}

func (c mlxFP) Words(p Params, dt string) string {
	codes, scales := "E2M1", "E8M0"
	if c.mode == quant.MXFP8 {
		codes = "E4M3"
	}
	if c.mode == quant.NVFP4 {
		scales = "E4M3"
	}
	return fmt.Sprintf("%s (%s codes, %s scales, group %d)", c.mode, codes, scales, p.Group)
}
