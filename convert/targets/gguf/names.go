package gguf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// expertNames are the stacked gate, up and down experts.
var expertNames = [3]string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}

// headName maps a head tensor (name without the head prefix) to its GGUF
// name by the family's tables, given the trunk's layer count: the MTP
// layer j is block n_layer + j, the head's own tensors are block n_layer's.
func headName(g model.GGUFSpec, rest string, nLayer int) (string, error) {
	if n, ok := g.HeadTop[rest]; ok {
		return "blk." + strconv.Itoa(nLayer) + "." + n, nil
	}
	if after, ok := strings.CutPrefix(rest, "layers."); ok {
		j, suffix, ok := strings.Cut(after, ".")
		if n, err := strconv.Atoi(j); ok && err == nil {
			if name, ok := g.Layer[suffix]; ok {
				return "blk." + strconv.Itoa(nLayer+n) + "." + name, nil
			}
		}
	}
	return "", fmt.Errorf("no GGUF name for MTP tensor %q", rest)
}

// f32Tensor reports the tensors the reference converter always writes in
// float32: one-dimensional ones, norms, and the MoE router and shared-expert
// gate (FFN_GATE_INP, FFN_GATE_INP_SHEXP).
func f32Tensor(name string, dims int) bool {
	return dims <= 1 || strings.HasSuffix(name, "_norm.weight") ||
		strings.HasSuffix(name, ".ffn_gate_inp.weight") || strings.HasSuffix(name, ".ffn_gate_inp_shexp.weight")
}

// quantizable is llama-quantize's tensor_allows_quantization for these
// architectures: two or more dimensions, a name ending in "weight", no
// norm, not the MoE router (ffn_gate_inp.weight; the shared-expert gate
// ffn_gate_inp_shexp.weight is quantized).
func quantizable(name string, dims int) bool {
	return dims >= 2 && strings.HasSuffix(name, "weight") && !strings.Contains(name, "_norm.weight") &&
		!strings.Contains(name, "ffn_gate_inp.weight")
}
