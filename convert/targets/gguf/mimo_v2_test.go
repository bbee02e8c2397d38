package gguf_test

import (
	"slices"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/internal/fixtures"
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
