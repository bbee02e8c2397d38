package model_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// DeepSeek-V3.2's head (deepseek32): DeepSeek-V3's names plus the DSA
// indexer's (indexer.proj float32 as the converter writes it, k_norm's
// weight and bias float32).
func TestDeepSeekV32GGUFNames(t *testing.T) {
	wantGGUFNames(t, fixtures.DeepSeekV32,
		"blk.2.attn_k_b.weight BF16", "blk.2.attn_kv_a_mqa.weight BF16", "blk.2.attn_kv_a_norm.weight F32",
		"blk.2.attn_norm.weight F32", "blk.2.attn_output.weight BF16", "blk.2.attn_q_a.weight BF16",
		"blk.2.attn_q_a_norm.weight F32", "blk.2.attn_q_b.weight BF16", "blk.2.attn_v_b.weight BF16",
		"blk.2.exp_probs_b.bias F32", "blk.2.ffn_down_exps.weight BF16", "blk.2.ffn_down_shexp.weight BF16",
		"blk.2.ffn_gate_exps.weight BF16", "blk.2.ffn_gate_inp.weight F32", "blk.2.ffn_gate_shexp.weight BF16",
		"blk.2.ffn_norm.weight F32", "blk.2.ffn_up_exps.weight BF16", "blk.2.ffn_up_shexp.weight BF16",
		"blk.2.indexer.attn_k.weight BF16", "blk.2.indexer.attn_q_b.weight BF16", "blk.2.indexer.k_norm.bias F32",
		"blk.2.indexer.k_norm.weight F32", "blk.2.indexer.proj.weight F32", "blk.2.nextn.eh_proj.weight BF16",
		"blk.2.nextn.embed_tokens.weight BF16", "blk.2.nextn.enorm.weight F32", "blk.2.nextn.hnorm.weight F32",
		"blk.2.nextn.shared_head_head.weight BF16", "blk.2.nextn.shared_head_norm.weight F32", "output.weight BF16",
		"output_norm.weight F32", "token_embd.weight BF16",
	)
}

// The fixture is described as the family (the indexer in the head's
// layer), MLX, combined and OpenVINO are refused naming the family or the
// missing consumer, and a config without the query latent the indexer
// reads is refused naming the key.
func TestDeepSeekV32Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.DeepSeekV32)
	if m.Family.Name != "deepseek_v32" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if _, ok := m.Checkpoint.Tensors["model.layers.2.self_attn.indexer.weights_proj.weight"]; !ok || !strings.Contains(m.Spec.Report.Attention, "DSA indexer (4 heads of 64, top 2048") {
		t.Errorf("indexer: %s", m.Spec.Report.Attention)
	}
	for target, want := range map[string]string{"mlx": "no drafter model for deepseek_v32", "combined": "NextN layer of DeepSeek-V3.2 checkpoints",
		"openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	base := `{"architectures":["DeepseekV32ForCausalLM"],"model_type":"deepseek_v32","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":2,"topk_group":1,"first_k_dense_replace":1,
"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"num_nextn_predict_layers":1,
"index_n_heads":4,"index_head_dim":64,"index_topk":8`
	for extra, want := range map[string]string{
		`}`:                                 "q_lora_rank is 0",
		`,"q_lora_rank":16,"index_topk":0}`: "index_topk is 0",
		`,"q_lora_rank":16,"scoring_func":"softmax"}`: "DeepSeek-V3.2 heads route experts by sigmoid",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
