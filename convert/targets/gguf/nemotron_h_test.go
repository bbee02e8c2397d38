package gguf_test

import (
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// A block-FP8 Nemotron-H checkpoint (every 2-D linear weight, the experts,
// eh_proj and the latent projections included) gives the sidecar of its
// dequantized twin byte for byte, at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source.
func TestNemotronHFP8Sidecar(t *testing.T) {
	fp8SidecarEqualsTwin(t, fixtures.NemotronHMoEFP8, fixtures.NemotronHMoEFP8Dequant, "nemotron-h", nil)
}
