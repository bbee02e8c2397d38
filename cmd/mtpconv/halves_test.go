package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// Every family's concat projection, quantized, records the error of its
// embedding and hidden halves on their own (quant_error.parts), and verify
// --src recomputes both: Nemotron-H's recorded none, so an nvfp4 head whose
// embedding half rounds to zero was written and verified clean.
func TestConcatHalvesEveryFamily(t *testing.T) {
	t.Parallel()
	for family, fixture := range familyFixtures(t) {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			src := fixtures.Ensure(t, fixture)
			sm, err := model.Load(source.Dir(src))
			if err != nil {
				t.Fatal(err)
			}
			sm.Checkpoint.Close()
			rel, ok := sm.ConcatProjection()
			// The halves in the projection's input order: embedding first but
			// for Inkling's [hidden, embedding].
			order := health.PartEmbedding + "," + health.PartHidden
			if first, _ := sm.Concat(sm.HeadName(rel)); ok && !first {
				order = health.PartHidden + "," + health.PartEmbedding
			}
			if !ok && !sm.ConcatSplit() {
				if sm.Family.GGUF.Arch == "dflash" {
					return // a block draft projects the target's hidden states alone (DSpark's main_proj): no embedding half
				}
				t.Fatal("no concat projection in the family's tables")
			}
			args := []string{"--target", "mlx", "--head-precision", "int8"}
			// The one head file written keeps the release's storage (Hy4's
			// drafter): the projection as stored, no quantization error to split.
			asStored := sm.Family.MLX.DrafterKeepsStorage && sm.Family.GGUF.Refusal != ""
			switch {
			case asStored:
				args = []string{"--target", "mlx"}
			case sm.Family.GGUF.StoredTypes: // the sidecar's one form: its joined halves Q8_0 (DeepSeek-V4)
				args = []string{"--target", "gguf"}
			case sm.Family.MLX.DrafterModelType == "":
				args = []string{"--target", "gguf", "--gguf-type", "Q8_0"}
			}
			joined := args[1] == "gguf" && len(sm.Family.GGUF.Joins) > 0 // the halves quantized as one tensor
			out := filepath.Join(t.TempDir(), "out")
			if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--quiet"}, args...)...); code != 0 {
				t.Fatalf("export %v: %s", args, stderr)
			}
			m, err := manifests.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			halves := 0
			for _, tr := range m.Tensors {
				if q := tr.QuantError; q != nil && len(q.Parts) == 2 {
					names := q.Parts[0].Name + "," + q.Parts[1].Name
					if names != order || q.Parts[0].Rows == 0 || q.Parts[0].RelRMS <= 0 {
						t.Errorf("%s: parts %+v", tr.Name, q.Parts)
					}
					halves++
				}
			}
			if asStored {
				name, found := rel, false
				if f := sm.Family.MLX.DrafterName; f != nil {
					name = f(rel)
				}
				for _, tr := range m.Tensors {
					if tr.Name == name {
						found = true
						if tr.QuantError != nil || len(tr.Transforms) != 0 {
							t.Errorf("%s: %+v %+v: the projection is written as the release stores it", tr.Name, tr.Transforms, tr.QuantError)
						}
					}
				}
				if !found {
					t.Errorf("the projection %s is not in the drafter", name)
				}
				return
			}
			if !ok && !joined { // the halves are tensors of their own (fc_embedding, fc_hidden): each records its error whole
				for _, tr := range m.Tensors {
					if q := tr.QuantError; q != nil && len(q.Parts) != 0 {
						t.Errorf("%s records parts %+v: the family's halves are tensors of their own", tr.Name, q.Parts)
					}
				}
				return
			}
			if halves == 0 {
				t.Fatalf("%v: no tensor records its halves' errors", args)
			}
			code, stdout, _ := runCLI(t, "verify", out, "--src", src)
			if code != 0 || !strings.Contains(stdout, "quantization error (relative RMS) "+strings.Split(order, ",")[0]+" half") {
				t.Errorf("verify --src: exit %d\n%s", code, stdout)
			}
		})
	}
}
