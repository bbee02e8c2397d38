// Package rows reads the source rows a plan entry is made from and decodes
// them to float32: one reader for the runner, verify --src and resume's
// source check, so every path reads and decodes the same bytes the same way.
// A plan entry's rows come from one or more source tensors: the weight, and
// for an FP8 weight its block scales.
package rows

import (
	"fmt"
	"slices"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// Segment is rows [Row, Row+Rows) of a source tensor viewed as [rows, row
// length]. An FP8 source names its block-scale tensor and block size: its
// rows decode as code × the float32 scale of their block.
type Segment struct {
	Source string  `json:"source"`
	Row    int64   `json:"row"`
	Rows   int64   `json:"rows"`
	Scale  string  `json:"scale,omitempty"` // e.g. X.weight_scale_inv
	Block  []int64 `json:"block,omitempty"` // [rows, cols] of a scale block
	// ShardRows, when set, says the FP8 weight is stored as tensor-parallel
	// shards of ShardRows rows, each with ceil(ShardRows / Block[0]) scale
	// rows of its own (the last block of a shard covers rows past its end
	// that the weight does not hold): MiMo-V2.5's qkv_proj.
	ShardRows int64 `json:"shard_rows,omitempty"`
}

// scaleRow is the scale row of weight row abs.
func (seg Segment) scaleRow(abs int64) int64 {
	if seg.ShardRows <= 0 {
		return abs / seg.Block[0]
	}
	perShard := (seg.ShardRows + seg.Block[0] - 1) / seg.Block[0]
	return abs/seg.ShardRows*perShard + abs%seg.ShardRows/seg.Block[0]
}

// Reader reads and decodes segment rows of one checkpoint. It is not safe
// for concurrent use: each worker has its own.
type Reader struct {
	ck        *st.Checkpoint
	raw       []byte
	scaleName string
	scaleRaw  []byte
	scales    []float32
}

// NewReader reads from ck.
func NewReader(ck *st.Checkpoint) *Reader { return &Reader{ck: ck} }

// Raw reads n rows of seg from row (relative to the segment) as stored. The
// slice is reused by the next call.
func (r *Reader) Raw(seg Segment, rowLen, row, n int64) ([]byte, error) {
	t, ok := r.ck.Tensors[seg.Source]
	if !ok {
		return nil, fmt.Errorf("source tensor %s is not in the source", seg.Source)
	}
	size, err := t.DType.Size()
	if err != nil {
		return nil, fmt.Errorf("source tensor %s: %w", seg.Source, err)
	}
	r.raw, err = r.ck.ReadRange(t, (seg.Row+row)*rowLen*size, n*rowLen*size, r.raw)
	return r.raw, err
}

// Decode turns n rows read by Raw (from row, relative to the segment) into
// float32 values, dequantizing an FP8 source with its block scales.
func (r *Reader) Decode(seg Segment, rowLen, row, n int64, raw []byte, vals []float32) error {
	t, ok := r.ck.Tensors[seg.Source]
	if !ok {
		return fmt.Errorf("source tensor %s is not in the source", seg.Source)
	}
	if seg.Scale == "" {
		return quant.DecodeF32(string(t.DType), raw, vals)
	}
	scales, _, err := r.Scales(seg.Scale)
	if err != nil {
		return err
	}
	abs := seg.Row + row
	cols := (rowLen + seg.Block[1] - 1) / seg.Block[1]
	if seg.ShardRows > 0 {
		// Row by row: each row's scale row is its shard's.
		for i := range n {
			from := seg.scaleRow(abs+i) * cols
			if from+cols > int64(len(scales)) {
				return fmt.Errorf("%s: no scale for row %d", seg.Scale, abs+i)
			}
			in, out := raw[i*rowLen:(i+1)*rowLen], vals[i*rowLen:(i+1)*rowLen]
			if err := quant.DequantizeF8E4M3Blocks(in, rowLen, 1, 0, 1, seg.Block[1], scales[from:from+cols], out); err != nil {
				return fmt.Errorf("%s with %s: %w", seg.Source, seg.Scale, err)
			}
		}
		return nil
	}
	from := abs / seg.Block[0] * cols
	if from > int64(len(scales)) {
		return fmt.Errorf("%s: no scale for row %d", seg.Scale, abs)
	}
	if err := quant.DequantizeF8E4M3Blocks(raw, rowLen, n, abs, seg.Block[0], seg.Block[1], scales[from:], vals); err != nil {
		return fmt.Errorf("%s with %s: %w", seg.Source, seg.Scale, err)
	}
	return nil
}

// Scales returns a block-scale tensor decoded to float32 and its bytes as
// stored (to checksum); the last one read is kept.
func (r *Reader) Scales(name string) ([]float32, []byte, error) {
	if name == r.scaleName {
		return r.scales, r.scaleRaw, nil
	}
	t, ok := r.ck.Tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("scale tensor %s is not in the source", name)
	}
	raw, err := r.ck.ReadRange(t, 0, t.Bytes(), nil)
	if err != nil {
		return nil, nil, err
	}
	vals := make([]float32, t.Elements())
	if err := quant.DecodeF32(string(t.DType), raw, vals); err != nil {
		return nil, nil, fmt.Errorf("scale tensor %s: %w", name, err)
	}
	r.scaleName, r.scaleRaw, r.scales = name, raw, vals
	return vals, raw, nil
}

// MaxBlock bounds each size of an FP8 scale block (releases use 128), so
// that no block arithmetic can overflow.
const MaxBlock = 1 << 20

// NegativeScales counts the negative block scales of the rows a segment
// reads (a scale row covers Block[0] weight rows).
func NegativeScales(scales []float32, seg Segment, rowLen int64) int64 {
	if seg.Scale == "" || len(seg.Block) != 2 || seg.Block[0] <= 0 || seg.Block[1] <= 0 {
		return 0
	}
	cols := (rowLen + seg.Block[1] - 1) / seg.Block[1]
	var n int64
	if seg.ShardRows > 0 {
		last := int64(-1)
		for abs := seg.Row; abs < seg.Row+seg.Rows; abs++ {
			sr := seg.scaleRow(abs)
			if sr == last || (sr+1)*cols > int64(len(scales)) {
				continue
			}
			last = sr
			for _, s := range scales[sr*cols : (sr+1)*cols] {
				if s < 0 {
					n++
				}
			}
		}
		return n
	}
	from := seg.Row / seg.Block[0] * cols
	to := min(int64(len(scales)), (seg.Row+seg.Rows+seg.Block[0]-1)/seg.Block[0]*cols)
	for i := from; i < to; i++ {
		if scales[i] < 0 {
			n++
		}
	}
	return n
}

// Check refuses a segment the reader cannot decode: a scale of the wrong
// shape or dtype, a block that is not two
// positive sizes, or rows that are not the weight's own rows.
func Check(ck *st.Checkpoint, seg Segment, rowLen int64) error {
	t, ok := ck.Tensors[seg.Source]
	if !ok {
		return fmt.Errorf("source %s is not in the checkpoint", seg.Source)
	}
	fp8 := t.DType == st.F8E4M3
	switch {
	case !fp8 && seg.Scale == "":
		return nil
	case fp8 && seg.Scale == "":
		// The codes as stored, read without dequantizing: only a copy of
		// them may be planned so (plan.Plan.Validate).
		return nil
	case !fp8:
		return fmt.Errorf("%s: tensor %s is %s, not F8_E4M3, but has a block scale %s", t.Shard.Name, seg.Source, t.DType, seg.Scale)
	}
	if len(t.Shape) != 2 || t.Shape[1] != rowLen {
		return fmt.Errorf("%s: tensor %s: FP8 weights are read as whole rows of a 2-D tensor (shape %v, rows of %d)", t.Shard.Name, seg.Source, t.Shape, rowLen)
	}
	if len(seg.Block) != 2 || seg.Block[0] <= 0 || seg.Block[1] <= 0 || seg.Block[0] > MaxBlock || seg.Block[1] > MaxBlock {
		return fmt.Errorf("%s: tensor %s: block size %v is not two sizes from 1 to %d", t.Shard.Name, seg.Source, seg.Block, MaxBlock)
	}
	s, ok := ck.Tensors[seg.Scale]
	if !ok {
		return fmt.Errorf("%s: tensor %s: its block scale %s is missing", t.Shard.Name, seg.Source, seg.Scale)
	}
	if s.DType != st.F32 && s.DType != st.BF16 {
		return fmt.Errorf("%s: tensor %s: block scale dtype %s, want F32 or BF16", s.Shard.Name, seg.Scale, s.DType)
	}
	want := []int64{(t.Shape[0] + seg.Block[0] - 1) / seg.Block[0], (t.Shape[1] + seg.Block[1] - 1) / seg.Block[1]}
	if sr := seg.ShardRows; sr > 0 {
		if sr > t.Shape[0] || t.Shape[0]%sr != 0 {
			return fmt.Errorf("%s: tensor %s: %d rows do not split into tensor-parallel shards of %d", t.Shard.Name, seg.Source, t.Shape[0], sr)
		}
		want[0] = t.Shape[0] / sr * ((sr + seg.Block[0] - 1) / seg.Block[0])
	}
	if !slices.Equal(s.Shape, want) {
		return fmt.Errorf("%s: tensor %s has shape %v; for %s %v in blocks of %v it must be %v", s.Shard.Name, seg.Scale, s.Shape, seg.Source, t.Shape, seg.Block, want)
	}
	return nil
}
