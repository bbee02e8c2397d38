package families_test

import "testing"

// The Qwen3-Next head (qwen3next): the same names as Qwen3.5-MoE's, from per-expert tensors stacked.
func TestQwen3NextGGUFNames(t *testing.T) {
	wantGGUFNames(t, "qwen3-next-tiny",
		"blk.4.attn_k.weight BF16", "blk.4.attn_k_norm.weight F32", "blk.4.attn_norm.weight F32",
		"blk.4.attn_output.weight BF16", "blk.4.attn_q.weight BF16", "blk.4.attn_q_norm.weight F32",
		"blk.4.attn_v.weight BF16", "blk.4.ffn_down_exps.weight BF16", "blk.4.ffn_down_shexp.weight BF16",
		"blk.4.ffn_gate_exps.weight BF16", "blk.4.ffn_gate_inp.weight F32", "blk.4.ffn_gate_inp_shexp.weight F32",
		"blk.4.ffn_gate_shexp.weight BF16", "blk.4.ffn_up_exps.weight BF16", "blk.4.ffn_up_shexp.weight BF16",
		"blk.4.nextn.eh_proj.weight BF16", "blk.4.nextn.enorm.weight F32", "blk.4.nextn.hnorm.weight F32",
		"blk.4.nextn.shared_head_norm.weight F32", "blk.4.post_attention_norm.weight F32", "output.weight BF16",
		"output_norm.weight F32", "token_embd.weight BF16",
	)
}
