package gguf_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/hf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// The FP8 release's sidecar is byte for byte that of its dequantized twin
// (qkv_proj stored unsharded there), at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source, the sharded qkv_proj included.
func TestMiMoV2FP8Sidecar(t *testing.T) {
	for _, prec := range []string{"bf16", "int8"} {
		var files [2][]byte
		for i, fx := range []string{fixtures.MiMoV25FP8, fixtures.MiMoV25FP8Dequant} {
			src := filepath.Join(t.TempDir(), "mimo-v2.5")
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
			if r := m.RowShards("model.mtp.layers.1.self_attn.qkv_proj.weight"); r == nil || r.Shards != 4 || !slices.Equal(r.Parts, []int64{128, 128, 64}) {
				t.Errorf("qkv_proj shards: %+v", r)
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

// --target hf refuses MiMo-V2 with its one sentence (vLLM builds one of the
// 3 layers), and inspect's serving report says it is not judged rather than
// failing the FP8 release's modules it cannot model.
func TestMiMoV2HFRefused(t *testing.T) {
	m := testmodel.Load(t, fixtures.MiMoV25)
	const why = "MiMoV2MTP runs the first of MiMo-V2's 3 MTP layers only"
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("--target hf: %v", err)
	}
	fp8 := testmodel.Load(t, fixtures.MiMoV25FP8)
	r, err := hf.Serving(fp8)
	if err != nil || !strings.Contains(r.NotJudged, why) || r.Err() != nil || r.TensorDepth != 3 {
		t.Errorf("serving report: %v %+v", err, r)
	}
}
