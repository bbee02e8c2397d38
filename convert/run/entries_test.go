package run

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// misEncoder wraps a tensor's encoder and gets its bytes wrong the way an
// encoder that disagrees with the plan does.
type misEncoder struct {
	codec.Encoder
	wrong func([]codec.Piece) []codec.Piece
}

func (e misEncoder) Encode(vals []float32, rows int64, qe *quant.ErrStats, bufs *codec.Bufs) []codec.Piece {
	return e.wrong(e.Encoder.Encode(vals, rows, qe, bufs))
}

// An encoder whose bytes do not fill the tensor's planned entries exactly
// (too few bytes, pieces counted in other rows than the plan's: the hang of
// a transposed tensor quantized along its stored rows while its chunks were
// placed by source rows) fails the run with an error naming the tensor and
// the entry. Before, the tensor finished, and the file's hasher waited
// forever for the bytes no chunk wrote.
func TestEntriesNotFilledFailFast(t *testing.T) {
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.GLM47Flash)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	// The head, every weight quantized at 4 bits in groups of 32, kv_b_proj
	// as its two halves (the key half transposed): the targets' importers
	// import this package, so the plan is made here.
	q := &plan.Quant{Mode: codec.ModeMLXAffine, Bits: 4, GroupSize: 32, Rounding: "cpu"}
	rule := func(_, _ string, in int64) *plan.Quant {
		if in%32 != 0 {
			return nil
		}
		return q
	}
	pl := &plan.Planner{M: m, File: "model.safetensors"}
	mla := m.MLAKVB()
	for n, at := range mla {
		pl.SplitKVB(n, at, "embed_q.weight", "unembed_out.weight", func(o plan.OutTensor) {
			o.DType = "BF16"
			pl.Add(o, rule(n, o.Name, o.StoredRow()))
		})
	}
	pl.Head(func(s string) string { return s }, "BF16", rule, func(n string) bool { _, ok := mla[n]; return !ok })
	p := &plan.Plan{Target: "test", Tensors: pl.Out, TensorFiles: []string{pl.File}, Metadata: map[string]string{"format": "mlx"}}
	if err := p.Validate(m.Checkpoint); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		what   string
		tensor string
		wrong  func([]codec.Piece) []codec.Piece
		want   string
	}{
		{"a byte short", "layers.0.mlp.switch_mlp.up_proj.weight", func(ps []codec.Piece) []codec.Piece {
			ps[0].Data = ps[0].Data[:len(ps[0].Data)-1]
			return ps
		}, "entry layers.0.mlp.switch_mlp.up_proj.weight: produced"},
		{"rows of half the planned length", "embed_q.weight", func(ps []codec.Piece) []codec.Piece {
			for i := range ps {
				ps[i].Num /= 2
			}
			return ps
		}, "entry embed_q.weight: produced"},
		{"an entry not planned", "layers.0.eh_proj.weight", func(ps []codec.Piece) []codec.Piece {
			ps[0].Name = "layers.0.eh_proj.extra"
			return ps
		}, "not planned"},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			fr, err := openFileRun(m.Checkpoint, p, t.TempDir(), "model.safetensors", 1000, func(FileRecord) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, s := range fr.states {
				if s.t.Name == c.tensor {
					s.qz, found = misEncoder{s.qz, c.wrong}, true
				}
			}
			if !found {
				t.Fatalf("%s is not a quantized tensor of the plan", c.tensor)
			}
			// As Run does: on failure the file is abandoned, else its hash awaited.
			done := make(chan error, 1)
			go func() {
				if err := runChunks(context.Background(), m.Checkpoint, fr.states, RunOptions{Jobs: 2}); err != nil {
					fr.fh.stop()
					fr.abandon()
					done <- err
					return
				}
				<-fr.done
				done <- fr.err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "tensor "+c.tensor) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), disagree) {
					t.Fatalf("got %v, want an error naming %s and %q", err, c.tensor, c.want)
				}
				t.Log(err)
			case <-time.After(20 * time.Second):
				t.Fatal("the run hung: a tensor's bytes did not fill its planned entries")
			}
		})
	}
}
