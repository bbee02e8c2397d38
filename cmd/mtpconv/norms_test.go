package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// What the card and the manifest say of the norms is true of the bytes, for
// every target: a head norm read from the output is the source's w plus 1
// exactly when the manifest records norm_plus_one on it, and the sentence of
// manifest and card says so (Qwen's zero-centred norms shifted by every
// target but hf, whose runtimes add the +1 themselves; GLM's plain norms
// never shifted; OpenVINO GenAI runs Qwen heads only).
func TestNormConventionIsTrueOfTheBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		fixture, norm string // the head norm read back, by its source name
		target        string
		shifted       bool
		sentence      string
	}{
		{fixtures.Qwen36, "mtp.pre_fc_norm_embedding.weight", "mlx", true, plan.NormsShifted},
		{fixtures.Qwen36, "mtp.pre_fc_norm_embedding.weight", "combined", true, plan.NormsShifted},
		{fixtures.Qwen36, "mtp.pre_fc_norm_embedding.weight", "openvino", true, plan.NormsShifted},
		{fixtures.Qwen36, "mtp.pre_fc_norm_embedding.weight", "gguf", true, plan.NormsShifted},
		{fixtures.Qwen36, "mtp.pre_fc_norm_embedding.weight", "hf", false, plan.NormsZeroCentred},
		{fixtures.GLM47Flash, "enorm.weight", "mlx", false, plan.NormsPlain},
		{fixtures.GLM45, "enorm.weight", "gguf", false, plan.NormsPlain},
		{fixtures.GLM45, "enorm.weight", "hf", false, plan.NormsPlain},
	}
	for _, c := range cases {
		t.Run(c.fixture+"/"+c.target, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(t.TempDir(), c.fixture)
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			testfs.LinkDir(t, fixtures.Ensure(t, c.fixture), src)
			if _, err := os.Stat(filepath.Join(src, "tokenizer.json")); err != nil { // the gguf target needs a vocabulary
				testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), src)
			}
			out := filepath.Join(t.TempDir(), "o")
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", c.target, "--out", out, "--quiet"); code != 0 {
				t.Fatalf("export: exit %d: %s", code, stderr)
			}
			man, err := manifests.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			card, err := os.ReadFile(filepath.Join(out, manifests.CardFile))
			if err != nil {
				t.Fatal(err)
			}
			if man.Model.NormConvention != c.sentence {
				t.Errorf("manifest says %q, want %q", man.Model.NormConvention, c.sentence)
			}
			if !strings.Contains(string(card), "- norm convention: "+c.sentence+"\n") {
				t.Errorf("the card does not say %q", c.sentence)
			}
			var rec *manifests.Tensor
			for i := range man.Tensors {
				if s := man.Tensors[i].Sources; len(s) == 1 && strings.HasSuffix(s[0], c.norm) {
					rec = &man.Tensors[i]
					break
				}
			}
			if rec == nil {
				t.Fatalf("no output tensor of %s", c.norm)
			}
			if _, has := rec.Has(manifests.TNormPlusOne); has != c.shifted {
				t.Errorf("%s: norm_plus_one recorded %v, want %v", rec.Name, has, c.shifted)
			}
			want := sourceValues(t, src, rec.Sources[0])
			got := storedValues(t, out, man, rec)
			if len(got) != len(want) {
				t.Fatalf("%s: %d values stored, %d in the source", rec.Name, len(got), len(want))
			}
			offBy := func(add float32) float64 { // the largest relative distance to w+add
				var worst float64
				for i := range got {
					e := float64(want[i] + add)
					worst = max(worst, math.Abs(float64(got[i])-e)/max(math.Abs(e), 1e-3))
				}
				return worst
			}
			asW, as1w := offBy(0), offBy(1)
			if shifted := as1w < 1e-2 && asW > 0.1; shifted != c.shifted || (!c.shifted && asW > 1e-2) {
				t.Errorf("%s stores %v; source %v (off w by %.3g, off 1+w by %.3g), want shifted %v", rec.Name, got[:4], want[:4], asW, as1w, c.shifted)
			}
		})
	}
}

// sourceValues reads a source tensor as float32.
func sourceValues(t *testing.T, dir, name string) []float32 {
	t.Helper()
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	tn := ck.Tensors[name]
	if tn == nil {
		t.Fatalf("source has no %s", name)
	}
	b, err := ck.ReadTensor(tn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return decodeF32(t, string(tn.DType), b)
}

// storedValues reads an output tensor's single entry as float32: where the
// file's own safetensors header places it, or (GGUF, OpenVINO .bin) where
// the manifest does.
func storedValues(t *testing.T, dir string, man *manifests.Manifest, rec *manifests.Tensor) []float32 {
	t.Helper()
	if len(rec.Entries) != 1 {
		t.Fatalf("%s: %d entries, want a float tensor's one", rec.Name, len(rec.Entries))
	}
	e := rec.Entries[0]
	f, err := os.Open(filepath.Join(dir, rec.File))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	begin, end := e.Offset, e.Offset+e.Size
	if strings.HasSuffix(rec.File, ".safetensors") {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		h, err := st.ReadHeader(f, fi.Size(), rec.File)
		if err != nil {
			t.Fatal(err)
		}
		info, ok := h.Lookup(e.Name)
		if !ok {
			t.Fatalf("%s: no %s in its header", rec.File, e.Name)
		}
		begin, end = info.Begin, info.End
	}
	b := make([]byte, end-begin)
	if _, err := f.ReadAt(b, begin); err != nil {
		t.Fatal(err)
	}
	return decodeF32(t, e.DType, b)
}

func decodeF32(t *testing.T, dtype string, b []byte) []float32 {
	t.Helper()
	size, err := st.DType(dtype).Size()
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, int64(len(b))/size)
	if err := quant.DecodeF32(dtype, b, v); err != nil {
		t.Fatal(err)
	}
	return v
}
