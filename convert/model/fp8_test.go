package model_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// fp8Checkpoint writes a one-file checkpoint with an F8_E4M3 weight [5, 7]
// stored in 2 × 3 blocks (partial last blocks both ways), its F32 scales
// [3, 3], and returns the folder, the codes and the scales.
func fp8Checkpoint(t *testing.T, scaleShape []int64) (string, []byte, []float32) {
	t.Helper()
	dir := t.TempDir()
	codes := make([]byte, 35)
	for i := range codes {
		codes[i] = byte(i*53 + 7)
		if codes[i]&0x7f == 0x7f { // no NaN codes here
			codes[i] ^= 1
		}
	}
	n := scaleShape[0] * scaleShape[1]
	scales := make([]float32, n)
	sb := make([]byte, 4*n)
	for i := range scales {
		scales[i] = float32(i+1) / 64
		binary.LittleEndian.PutUint32(sb[4*i:], math.Float32bits(scales[i]))
	}
	var buf bytes.Buffer
	w, err := st.NewWriter(&buf, []st.Entry{{Name: "w", DType: st.F8E4M3, Shape: []int64{5, 7}}, {Name: "w_scale_inv", DType: st.F32, Shape: scaleShape}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(codes)
	w.Write(sb)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, st.SingleFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, codes, scales
}

func fp8Plan(block []int64) *plan.Plan {
	return &plan.Plan{Target: "test", TensorFiles: []string{"out.safetensors"}, Tensors: []plan.OutTensor{{
		Name: "w", File: "out.safetensors", RowLen: 7, Shape: []int64{5, 7}, DType: st.BF16, Transforms: []plan.Transform{plan.TCast},
		Segments: []plan.Segment{{Source: "w", Row: 0, Rows: 5, Scale: "w_scale_inv", Block: block}},
	}}}
}

// An FP8 weight and its block scales are one plan entry with two sources:
// the runner dequantizes exactly (code × its block's scale in float32, then
// one rounding to bf16), and verify --src recomputes through the same reader.
func TestFP8BlockDequantization(t *testing.T) {
	dir, codes, scales := fp8Checkpoint(t, []int64{3, 3})
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := t.TempDir()
	p := fp8Plan([]int64{2, 3})
	res, err := run.Run(context.Background(), p, ck, out, run.RunOptions{Jobs: 2, ChunkElems: 14})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "out.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h, err := st.ReadHeader(f, fi.Size(), "out.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := h.Lookup("w")
	got := make([]byte, e.End-e.Begin)
	f.ReadAt(got, e.Begin)
	for i := int64(0); i < 5; i++ {
		for j := int64(0); j < 7; j++ {
			want := quant.F32ToBF16(quant.F8E4M3ToF32(codes[i*7+j]) * scales[i/2*3+j/3])
			if g := binary.LittleEndian.Uint16(got[2*(i*7+j):]); g != want {
				t.Errorf("[%d,%d]: bf16 %#04x, want %#04x", i, j, g, want)
			}
		}
	}
	// The manifest records both sources; verify recomputes through them.
	if rec := res.Tensors[0]; strings.Join(rec.Sources, ",") != "w,w_scale_inv" || rec.Segments[0].Scale != "w_scale_inv" {
		t.Errorf("recorded sources %v, segments %+v", rec.Sources, rec.Segments)
	}
	cfg := []byte(`{}`)
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	fp, err := manifests.Fingerprint(ck, cfg)
	if err != nil {
		t.Fatal(err)
	}
	man := &manifests.Manifest{Schema: manifests.SchemaVersion, Tool: manifests.Tool{Name: "mtpconv", Version: "test"}, Source: fp,
		Target: p.Target, Tensors: res.Tensors, Files: res.Files}
	man.Source.Tensors = res.Sources
	if err := man.Write(out); err != nil {
		t.Fatal(err)
	}
	r, err := manifests.Verify(context.Background(), out, ck)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Recomputed != 1 {
		t.Errorf("verify: ok %v, %d recomputed, problems %+v", r.OK, r.Recomputed, r.Problems)
	}
}

// An FP8 weight without its scale, a scale of the wrong shape and a block
// that does not make the scale's shape are refused, naming the tensor.
func TestFP8PlanRefusals(t *testing.T) {
	cases := []struct {
		name  string
		shape []int64
		seg   plan.Segment
		want  string
	}{
		{"no scale", []int64{3, 3}, plan.Segment{Source: "w", Rows: 5}, "FP8 weight w is read without its block scale, so its codes can only be copied as they are"},
		{"scale shape", []int64{3, 2}, plan.Segment{Source: "w", Rows: 5, Scale: "w_scale_inv", Block: []int64{2, 3}}, "w_scale_inv has shape [3 2]"},
		{"block size", []int64{3, 3}, plan.Segment{Source: "w", Rows: 5, Scale: "w_scale_inv", Block: []int64{128, 128}}, "in blocks of [128 128] it must be [1 1]"},
		{"missing scale", []int64{3, 3}, plan.Segment{Source: "w", Rows: 5, Scale: "nope", Block: []int64{2, 3}}, "its block scale nope is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _, _ := fp8Checkpoint(t, c.shape)
			ck, err := st.Open(source.Dir(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			p := fp8Plan(nil)
			p.Tensors[0].Segments = []plan.Segment{c.seg}
			if err := p.Validate(ck); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}
