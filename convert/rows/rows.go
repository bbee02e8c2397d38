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
	// Packed, when set, names a packed storage of Source: PackedE2M1 is FP4
	// (DeepSeek-V4's routed experts): E2M1 codes two to a byte, value 2i in
	// the low nibble, in an I8 or U8 tensor [rows, RowLen/2], each Block[1]
	// values of a row scaled by one F8_E8M0 power of two in Scale ([rows,
	// RowLen/Block[1]], Block[0] 1). Its rows decode exactly as code ×
	// 2^(e − 127); a raw transfer (plan.TRepackMXFP4) moves the bytes as
	// they are. PackedMXE4M3 is MX fp8 (Hy4's weights): one F8_E4M3 code
	// per value, each Block[1] values of a row scaled by one F8_E8M0 power
	// of two in Scale ([rows, RowLen/Block[1]] as rows of its last
	// dimension, Block[0] 1); its rows decode exactly as code × 2^(e − 127),
	// and a raw transfer (plan.TMoveMXFP8) moves the bytes as they are.
	Packed string `json:"packed,omitempty"`
	// Then, when set, continues every row of Source with the same rows of
	// further source tensors, in order: the segment's rows are the column
	// concatenation [Source | Then[0] | ...] (DeepSeek-V4's e_proj ∥ h_proj
	// read as one eh_proj), Source's own part RowLen − Σ Then[k].Cols wide.
	// Every part is a 2-D float tensor of one dtype, read without scales.
	Then []Columns `json:"then,omitempty"`
}

// PackedE2M1 is Segment.Packed for FP4 codes with E8M0 scales.
const PackedE2M1 = "e2m1"

// PackedMXE4M3 is Segment.Packed for MX fp8: E4M3 codes with E8M0 scales.
const PackedMXE4M3 = "mx_e4m3"

// Columns is a source tensor whose rows continue a segment's rows. An
// FP8 part (its segment's Source FP8 too) names its own block scales.
type Columns struct {
	Source string  `json:"source"`
	Cols   int64   `json:"cols"`
	Scale  string  `json:"scale,omitempty"`
	Block  []int64 `json:"block,omitempty"`
}

// ScaleNames are the scale tensors a segment's rows decode with: Scale,
// then each column part's, in order (each hashed whole before the rows).
func (seg Segment) ScaleNames() []string {
	var out []string
	if seg.Scale != "" {
		out = append(out, seg.Scale)
	}
	for _, c := range seg.Then {
		if c.Scale != "" {
			out = append(out, c.Scale)
		}
	}
	return out
}

// ownCols is the width of Source's own part of a row of rowLen values.
func (seg Segment) ownCols(rowLen int64) int64 {
	for _, c := range seg.Then {
		rowLen -= c.Cols
	}
	return rowLen
}

// RowBytes is the stored size of one row of rowLen values of Source (its
// own part, for a column concatenation).
func (seg Segment) RowBytes(t *st.Tensor, rowLen int64) (int64, error) {
	if seg.Packed == PackedE2M1 {
		return rowLen / 2, nil
	}
	size, err := t.DType.Size()
	if err != nil {
		return 0, fmt.Errorf("source tensor %s: %w", seg.Source, err)
	}
	return seg.ownCols(rowLen) * size, nil
}

// RowBytesOf is the stored size of one row of rowLen values of a packed
// or one-byte source: two FP4 codes a byte, one MX fp8 code a byte.
func (seg Segment) RowBytesOf(rowLen int64) int64 {
	if seg.Packed == PackedE2M1 {
		return rowLen / 2
	}
	return seg.ownCols(rowLen)
}

// Values is the number of values Source holds as the segment reads it
// (two per byte of a packed FP4 tensor).
func (seg Segment) Values(t *st.Tensor) int64 {
	if seg.Packed == PackedE2M1 {
		return 2 * t.Elements()
	}
	return t.Elements()
}

// SourceRows is the number of rows of rowLen values Source holds as the
// segment reads it (its own part's, for a column concatenation).
func (seg Segment) SourceRows(t *st.Tensor, rowLen int64) int64 {
	own := seg.ownCols(rowLen)
	if own <= 0 {
		return 0
	}
	return seg.Values(t) / own
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
	part      []byte    // a column part's rows
	cols      []float32 // a column part's values
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
	rb, err := seg.RowBytes(t, rowLen)
	if err != nil {
		return nil, err
	}
	if len(seg.Then) == 0 {
		r.raw, err = r.ck.ReadRange(t, (seg.Row+row)*rb, n*rb, r.raw)
		return r.raw, err
	}
	// A column concatenation: each part's rows read, then interleaved row
	// by row into one buffer of whole rows.
	size, _ := t.DType.Size()
	full := rowLen * size
	if int64(cap(r.raw)) < n*full {
		r.raw = make([]byte, n*full)
	}
	out := r.raw[:n*full]
	at := int64(0)
	for k := -1; k < len(seg.Then); k++ {
		pt, cols := t, seg.ownCols(rowLen)
		if k >= 0 {
			c := seg.Then[k]
			if pt, ok = r.ck.Tensors[c.Source]; !ok {
				return nil, fmt.Errorf("source tensor %s is not in the source", c.Source)
			}
			cols = c.Cols
		}
		w := cols * size
		r.part, err = r.ck.ReadRange(pt, (seg.Row+row)*w, n*w, r.part)
		if err != nil {
			return nil, err
		}
		for i := range n {
			copy(out[i*full+at:i*full+at+w], r.part[i*w:(i+1)*w])
		}
		at += w
	}
	r.raw = out
	return out, nil
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
	if len(seg.Then) > 0 {
		return r.decodeColumns(seg, rowLen, row, n, raw, vals)
	}
	scales, _, err := r.Scales(seg.Scale)
	if err != nil {
		return err
	}
	abs := seg.Row + row
	if seg.Packed == PackedE2M1 {
		per := rowLen / seg.Block[1]
		if (abs+n)*per > int64(len(scales)) {
			return fmt.Errorf("%s: no scale for row %d", seg.Scale, abs+n-1)
		}
		if err := quant.DecodeE2M1(raw, seg.Block[1], scales[abs*per:(abs+n)*per], vals[:n*rowLen]); err != nil {
			return fmt.Errorf("%s with %s: %w", seg.Source, seg.Scale, err)
		}
		return nil
	}
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

// decodeColumns dequantizes the rows of a column concatenation of FP8
// parts (as Raw interleaved them), each part with its own block scales.
func (r *Reader) decodeColumns(seg Segment, rowLen, row, n int64, raw []byte, vals []float32) error {
	parts := append([]Columns{{Source: seg.Source, Cols: seg.ownCols(rowLen), Scale: seg.Scale, Block: seg.Block}}, seg.Then...)
	at := int64(0)
	for _, p := range parts {
		part := Segment{Source: p.Source, Row: seg.Row, Rows: seg.Rows, Scale: p.Scale, Block: p.Block}
		if int64(cap(r.part)) < n*p.Cols {
			r.part = make([]byte, n*p.Cols)
		}
		in := r.part[:n*p.Cols]
		for i := range n { // FP8: one byte a value
			copy(in[i*p.Cols:(i+1)*p.Cols], raw[i*rowLen+at:i*rowLen+at+p.Cols])
		}
		if len(r.cols) < int(n*p.Cols) {
			r.cols = make([]float32, n*p.Cols)
		}
		out := r.cols[:n*p.Cols]
		if err := r.Decode(part, p.Cols, row, n, in, out); err != nil {
			return err
		}
		for i := range n {
			copy(vals[i*rowLen+at:i*rowLen+at+p.Cols], out[i*p.Cols:(i+1)*p.Cols])
		}
		at += p.Cols
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
	if seg.Packed == PackedMXE4M3 {
		return checkMXE4M3(ck, t, seg, rowLen)
	}
	if seg.Packed != "" {
		return checkPacked(ck, t, seg, rowLen)
	}
	if len(seg.Then) > 0 {
		return checkColumns(ck, t, seg, rowLen)
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
	if s.DType != st.F32 && s.DType != st.BF16 && s.DType != st.F8E8M0 {
		return fmt.Errorf("%s: tensor %s: block scale dtype %s, want F32, BF16 or F8_E8M0 (ue8m0)", s.Shard.Name, seg.Scale, s.DType)
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

// checkPacked refuses an FP4 segment whose codes or scales are not the
// packed layout Segment.Packed describes.
func checkPacked(ck *st.Checkpoint, t *st.Tensor, seg Segment, rowLen int64) error {
	switch {
	case seg.Packed != PackedE2M1:
		return fmt.Errorf("%s: tensor %s: packed storage %q is not known (%s and %s are)", t.Shard.Name, seg.Source, seg.Packed, PackedE2M1, PackedMXE4M3)
	case t.DType != st.I8 && t.DType != st.U8:
		return fmt.Errorf("%s: tensor %s is %s; FP4 codes are stored I8 or U8, two to a byte", t.Shard.Name, seg.Source, t.DType)
	case len(seg.Block) != 2 || seg.Block[0] != 1 || seg.Block[1] <= 0 || seg.Block[1]%2 != 0 || seg.Block[1] > MaxBlock:
		return fmt.Errorf("%s: tensor %s: FP4 scale block %v is not [1, an even size]", t.Shard.Name, seg.Source, seg.Block)
	case len(t.Shape) != 2 || rowLen%seg.Block[1] != 0 || t.Shape[1]*2 != rowLen:
		return fmt.Errorf("%s: tensor %s: FP4 codes are read as whole rows of a 2-D tensor two values to a byte (shape %v, rows of %d values in blocks of %d)", t.Shard.Name, seg.Source, t.Shape, rowLen, seg.Block[1])
	case len(seg.Then) > 0:
		return fmt.Errorf("%s: tensor %s: FP4 codes are not read as part of a column concatenation", t.Shard.Name, seg.Source)
	}
	return checkE8M0Scale(ck, t, seg, []int64{t.Shape[0], rowLen / seg.Block[1]}, "FP4")
}

// checkE8M0Scale refuses the F8_E8M0 scale of an MX-format segment (kind
// "FP4" or "MX fp8") that is missing, of another dtype or not of shape want.
func checkE8M0Scale(ck *st.Checkpoint, t *st.Tensor, seg Segment, want []int64, kind string) error {
	s, ok := ck.Tensors[seg.Scale]
	if !ok {
		return fmt.Errorf("%s: tensor %s: its %s scale %s is missing", t.Shard.Name, seg.Source, kind, seg.Scale)
	}
	if s.DType != st.F8E8M0 {
		return fmt.Errorf("%s: tensor %s: %s scale dtype %s, want %s", s.Shard.Name, seg.Scale, kind, s.DType, st.F8E8M0)
	}
	if !slices.Equal(s.Shape, want) {
		return fmt.Errorf("%s: tensor %s has shape %v; for %s %v (%s, blocks of %d) it must be %v", s.Shard.Name, seg.Scale, s.Shape, seg.Source, t.Shape, kind, seg.Block[1], want)
	}
	return nil
}

// checkColumns refuses a column concatenation whose parts are not 2-D
// float tensors of one dtype and the same rows, as wide as they say.
func checkColumns(ck *st.Checkpoint, t *st.Tensor, seg Segment, rowLen int64) error {
	fp8 := t.DType == st.F8E4M3 && seg.Scale != ""
	if !fp8 && (seg.Scale != "" || t.DType != st.BF16 && t.DType != st.F16 && t.DType != st.F32) {
		return fmt.Errorf("%s: tensor %s is %s; a column concatenation reads unscaled float tensors or FP8 ones with their block scales", t.Shard.Name, seg.Source, t.DType)
	}
	parts := []Columns{{Source: seg.Source, Cols: seg.ownCols(rowLen), Scale: seg.Scale, Block: seg.Block}}
	for _, c := range append(parts, seg.Then...) {
		p, ok := ck.Tensors[c.Source]
		switch {
		case !ok:
			return fmt.Errorf("source %s is not in the checkpoint", c.Source)
		case p.DType != t.DType:
			return fmt.Errorf("%s: tensor %s is %s, not %s as %s it is concatenated with", p.Shard.Name, c.Source, p.DType, t.DType, seg.Source)
		case len(p.Shape) != 2 || p.Shape[1] != c.Cols || c.Cols <= 0 || p.Shape[0] != t.Shape[0]:
			return fmt.Errorf("%s: tensor %s has shape %v; concatenated by columns it must be [%d, %d]", p.Shard.Name, c.Source, p.Shape, t.Shape[0], c.Cols)
		case fp8 != (c.Scale != ""):
			return fmt.Errorf("%s: tensor %s: the parts of an FP8 column concatenation are each read with their block scales", p.Shard.Name, c.Source)
		}
		if fp8 {
			if err := Check(ck, Segment{Source: c.Source, Rows: p.Shape[0], Scale: c.Scale, Block: c.Block}, c.Cols); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMXE4M3 refuses an MX fp8 segment whose codes or scales are not the
// layout PackedMXE4M3 describes: F8_E4M3 codes read as whole rows of their
// last dimension, an F8_E8M0 scale per Block[1] of them.
func checkMXE4M3(ck *st.Checkpoint, t *st.Tensor, seg Segment, rowLen int64) error {
	last := len(t.Shape) - 1
	switch {
	case t.DType != st.F8E4M3:
		return fmt.Errorf("%s: tensor %s is %s; MX fp8 codes are stored F8_E4M3", t.Shard.Name, seg.Source, t.DType)
	case len(seg.Block) != 2 || seg.Block[0] != 1 || seg.Block[1] <= 0 || seg.Block[1] > MaxBlock:
		return fmt.Errorf("%s: tensor %s: MX fp8 scale block %v is not [1, a size]", t.Shard.Name, seg.Source, seg.Block)
	case last < 1 || t.Shape[last] != rowLen || rowLen%seg.Block[1] != 0:
		return fmt.Errorf("%s: tensor %s: MX fp8 codes are read as whole rows of their last dimension (shape %v, rows of %d in blocks of %d)", t.Shard.Name, seg.Source, t.Shape, rowLen, seg.Block[1])
	case len(seg.Then) > 0:
		return fmt.Errorf("%s: tensor %s: MX fp8 codes are not read as part of a column concatenation", t.Shard.Name, seg.Source)
	}
	return checkE8M0Scale(ck, t, seg, append(slices.Clone(t.Shape[:last]), rowLen/seg.Block[1]), "MX fp8")
}

// MXScales is the E8M0 scale bytes, one per group values of a row, that an
// mx move (plan.TMoveMXFP8, TMoveMXFP4) stores for n rows of the segment
// from row (relative to it), given the scale tensor's bytes as stored. An
// MX segment's scales are one per group already (Block [1, group]): they
// are those bytes. A block-FP8 segment's ue8m0 scale covers Block[0] rows
// and Block[1] inputs (a multiple of group): its byte is repeated over
// every group of the block, row by row, as mlx-vlm's DeepSeek-V4 sanitize
// repeats a 128 × 128 scale into mxfp8's (mx.repeat by 4 along the inputs,
// by 128 along the rows). dst is reused when large enough.
func (seg Segment) MXScales(sraw []byte, rowLen, group, row, n int64, dst []byte) ([]byte, error) {
	if group <= 0 || len(seg.Block) != 2 || seg.Block[0] <= 0 || seg.Block[1]%group != 0 || rowLen%seg.Block[1] != 0 {
		return nil, fmt.Errorf("%s: scale blocks %v do not cover whole groups of %d in rows of %d", seg.Scale, seg.Block, group, rowLen)
	}
	per, cols := rowLen/group, rowLen/seg.Block[1]
	abs := seg.Row + row
	if seg.Block[0] == 1 && seg.Block[1] == group {
		if (abs+n)*per > int64(len(sraw)) {
			return nil, fmt.Errorf("%s: no scale for row %d", seg.Scale, abs+n-1)
		}
		return sraw[abs*per : (abs+n)*per], nil
	}
	if (abs+n-1)/seg.Block[0]*cols+cols > int64(len(sraw)) {
		return nil, fmt.Errorf("%s: no scale for row %d", seg.Scale, abs+n-1)
	}
	if int64(cap(dst)) < n*per {
		dst = make([]byte, n*per)
	}
	dst = dst[:n*per]
	rep := seg.Block[1] / group
	for i := range n {
		from := (abs + i) / seg.Block[0] * cols
		for g := range per {
			dst[i*per+g] = sraw[from+g/rep]
		}
	}
	return dst, nil
}

// BlockMovable reports why rows of a block-FP8 segment cannot be moved as
// MLX mx of group values a scale (nil when they can): E4M3 codes with one
// F8_E8M0 (ue8m0) scale per block, the block whole groups wide, and the
// rows and inputs whole blocks. mlx-vlm repeats each block's scale over the
// block's full height and width, so a partial block would leave its
// scales a shape the weight does not have.
func BlockMovable(ck *st.Checkpoint, seg Segment, rowLen, group int64) error {
	t, ok := ck.Tensors[seg.Source]
	if !ok {
		return fmt.Errorf("source %s is not in the checkpoint", seg.Source)
	}
	s, ok := ck.Tensors[seg.Scale]
	switch {
	case t.DType != st.F8E4M3 || !ok || s.DType != st.F8E8M0 || seg.Packed != "" || len(seg.Then) > 0 || seg.ShardRows > 0:
		return fmt.Errorf("%s is not E4M3 codes with an F8_E8M0 scale per block", seg.Source)
	case len(seg.Block) != 2 || seg.Block[0] <= 0 || seg.Block[1] <= 0 || seg.Block[1]%group != 0:
		return fmt.Errorf("%s: its scale blocks %v are not whole groups of %d", seg.Source, seg.Block, group)
	case rowLen%seg.Block[1] != 0 || seg.Row%seg.Block[0] != 0 || seg.Rows%seg.Block[0] != 0:
		return fmt.Errorf("%s (shape %v) is not whole %d × %d blocks", seg.Source, t.Shape, seg.Block[0], seg.Block[1])
	}
	return nil
}
