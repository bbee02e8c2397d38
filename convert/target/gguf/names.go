package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// llama.cpp's tensor names (gguf-py's tensor map for the qwen35moe and
// qwen3next architectures, and the dense qwen35), from the Hugging Face suffixes under a decoder
// layer. The MTP layer j is block n_layer + j; the head's own tensors are
// that block's nextn.* tensors.
var layerNames = map[string]string{
	"input_layernorm.weight":             "attn_norm.weight",
	"post_attention_layernorm.weight":    "post_attention_norm.weight",
	"self_attn.q_proj.weight":            "attn_q.weight",
	"self_attn.k_proj.weight":            "attn_k.weight",
	"self_attn.v_proj.weight":            "attn_v.weight",
	"self_attn.o_proj.weight":            "attn_output.weight",
	"self_attn.q_norm.weight":            "attn_q_norm.weight",
	"self_attn.k_norm.weight":            "attn_k_norm.weight",
	"mlp.gate.weight":                    "ffn_gate_inp.weight",
	"mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
	"mlp.shared_expert.up_proj.weight":   "ffn_up_shexp.weight",
	"mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
	"mlp.shared_expert_gate.weight":      "ffn_gate_inp_shexp.weight",
	// qwen35's dense SwiGLU MLP.
	"mlp.gate_proj.weight": "ffn_gate.weight",
	"mlp.up_proj.weight":   "ffn_up.weight",
	"mlp.down_proj.weight": "ffn_down.weight",
}

// denseNames are the dense MLP's tensors, in the order the trunk writer emits them.
var denseNames = []string{"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}

// expertNames are the stacked gate, up and down experts.
var expertNames = [3]string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}

// headNames are the head's tensors outside its layers (mtp.fc, ...), as
// the reference converter remaps them: fc -> eh_proj, pre_fc_norm_embedding
// -> enorm, pre_fc_norm_hidden -> hnorm, norm -> shared_head.norm.
var headNames = map[string]string{
	"fc.weight":                    "nextn.eh_proj.weight",
	"pre_fc_norm_embedding.weight": "nextn.enorm.weight",
	"pre_fc_norm_hidden.weight":    "nextn.hnorm.weight",
	"norm.weight":                  "nextn.shared_head_norm.weight",
}

// headName maps a head tensor (name without the head prefix) to its GGUF
// name, given the trunk's layer count.
func headName(rest string, nLayer int) (string, error) {
	if g, ok := headNames[rest]; ok {
		return "blk." + strconv.Itoa(nLayer) + "." + g, nil
	}
	if after, ok := strings.CutPrefix(rest, "layers."); ok {
		j, suffix, ok := strings.Cut(after, ".")
		if n, err := strconv.Atoi(j); ok && err == nil {
			if g, ok := layerNames[suffix]; ok {
				return "blk." + strconv.Itoa(nLayer+n) + "." + g, nil
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
