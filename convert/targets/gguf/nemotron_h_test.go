package gguf_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// A block-FP8 Nemotron-H checkpoint (every 2-D linear weight, the experts,
// eh_proj and the latent projections included) gives the sidecar of its
// dequantized twin byte for byte, at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source.
func TestNemotronHFP8Sidecar(t *testing.T) {
	for _, prec := range []string{"bf16", "int8"} {
		var files [2][]byte
		for i, fx := range []string{fixtures.NemotronHMoEFP8, fixtures.NemotronHMoEFP8Dequant} {
			src := filepath.Join(t.TempDir(), "nemotron-h")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			testfs.LinkDir(t, fixtures.Ensure(t, fx), src)
			path := exportTo(t, src, prec)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files[i] = b
			if i > 0 {
				continue
			}
			m, err := model.Load(source.Dir(src))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := manifests.Verify(context.Background(), filepath.Dir(path), m.Checkpoint)
			m.Checkpoint.Close()
			if err != nil || !rep.OK || rep.Recomputed != rep.Tensors {
				t.Errorf("%s: verify --src: %v %+v", prec, err, rep)
			}
		}
		if !bytes.Equal(files[0], files[1]) {
			t.Errorf("%s: the FP8 source's sidecar differs from the dequantized twin's", prec)
		}
	}
}
