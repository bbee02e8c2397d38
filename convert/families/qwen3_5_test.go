package families_test

import "testing"

// The dense Qwen3.5/3.6 head (qwen35): a SwiGLU MLP in the MTP layer, no experts; the head's own tensors (mtp.fc, its norms) as nextn.*.
func TestQwen35DenseGGUFNames(t *testing.T) {
	wantGGUFNames(t, "qwen3.6-dense-tiny",
		"blk.4.attn_k.weight BF16", "blk.4.attn_k_norm.weight F32", "blk.4.attn_norm.weight F32",
		"blk.4.attn_output.weight BF16", "blk.4.attn_q.weight BF16", "blk.4.attn_q_norm.weight F32",
		"blk.4.attn_v.weight BF16", "blk.4.ffn_down.weight BF16", "blk.4.ffn_gate.weight BF16",
		"blk.4.ffn_up.weight BF16", "blk.4.nextn.eh_proj.weight BF16", "blk.4.nextn.enorm.weight F32",
		"blk.4.nextn.hnorm.weight F32", "blk.4.nextn.shared_head_norm.weight F32", "blk.4.post_attention_norm.weight F32",
		"output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
	)
}
