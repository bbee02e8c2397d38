package health

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// realisticFC is a concat projection of a real head's shape (hidden 2048:
// rows of 4096, embedding first) whose embedding-half columns are ratio
// times smaller than the hidden half's, as in the released heads (20-30x),
// rounded to bf16 as the export casts it.
func realisticFC(rows, hidden int, ratio float64) []float32 {
	r := rand.New(rand.NewPCG(28, 2))
	v := make([]float32, rows*2*hidden)
	for i := range v {
		x := r.NormFloat64() * 0.02
		if i%(2*hidden) < hidden {
			x /= ratio
		}
		v[i] = quant.BF16ToF32(quant.F32ToBF16(float32(x)))
	}
	return v
}

// precision is one quantization the targets write (or, marked, one they must not).
type precision struct {
	name string
	mode codec.Mode
	p    codec.Params
	ours bool // a precision some target writes for the head
	// lost: the embedding half is lost at a 25x ratio. Per-row int4 rounds
	// it to zero; MLX's nvfp4 too, by magnitude: its E4M3 group scale
	// (amax/6, no tensor scale) underflows below 2^-10 for groups whose
	// largest value is under about 0.006, which a realistic embedding
	// half's are.
	lost bool
}

var precisions = []precision{
	{"mlx int8 g64", codec.ModeMLXAffine, codec.Params{Bits: 8, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int6 g64", codec.ModeMLXAffine, codec.Params{Bits: 6, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int5 g64", codec.ModeMLXAffine, codec.Params{Bits: 5, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int4 g64", codec.ModeMLXAffine, codec.Params{Bits: 4, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int4 g128", codec.ModeMLXAffine, codec.Params{Bits: 4, Group: 128, Rounding: "gpu"}, true, false},
	{"mlx int3 g64", codec.ModeMLXAffine, codec.Params{Bits: 3, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int2 g64", codec.ModeMLXAffine, codec.Params{Bits: 2, Group: 64, Rounding: "gpu"}, true, false},
	{"mlx int2 g128", codec.ModeMLXAffine, codec.Params{Bits: 2, Group: 128, Rounding: "gpu"}, true, false},
	{"mlx mxfp8", codec.ModeMLXMXFP8, codec.Params{Bits: 8, Group: 32, Rounding: "gpu"}, true, false},
	{"mlx mxfp4", codec.ModeMLXMXFP4, codec.Params{Bits: 4, Group: 32, Rounding: "gpu"}, true, false},
	{"mlx nvfp4", codec.ModeMLXNVFP4, codec.Params{Bits: 4, Group: 16, Rounding: "gpu"}, true, true},
	{"openvino int8 (per channel)", codec.ModeNNCF, codec.Params{Bits: 8, Group: -1}, true, false},
	{"openvino int8 sym (per channel)", codec.ModeNNCF, codec.Params{Bits: 8, Group: -1, Sym: true}, true, false},
	{"openvino int4 g64", codec.ModeNNCF, codec.Params{Bits: 4, Group: 64}, true, false},
	{"openvino int4 g128 sym", codec.ModeNNCF, codec.Params{Bits: 4, Group: 128, Sym: true}, true, false},
	{"gguf Q8_0", codec.ModeGGML, codec.Params{Bits: 8, Group: 32, GGMLType: "Q8_0"}, true, false},
	{"gguf Q6_K", codec.ModeGGML, codec.Params{Bits: 6, Group: 256, GGMLType: "Q6_K"}, true, false},
	{"gguf Q5_K", codec.ModeGGML, codec.Params{Bits: 5, Group: 256, GGMLType: "Q5_K"}, true, false},
	{"gguf Q5_1", codec.ModeGGML, codec.Params{Bits: 5, Group: 32, GGMLType: "Q5_1"}, true, false},
	{"gguf Q5_0", codec.ModeGGML, codec.Params{Bits: 5, Group: 32, GGMLType: "Q5_0"}, true, false},
	{"gguf Q4_K", codec.ModeGGML, codec.Params{Bits: 4, Group: 256, GGMLType: "Q4_K"}, true, false},
	{"gguf Q4_0", codec.ModeGGML, codec.Params{Bits: 4, Group: 32, GGMLType: "Q4_0"}, true, false},
	// Per-row int4 (JustVugg/colibri#8): what must be refused.
	{"per-row int4", codec.ModeNNCF, codec.Params{Bits: 4, Group: -1}, false, true},
	{"per-row int4 sym", codec.ModeNNCF, codec.Params{Bits: 4, Group: -1, Sym: true}, false, true},
}

// measure quantizes vals as p and gathers the halves' statistics from the
// stored bytes decoded again.
func measure(t *testing.T, pr precision, vals []float32, rowLen int64) *Stats {
	t.Helper()
	c, err := codec.For(pr.mode)
	if err != nil {
		t.Fatal(err)
	}
	rows := int64(len(vals)) / rowLen
	enc, err := c.Encoder("fc.weight", rowLen, st.BF16, pr.p)
	if err != nil {
		t.Fatalf("%s: %v", pr.name, err)
	}
	var bufs codec.Bufs
	stored := map[string][]byte{}
	for _, pc := range enc.Encode(append([]float32(nil), vals...), rows, nil, &bufs) {
		stored[pc.Name] = append([]byte(nil), pc.Data...)
	}
	got, err := c.Dequantize(codec.Chunk{Name: "fc.weight", RowLen: rowLen, DType: st.BF16, P: pr.p, Rows: rows},
		func(entry string, off, n int64) ([]byte, error) {
			b := stored[entry]
			if off+n > int64(len(b)) {
				return nil, fmt.Errorf("%s: [%d, %d) of %d", entry, off, off+n, len(b))
			}
			return b[off : off+n], nil
		})
	if err != nil {
		t.Fatalf("%s: %v", pr.name, err)
	}
	s := NewStats(ConcatParts(rowLen, true), false)
	s.Add(got, vals, rowLen)
	return s
}

// Every precision a target writes keeps both halves of a real head's
// concat projection at a 25x column-scale ratio; per-row int4 loses the
// embedding half (and is refused), per-row int8 degrades it (and is
// noted). go test -v prints the table docs/gguf.md#head-health quotes.
func TestMeasuredErrors(t *testing.T) {
	const rows, hidden = 64, 2048
	for _, ratio := range []float64{1, 25} {
		vals := realisticFC(rows, hidden, ratio)
		t.Logf("column-scale ratio %gx: precision, embedding half, hidden half (relative RMS error), zero rows", ratio)
		for _, pr := range precisions {
			s := measure(t, pr, vals, 2*hidden)
			pe := s.PartErrors()
			v := JudgeErrors("fc.weight", pe)
			t.Logf("  %-32s %.4f  %.4f  %d/%d", pr.name, pe[0].RelRMS, pe[1].RelRMS, pe[0].ZeroRows, pe[0].Rows)
			lost := pr.lost && ratio == 25
			switch {
			case !lost && len(v.Lost) > 0:
				t.Errorf("%s at %gx: judged lost: %v", pr.name, ratio, v.Lost)
			case lost && len(v.Lost) == 0:
				t.Errorf("%s at %gx: not judged lost (%.3f, %.3f)", pr.name, ratio, pe[0].RelRMS, pe[1].RelRMS)
			case lost && !strings.Contains(v.Lost[0], "embedding half"):
				t.Errorf("%s: the verdict does not name the embedding half: %v", pr.name, v.Lost)
			case strings.HasPrefix(pr.name, "openvino int8") && ratio == 25 && len(v.Degraded) == 0:
				t.Errorf("%s at %gx: per-channel int8 not judged degraded (%.3f, %.3f)", pr.name, ratio, pe[0].RelRMS, pe[1].RelRMS)
			case pr.ours && ratio == 1 && len(v.Degraded) > 0:
				t.Errorf("%s at %gx: judged degraded: %v", pr.name, ratio, v.Degraded)
			}
		}
	}
}

func TestRelError(t *testing.T) {
	for _, c := range []struct{ errSq, refSq, want float64 }{{0, 0, 0}, {0, 4, 0}, {4, 4, 1}, {1, 4, 0.5}, {1, 0, 1}} {
		if got := RelError(c.errSq, c.refSq); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("RelError(%g, %g) = %g, want %g", c.errSq, c.refSq, got, c.want)
		}
	}
}

func TestConcatParts(t *testing.T) {
	if p := ConcatParts(8, true); p[0] != (Part{PartEmbedding, 0, 4}) || p[1] != (Part{PartHidden, 4, 8}) {
		t.Errorf("embedding first: %v", p)
	}
	if p := ConcatParts(8, false); p[0] != (Part{PartHidden, 0, 4}) || p[1] != (Part{PartEmbedding, 4, 8}) {
		t.Errorf("hidden first (MiMo): %v", p)
	}
}

// One case per failure kind without a source: each is named, and a healthy
// head passes.
func TestJudgeValues(t *testing.T) {
	const rows, h = 16, 64
	fc := realisticFC(rows, h, 25)
	withZeroHalf := append([]float32(nil), fc...)
	for r := 0; r < rows; r++ {
		clear(withZeroHalf[r*2*h : r*2*h+h])
	}
	roundedAway := append([]float32(nil), fc...)
	for r := 0; r < rows; r++ {
		for j := 0; j < h; j++ {
			roundedAway[r*2*h+j] *= 1e-5
		}
	}
	norm := func(centre float32) []float32 {
		v := make([]float32, h)
		for i := range v {
			v[i] = centre + 0.1*float32(i%7-3)/3
		}
		return v
	}
	nan := norm(1)
	nan[3] = float32(math.NaN())
	shifted, raw, plain := Expect{Centre: 1, ZeroCentred: true}, Expect{Centre: 0, ZeroCentred: true}, Expect{Centre: 1}
	for _, c := range []struct {
		name string
		kind Kind
		vals []float32
		e    Expect
		want string // "" healthy
	}{
		{"healthy fc", KindWeight, fc, shifted, ""},
		{"zero embedding half", KindWeight, withZeroHalf, shifted, "rows are all zeros in its embedding half"},
		{"embedding half rounded away", KindWeight, roundedAway, shifted, "embedding half's RMS"},
		{"zeroed head tensor", KindWeight, make([]float32, 2*rows*h), shifted, "every value is zero"},
		{"constant head tensor", KindWeight, norm(0.5)[:1:1], shifted, ""},
		{"constant matrix", KindWeight, []float32{0.25, 0.25, 0.25, 0.25}, shifted, "every value is 0.25"},
		{"non-finite", KindNorm, nan, shifted, "1 NaN or infinite values"},
		{"norm stored 1+w", KindNorm, norm(1), shifted, ""},
		{"norm shifted twice", KindNorm, norm(2), shifted, "applied twice"},
		{"norm not shifted", KindNorm, norm(0.02), shifted, "was not applied"},
		{"raw norm (HF)", KindNorm, norm(0), raw, ""},
		{"raw norm all zero (the identity of a zero-centred norm)", KindNorm, make([]float32, h), raw, ""},
		{"zero bias", KindVector, make([]float32, h), shifted, ""},
		{"zeroed norm stored 1+w", KindNorm, make([]float32, h), shifted, "every value is zero"},
		{"raw norm already shifted", KindNorm, norm(1), raw, "loaders add it again"},
		{"plain norm", KindNorm, norm(1), plain, ""},
		{"plain norm given a +1", KindNorm, norm(2), plain, "a +1 was added to a plain RMSNorm"},
	} {
		rowLen := int64(2 * h)
		var parts []Part
		if c.kind == KindWeight && len(c.vals)%(2*h) == 0 {
			parts = ConcatParts(rowLen, true)
		} else {
			rowLen = int64(len(c.vals))
		}
		s := NewStats(parts, c.kind == KindNorm)
		s.Add(c.vals, nil, rowLen)
		got := JudgeValues("t", c.kind, s, c.e)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: flagged: %v", c.name, got)
		case c.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "; "), c.want)):
			t.Errorf("%s: %v, want a finding saying %q", c.name, got, c.want)
		}
	}
}

// With a source, rows the source holds as zeros (a rigged head's [I | 0])
// are no loss; rows stored as zeros where the source's are not are.
func TestZeroRowsAgainstSource(t *testing.T) {
	const h = 4
	src := []float32{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	s := NewStats(ConcatParts(2*h, true), false)
	s.Add(src, src, 2*h)
	if v := JudgeErrors("fc", s.PartErrors()); len(v.Lost)+len(v.Degraded) > 0 {
		t.Errorf("a source's own zero half judged: %+v", v)
	}
	s = NewStats(ConcatParts(2*h, true), false)
	s.Add(make([]float32, len(src)), src, 2*h)
	if v := JudgeErrors("fc", s.PartErrors()); len(v.Lost) != 1 || !strings.Contains(v.Lost[0], "embedding half") {
		t.Errorf("a stored zero embedding half: %+v", v)
	}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		"blk.4.nextn.enorm.weight": KindNorm, "blk.4.attn_norm.weight": KindNorm, "pre_fc_norm_embedding.weight": KindNorm,
		"mtp.norm.weight": KindNorm, "model.layers.3.shared_head.norm.weight": KindNorm, "blk.4.nextn.shared_head_norm.weight": KindNorm,
		"blk.4.attn_q_norm.weight": KindVector, "layers.0.self_attn.k_norm.weight": KindVector, "blk.4.exp_probs_b.bias": KindVector,
	} {
		if got := KindOf(name, 1); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if KindOf("mtp.fc.weight", 2) != KindWeight {
		t.Error("a matrix is not a weight")
	}
}

// One problem is "1 problem", in the text report and the error.
func TestReportCountsInEnglish(t *testing.T) {
	for _, c := range []struct {
		problems []string
		want     string
	}{{[]string{"a"}, "1 problem"}, {[]string{"a", "b"}, "2 problems"}} {
		r := &Report{Checked: 3, Problems: c.problems}
		var b strings.Builder
		r.WriteText(&b)
		if !strings.Contains(b.String(), ": "+c.want+"\n") || !strings.Contains(r.Err().Error(), "show "+c.want+":") {
			t.Errorf("%d problems: %q, %v", len(c.problems), b.String(), r.Err())
		}
	}
}
