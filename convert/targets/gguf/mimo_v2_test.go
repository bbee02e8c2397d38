package gguf_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/hf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The FP8 release's sidecar is byte for byte that of its dequantized twin
// (qkv_proj stored unsharded there), at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source, the sharded qkv_proj included.
func TestMiMoV2FP8Sidecar(t *testing.T) {
	fp8SidecarEqualsTwin(t, fixtures.MiMoV25FP8, fixtures.MiMoV25FP8Dequant, "mimo-v2.5", func(t *testing.T, m *model.Model) {
		if r := m.RowShards("model.mtp.layers.1.self_attn.qkv_proj.weight"); r == nil || r.Shards != 4 || !slices.Equal(r.Parts, []int64{128, 128, 64}) {
			t.Errorf("qkv_proj shards: %+v", r)
		}
	})
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
