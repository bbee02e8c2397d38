package rows_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/rows"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// A weight stored as 2 tensor-parallel shards of 3 rows in blocks of 2 rows:
// each shard has 2 scale rows of its own (4 in all, where an unsharded
// weight of 6 rows has 3), and every row decodes with its shard's scale row.
func TestShardedBlockScales(t *testing.T) {
	const rowsN, cols = 6, 4
	codes := make([]byte, rowsN*cols)
	for i := range codes {
		codes[i] = byte(i*37+11) & 0x7e // no NaN codes
	}
	scales := []float32{1, 2, 4, 8}
	sb := make([]byte, 4*len(scales))
	for i, s := range scales {
		binary.LittleEndian.PutUint32(sb[4*i:], math.Float32bits(s))
	}
	ck := writeCheckpoint(t, []st.Entry{{Name: "w", DType: st.F8E4M3, Shape: []int64{rowsN, cols}}, {Name: "w_scale_inv", DType: st.F32, Shape: []int64{4, 1}}}, [][]byte{codes, sb})
	seg := rows.Segment{Source: "w", Rows: rowsN, Scale: "w_scale_inv", Block: []int64{2, 4}, ShardRows: 3}
	if err := rows.Check(ck, seg, cols); err != nil {
		t.Fatal(err)
	}
	plain := seg
	plain.ShardRows = 0
	if err := rows.Check(ck, plain, cols); err == nil || !strings.Contains(err.Error(), "must be [3 1]") {
		t.Errorf("unsharded check of 4 scale rows: %v", err)
	}
	odd := seg
	odd.ShardRows = 4
	if err := rows.Check(ck, odd, cols); err == nil || !strings.Contains(err.Error(), "shards of 4") {
		t.Errorf("shards of 4 rows: %v", err)
	}
	wantScaleRow := []int{0, 0, 1, 2, 2, 3} // shard 0: rows 0-1, 2 (+ a phantom row); shard 1 likewise
	rd := rows.NewReader(ck)
	for _, r := range []struct{ row, n int64 }{{0, 6}, {2, 3}, {5, 1}} {
		sub := seg
		sub.Row, sub.Rows = r.row, r.n
		raw, err := rd.Raw(sub, cols, 0, r.n)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, r.n*cols)
		if err := rd.Decode(sub, cols, 0, r.n, raw, got); err != nil {
			t.Fatal(err)
		}
		for i := range r.n {
			abs := r.row + i
			want := make([]float32, cols)
			if err := quant.DequantizeF8E4M3Blocks(codes[abs*cols:(abs+1)*cols], cols, 1, 0, 1, cols, []float32{scales[wantScaleRow[abs]]}, want); err != nil {
				t.Fatal(err)
			}
			for c := range int64(cols) {
				if got[i*cols+c] != want[c] {
					t.Fatalf("rows %d+%d: row %d col %d = %v, want %v (scale row %d)", r.row, r.n, abs, c, got[i*cols+c], want[c], wantScaleRow[abs])
				}
			}
		}
	}
	neg := []float32{1, -2, 4, -8}
	if n := rows.NegativeScales(neg, rows.Segment{Source: "w", Row: 3, Rows: 3, Scale: "s", Block: []int64{2, 4}, ShardRows: 3}, cols); n != 1 {
		t.Errorf("negative scales of shard 1: %d, want 1", n)
	}
}

// writeCheckpoint writes entries (with their bytes) as a one-file checkpoint.
func writeCheckpoint(t *testing.T, entries []st.Entry, data [][]byte) *st.Checkpoint {
	t.Helper()
	var buf bytes.Buffer
	w, err := st.NewWriter(&buf, entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		w.Write(d)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, st.SingleFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// FP4 codes (two a byte, value 2i low) with an E8M0 scale per 4 values
// decode exactly to e2m1 × 2^(e − 127), row by row from any row; a scale of
// the wrong dtype or shape, or codes not half the row, are refused.
func TestPackedE2M1(t *testing.T) {
	t.Parallel()
	// 2 rows of 8 values: row 0 codes 0..7, row 1 codes 8..15 (negatives).
	codes := []byte{0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE}
	scales := []byte{127, 128, 126, 0} // 1, 2 | 1/2, 2^-127
	ck := writeCheckpoint(t, []st.Entry{
		{Name: "w.weight", DType: st.I8, Shape: []int64{2, 4}},
		{Name: "w.scale", DType: st.F8E8M0, Shape: []int64{2, 2}},
		{Name: "bad.scale", DType: st.U8, Shape: []int64{2, 2}},
	}, [][]byte{codes, scales, scales})
	seg := rows.Segment{Source: "w.weight", Rows: 2, Scale: "w.scale", Block: []int64{1, 4}, Packed: rows.PackedE2M1}
	if err := rows.Check(ck, seg, 8); err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 0.5, 1, 1.5, 4, 6, 8, 12,
		float32(math.Copysign(0, -1)), -0.25, -0.5, -0.75, -2 * 0x1p-127, -3 * 0x1p-127, -4 * 0x1p-127, -6 * 0x1p-127}
	checkDecoded(t, ck, seg, 8, []int64{0, 1}, want)
	for _, c := range []struct {
		name   string
		seg    rows.Segment
		rowLen int64
		want   string
	}{
		{"scale dtype", rows.Segment{Source: "w.weight", Rows: 2, Scale: "bad.scale", Block: []int64{1, 4}, Packed: rows.PackedE2M1}, 8, "want F8_E8M0"},
		{"row not twice the bytes", seg, 4, "two values to a byte"},
		{"scale shape", rows.Segment{Source: "w.weight", Rows: 2, Scale: "w.scale", Block: []int64{1, 2}, Packed: rows.PackedE2M1}, 8, "must be [2 4]"},
		{"unknown packing", rows.Segment{Source: "w.weight", Rows: 2, Scale: "w.scale", Block: []int64{1, 4}, Packed: "e3m0"}, 8, "not known"},
	} {
		if err := rows.Check(ck, c.seg, c.rowLen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// A column concatenation reads each row as the parts' same rows side by
// side, from any row; parts of another dtype or height are refused.
func TestColumnConcatenation(t *testing.T) {
	t.Parallel()
	f32 := func(vs ...float32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	ck := writeCheckpoint(t, []st.Entry{
		{Name: "e", DType: st.F32, Shape: []int64{3, 1}},
		{Name: "h", DType: st.F32, Shape: []int64{3, 2}},
		{Name: "short", DType: st.F32, Shape: []int64{2, 2}},
		{Name: "wide", DType: st.BF16, Shape: []int64{3, 2}},
	}, [][]byte{f32(1, 2, 3), f32(10, 11, 20, 21, 30, 31), f32(0, 0, 0, 0), make([]byte, 12)})
	seg := rows.Segment{Source: "e", Rows: 3, Then: []rows.Columns{{Source: "h", Cols: 2}}}
	if err := rows.Check(ck, seg, 3); err != nil {
		t.Fatal(err)
	}
	rd := rows.NewReader(ck)
	raw, err := rd.Raw(seg, 3, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := rd.Decode(seg, 3, 1, 2, raw, got); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 20, 21, 3, 30, 31}; !slicesEqual(got, want) {
		t.Errorf("rows 1-2: %v, want %v", got, want)
	}
	for _, c := range []struct {
		part rows.Columns
		want string
	}{{rows.Columns{Source: "short", Cols: 2}, "must be [3, 2]"}, {rows.Columns{Source: "wide", Cols: 2}, "not F32"}, {rows.Columns{Source: "h", Cols: 3}, "must be [3, 3]"}} {
		bad := rows.Segment{Source: "e", Rows: 3, Then: []rows.Columns{c.part}}
		if err := rows.Check(ck, bad, 1+c.part.Cols); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.part.Source, err, c.want)
		}
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// MX fp8 codes (one E4M3 a byte) with an E8M0 scale per 2 values, in a
// 3-D expert stack read as rows of its last dimension, decode exactly to
// e4m3 × 2^(e − 127) from any row; codes of another dtype, scales of
// another dtype or shape, and rows not the last dimension are refused.
func TestPackedMXE4M3(t *testing.T) {
	t.Parallel()
	// [2 experts, 2 rows, 4 values]: 1, 2, -1, 1.5 | 0, 2^-9, 448, -448 ...
	codes := []byte{0x38, 0x40, 0xB8, 0x3C, 0x00, 0x01, 0x7E, 0xFE, 0x38, 0x38, 0x38, 0x38, 0x40, 0x40, 0xC0, 0xC0}
	scales := []byte{127, 128, 126, 127, 0, 254, 130, 120} // per 2 values
	ck := writeCheckpoint(t, []st.Entry{
		{Name: "e.gate_up_proj", DType: st.F8E4M3, Shape: []int64{2, 2, 4}},
		{Name: "e.gate_up_proj_scale", DType: st.F8E8M0, Shape: []int64{2, 2, 2}},
		{Name: "bad_scale", DType: st.U8, Shape: []int64{2, 2, 2}},
		{Name: "i8", DType: st.I8, Shape: []int64{2, 2, 4}},
	}, [][]byte{codes, scales, scales, codes})
	seg := rows.Segment{Source: "e.gate_up_proj", Rows: 4, Scale: "e.gate_up_proj_scale", Block: []int64{1, 2}, Packed: rows.PackedMXE4M3}
	if err := rows.Check(ck, seg, 4); err != nil {
		t.Fatal(err)
	}
	p := math.Ldexp
	want := []float32{1, 2, -1 * 2, 1.5 * 2, 0, float32(p(1, -9-1)), 448, -448,
		0x1p-127, 0x1p-127, 0x1p127, 0x1p127, 2 * 8, 2 * 8, -2 * 0x1p-7, -2 * 0x1p-7}
	checkDecoded(t, ck, seg, 4, []int64{0, 1, 3}, want)
	for _, c := range []struct {
		name   string
		seg    rows.Segment
		rowLen int64
		want   string
	}{
		{"scale dtype", rows.Segment{Source: "e.gate_up_proj", Rows: 4, Scale: "bad_scale", Block: []int64{1, 2}, Packed: rows.PackedMXE4M3}, 4, "want F8_E8M0"},
		{"codes dtype", rows.Segment{Source: "i8", Rows: 4, Scale: "e.gate_up_proj_scale", Block: []int64{1, 2}, Packed: rows.PackedMXE4M3}, 4, "stored F8_E4M3"},
		{"rows not the last dimension", rows.Segment{Source: "e.gate_up_proj", Rows: 2, Scale: "e.gate_up_proj_scale", Block: []int64{1, 2}, Packed: rows.PackedMXE4M3}, 8, "whole rows of their last dimension"},
		{"scale shape", rows.Segment{Source: "e.gate_up_proj", Rows: 4, Scale: "e.gate_up_proj_scale", Block: []int64{1, 4}, Packed: rows.PackedMXE4M3}, 4, "must be [2 2 1]"},
	} {
		if err := rows.Check(ck, c.seg, c.rowLen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// checkDecoded reads seg's rows (rowLen values each) from each row of
// froms to its end, as stored (RowBytesOf a row) and decoded: want bit for bit.
func checkDecoded(t *testing.T, ck *st.Checkpoint, seg rows.Segment, rowLen int64, froms []int64, want []float32) {
	t.Helper()
	rd := rows.NewReader(ck)
	for _, from := range froms {
		n := seg.Rows - from
		raw, err := rd.Raw(seg, rowLen, from, n)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(raw)) != n*seg.RowBytesOf(rowLen) {
			t.Fatalf("from row %d: %d bytes, want %d a row", from, len(raw), seg.RowBytesOf(rowLen))
		}
		got := make([]float32, n*rowLen)
		if err := rd.Decode(seg, rowLen, from, n, raw, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if w := want[from*rowLen+int64(i)]; math.Float32bits(v) != math.Float32bits(w) {
				t.Errorf("from row %d: value %d = %g, want %g", from, i, v, w)
			}
		}
	}
}

// Block FP8 with E8M0 scales (DeepSeek-V4's X.weight + X.scale, ue8m0): a
// weight of 3 × 5 in 2 × 4 blocks (partial last blocks both ways) decodes
// exactly to e4m3 × 2^(e − 127) of its block, from any row; a scale of the
// wrong dtype or shape is refused.
func TestBlockFP8E8M0Scales(t *testing.T) {
	t.Parallel()
	codes := make([]byte, 15)
	for i := range codes {
		codes[i] = byte(i*37 + 3)
		if codes[i]&0x7f == 0x7f { // no NaN codes
			codes[i] ^= 1
		}
	}
	scales := []byte{127, 130, 120, 0} // [2, 2]: 1, 8 | 2^-7, 2^-127
	ck := writeCheckpoint(t, []st.Entry{
		{Name: "w.weight", DType: st.F8E4M3, Shape: []int64{3, 5}},
		{Name: "w.scale", DType: st.F8E8M0, Shape: []int64{2, 2}},
		{Name: "bad.scale", DType: st.U8, Shape: []int64{2, 2}},
		{Name: "v.weight", DType: st.F8E4M3, Shape: []int64{3, 5}},
		{Name: "v.scale", DType: st.F8E8M0, Shape: []int64{3, 1}},
	}, [][]byte{codes, scales, scales, codes, {125, 126, 127}})
	seg := rows.Segment{Source: "w.weight", Rows: 3, Scale: "w.scale", Block: []int64{2, 4}}
	if err := rows.Check(ck, seg, 5); err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, 15)
	if err := quant.DecodeF32("F8_E4M3", codes, vals); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 15)
	for i, v := range vals {
		r, c := i/5, i%5
		want[i] = v * quant.E8M0ToF32(scales[r/2*2+c/4])
	}
	rd := rows.NewReader(ck)
	for _, from := range []int64{0, 1, 2} {
		raw, err := rd.Raw(seg, 5, from, 3-from)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, (3-from)*5)
		if err := rd.Decode(seg, 5, from, 3-from, raw, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if w := want[from*5+int64(i)]; math.Float32bits(v) != math.Float32bits(w) {
				t.Errorf("from row %d: value %d = %g, want %g", from, i, v, w)
			}
		}
	}
	// w ∥ v by columns (DeepSeek-V4's e_proj ∥ h_proj): each part with its
	// own scales and blocks (v's one per row).
	cat := rows.Segment{Source: "w.weight", Rows: 3, Scale: "w.scale", Block: []int64{2, 4}, Then: []rows.Columns{{Source: "v.weight", Cols: 5, Scale: "v.scale", Block: []int64{1, 8}}}}
	if err := rows.Check(ck, cat, 10); err != nil {
		t.Fatal(err)
	}
	if names := cat.ScaleNames(); len(names) != 2 || names[1] != "v.scale" {
		t.Errorf("scale names %v", names)
	}
	raw, err := rd.Raw(cat, 10, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 20)
	if err := rd.Decode(cat, 10, 1, 2, raw, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		r, c := 1+i/10, i%10
		w := want[r*5+min(c, 4)]
		if c >= 5 {
			w = vals[r*5+c-5] * quant.E8M0ToF32(byte(125+r))
		}
		if math.Float32bits(v) != math.Float32bits(w) {
			t.Errorf("concatenated row %d col %d = %g, want %g", r, c, v, w)
		}
	}
	unscaled := rows.Segment{Source: "w.weight", Rows: 3, Scale: "w.scale", Block: []int64{2, 4}, Then: []rows.Columns{{Source: "v.weight", Cols: 5}}}
	if err := rows.Check(ck, unscaled, 10); err == nil || !strings.Contains(err.Error(), "each read with their block scales") {
		t.Errorf("an FP8 part without scales: %v", err)
	}
	for _, c := range []struct {
		name string
		seg  rows.Segment
		want string
	}{
		{"scale dtype", rows.Segment{Source: "w.weight", Rows: 3, Scale: "bad.scale", Block: []int64{2, 4}}, "want F32, BF16 or F8_E8M0"},
		{"scale shape", rows.Segment{Source: "w.weight", Rows: 3, Scale: "w.scale", Block: []int64{1, 4}}, "must be [3 2]"},
	} {
		if err := rows.Check(ck, c.seg, 5); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestMXScales: an MX segment's scales are its stored bytes; a block-FP8
// segment's each block's byte repeated over the block's rows and groups,
// as mlx-vlm's mx.repeat(mx.repeat(s, 4, -1), 128, 0) lays them out.
func TestMXScales(t *testing.T) {
	mx := rows.Segment{Scale: "x_scale", Block: []int64{1, 32}, Row: 1}
	got, err := mx.MXScales([]byte{1, 2, 3, 4, 5, 6}, 64, 32, 0, 2, nil)
	if err != nil || string(got) != string([]byte{3, 4, 5, 6}) {
		t.Fatalf("MX scales %v, %v", got, err)
	}
	blk := rows.Segment{Scale: "x.scale", Block: []int64{2, 64}}
	// 4 rows of 128 inputs: scales [2, 2] = [[1 2] [3 4]]; groups of 32.
	got, err = blk.MXScales([]byte{1, 2, 3, 4}, 128, 32, 1, 3, nil)
	want := []byte{1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}
	if err != nil || string(got) != string(want) {
		t.Fatalf("block scales %v, %v; want %v", got, err, want)
	}
	for _, bad := range []rows.Segment{{Scale: "s", Block: []int64{2, 48}}, {Scale: "s", Block: []int64{2}}} {
		if _, err := bad.MXScales([]byte{1, 2, 3, 4}, 96, 32, 0, 1, nil); err == nil {
			t.Errorf("blocks %v of inputs not whole groups: no error", bad.Block)
		}
	}
	if _, err := blk.MXScales([]byte{1, 2, 3, 4}, 128, 32, 4, 1, nil); err == nil {
		t.Error("a row past the scales: no error")
	}
}
