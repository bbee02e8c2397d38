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
	var buf bytes.Buffer
	w, err := st.NewWriter(&buf, []st.Entry{{Name: "w", DType: st.F8E4M3, Shape: []int64{rowsN, cols}}, {Name: "w_scale_inv", DType: st.F32, Shape: []int64{4, 1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(codes)
	w.Write(sb)
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
	defer ck.Close()
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
