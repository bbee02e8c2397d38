package model_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

// DeepSeek-V3's head (deepseek2): GLM-4.7-Flash's names (MLA's kv_b_proj
// split into attn_k_b and attn_v_b, ffn_norm, the NextN layer's own
// embedding and shared head) at block 2 of the tiny fixture.
func TestDeepSeekV3GGUFNames(t *testing.T) {
	wantGGUFNames(t, fixtures.DeepSeekV3,
		"blk.2.attn_k_b.weight BF16", "blk.2.attn_kv_a_mqa.weight BF16", "blk.2.attn_kv_a_norm.weight F32",
		"blk.2.attn_norm.weight F32", "blk.2.attn_output.weight BF16", "blk.2.attn_q_a.weight BF16",
		"blk.2.attn_q_a_norm.weight F32", "blk.2.attn_q_b.weight BF16", "blk.2.attn_v_b.weight BF16",
		"blk.2.exp_probs_b.bias F32", "blk.2.ffn_down_exps.weight BF16", "blk.2.ffn_down_shexp.weight BF16",
		"blk.2.ffn_gate_exps.weight BF16", "blk.2.ffn_gate_inp.weight F32", "blk.2.ffn_gate_shexp.weight BF16",
		"blk.2.ffn_norm.weight F32", "blk.2.ffn_up_exps.weight BF16", "blk.2.ffn_up_shexp.weight BF16",
		"blk.2.nextn.eh_proj.weight BF16", "blk.2.nextn.embed_tokens.weight BF16", "blk.2.nextn.enorm.weight F32",
		"blk.2.nextn.hnorm.weight F32", "blk.2.nextn.shared_head_head.weight BF16", "blk.2.nextn.shared_head_norm.weight F32",
		"output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
	)
}

// The fixture is described as the family: the NextN layer at
// num_hidden_layers, MLA with q_lora, sigmoid routing over 2 groups; no
// MLX drafter, combined or OpenVINO consumer runs the head, and each
// target says so naming the family; a config the family's rules refuse is
// refused in DeepSeek's words, never GLM's.
func TestDeepSeekV3Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.DeepSeekV3)
	if m.Family.Name != "deepseek_v3" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if hf := m.Family.HF; hf.MTPClass != "deepseek_mtp" || hf.SGLangName(m.Config, "model.layers.2.shared_head.head") != "model.shared_head.head" {
		t.Errorf("hf table %+v", hf)
	}
	f := m.Spec.Forward(m)
	if at := f.Layers[0].Attention; at.Kind != model.AttnMLA || at.QLoraRank != 64 || at.KVB != "model.layers.2.self_attn.kv_b_proj.weight" {
		t.Errorf("attention %+v", at)
	}
	if mlp := f.Layers[0].MLP; mlp.Routing != model.RouteSigmoidGroupTopK || mlp.Groups != 2 || mlp.TopKGroups != 1 || mlp.ScalingFactor != 2.5 {
		t.Errorf("mlp %+v", mlp)
	}
	for target, want := range map[string]string{"mlx": "no drafter model for deepseek_v3", "combined": "NextN layer of DeepSeek-V3/V3.1/R1 checkpoints",
		"openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	base := `{"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":2,"topk_group":1,"first_k_dense_replace":1,
"q_lora_rank":16,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"num_nextn_predict_layers":1`
	for extra, want := range map[string]string{
		`,"scoring_func":"softmax"}`:                     "DeepSeek-V3/V3.1/R1 heads route experts by sigmoid scores only",
		`,"quantization_config":{"quant_method":"awq"}}`: "DeepSeek-V3's releases store block FP8",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "GLM") {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
