package families_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/hf"
)

// Ling-3.0's head (bailingmoe3): one full-attention MTP layer, block 2, with
// head-wise gated multi-head latent attention (attn_gate; kv_b_proj split
// into attn_k_b and attn_v_b), the expert bias as exp_probs_b.bias, float32,
// final_layernorm as layer_output_norm; no embedding or LM head of its own.
func TestLing3GGUFNames(t *testing.T) {
	wantGGUFNames(t, fixtures.Ling3,
		"blk.2.attn_gate.weight BF16", "blk.2.attn_k_b.weight BF16", "blk.2.attn_kv_a_mqa.weight BF16", "blk.2.attn_kv_a_norm.weight F32",
		"blk.2.attn_norm.weight F32", "blk.2.attn_output.weight BF16", "blk.2.attn_q_a.weight BF16", "blk.2.attn_q_a_norm.weight F32",
		"blk.2.attn_q_b.weight BF16", "blk.2.attn_v_b.weight BF16", "blk.2.exp_probs_b.bias F32", "blk.2.ffn_down_exps.weight BF16",
		"blk.2.ffn_down_shexp.weight BF16", "blk.2.ffn_gate_exps.weight BF16", "blk.2.ffn_gate_inp.weight F32",
		"blk.2.ffn_gate_shexp.weight BF16", "blk.2.ffn_norm.weight F32", "blk.2.ffn_up_exps.weight BF16", "blk.2.ffn_up_shexp.weight BF16",
		"blk.2.layer_output_norm.weight F32", "blk.2.nextn.eh_proj.weight BF16", "blk.2.nextn.enorm.weight F32",
		"blk.2.nextn.hnorm.weight F32", "output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
	)
}

// The fixture is described as the family (a KDA layer and a full-attention
// one, the MTP layer full attention), MLX, combined, OpenVINO and hf are
// refused naming what is missing, and bad configs are refused naming the
// family or the key (the reference converter's own refusals among them).
func TestLing3Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.Ling3)
	if m.Family.Name != "bailing_moe_v3" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if r := m.Spec.Report; !strings.Contains(r.Layers, "2 (1 full attention, 1 KDA; 1 dense MLP, 1 MoE)") ||
		!strings.Contains(r.Routing, "n_group 2, topk_group 1") {
		t.Errorf("report %+v", r)
	}
	for target, want := range map[string]string{"mlx": "mlx-vlm has no drafter model for bailing_moe_v3",
		"combined": "drops the MTP layer of Ling-3.0", "openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	base := `{"architectures":["BailingMoeV3ForCausalLM"],"model_type":"bailing_moe_v3","hidden_size":64,"num_hidden_layers":4,
"num_attention_heads":4,"head_dim":16,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"moe_shared_expert_intermediate_size":16,"num_experts":8,"num_experts_per_tok":2,"n_group":2,"topk_group":1,
"routed_scaling_factor":2.5,"norm_topk_prob":true,"first_k_dense_replace":1,"layer_group_size":4,"short_conv_kernel_size":4,
"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"num_nextn_predict_layers":1,"kda_lower_bound":-5`
	good := `,"no_kda_lora":true,"kda_safe_gate":true,"gated_attention_proj_granularity_type":"head_wise","score_function":"sigmoid"`
	c, err := model.ParseConfig([]byte(base + good + `}`))
	if err != nil || strings.Join(c.LayerTypes, ",") != "linear_attention,linear_attention,linear_attention,full_attention" {
		t.Fatalf("layers: %v %v", err, c)
	}
	for extra, want := range map[string]string{
		`,"kda_safe_gate":true,"gated_attention_proj_granularity_type":"head_wise","score_function":"sigmoid"}`:                       "no_kda_lora is false",
		`,"no_kda_lora":true,"gated_attention_proj_granularity_type":"head_wise","score_function":"sigmoid"}`:                         "kda_safe_gate is false",
		`,"no_kda_lora":true,"kda_safe_gate":true,"gated_attention_proj_granularity_type":"element_wise","score_function":"sigmoid"}`: "Ling-3.0's attention gates are head-wise",
		good + `,"score_function":"softmax"}`:                    "Ling-3.0 heads route experts by sigmoid",
		good + `,"layer_group_size":0}`:                          "layer_group_size is 0",
		good + `,"n_group":3}`:                                   "the experts do not split into the groups",
		good + `,"mrope_section":[4,2,2]}`:                       "vision-language model's head is not written yet",
		good + `,"quantization_config":{"quant_method":"gptq"}}`: `quant_method is "gptq": Ling-3.0 is read in bf16 or block FP8`,
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
