package model_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/hf"
)

// Hy3's head (hy_v3): three chained MTP layers, blocks 2, 3 and 4, each a
// whole MoE decoder layer with q/k norms, its expert bias named bare
// (blk.N.exp_probs_b) and float32, its final_layernorm as
// nextn.shared_head_norm; no embedding or LM head of its own.
func TestHy3GGUFNames(t *testing.T) {
	want := []string{"output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16"}
	for b := 2; b <= 4; b++ {
		for _, n := range []string{"attn_k.weight BF16", "attn_k_norm.weight F32", "attn_norm.weight F32", "attn_output.weight BF16",
			"attn_q.weight BF16", "attn_q_norm.weight F32", "attn_v.weight BF16", "exp_probs_b F32", "ffn_down_exps.weight BF16",
			"ffn_down_shexp.weight BF16", "ffn_gate_exps.weight BF16", "ffn_gate_inp.weight F32", "ffn_gate_shexp.weight BF16",
			"ffn_norm.weight F32", "ffn_up_exps.weight BF16", "ffn_up_shexp.weight BF16", "nextn.eh_proj.weight BF16",
			"nextn.enorm.weight F32", "nextn.hnorm.weight F32", "nextn.shared_head_norm.weight F32"} {
			want = append(want, "blk."+strconv.Itoa(b)+"."+n)
		}
	}
	wantGGUFNames(t, fixtures.Hy3, want...)
}

// The fixture is described as the family (3 MTP layers, the routing's
// keys), MLX, combined and OpenVINO are refused naming the missing
// consumer, hf is planned, and bad configs are refused naming the family or the key.
func TestHy3Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.Hy3)
	if m.Family.Name != "hy_v3" || m.MTPDepth != 3 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if r := m.Spec.Report; !strings.Contains(r.Routing, "expert_bias for the choice, weights renormalised, scaled by 2.826") ||
		!strings.Contains(r.Layers, "2 (1 dense MLP, 1 MoE)") {
		t.Errorf("report %+v", r)
	}
	for target, want := range map[string]string{"mlx": "mlx-vlm has no drafter model for hy_v3", "combined": "stock mlx-lm has no hy_v3 model",
		"openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err != nil { // vLLM's hy_v3_mtp, SGLang's hunyuan_v3_nextn
		t.Errorf("--target hf: %v", err)
	}
	base := `{"architectures":["HYV3ForCausalLM"],"model_type":"hy_v3","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"num_experts":8,"num_experts_per_tok":2,"num_nextn_predict_layers":1`
	if c, err := model.ParseConfig([]byte(base + `}`)); err != nil || c.SharedExpertIntermed != 16 || c.RopeTheta != 11158840 {
		t.Fatalf("defaults: %v %+v", err, c)
	}
	for extra, want := range map[string]string{
		`,"num_experts":0}`:                               "num_experts is 0",
		`,"num_shared_experts":0}`:                        "num_shared_experts is 0",
		`,"attention_bias":true}`:                         "Hy3 heads have no biases",
		`,"first_k_dense_replace":4}`:                     "first_k_dense_replace 4 is outside [0, num_hidden_layers 3]",
		`,"mlp_layer_types":["sparse","dense","sparse"]}`: "Hy3 takes leading dense layers only",
		`,"router_scaling_factor":0}`:                     "router_scaling_factor is 0",
		`,"partial_rotary_factor":0.5}`:                   "Hy3 rotates the whole head",
		`,"quantization_config":{"quant_method":"awq"}}`:  `quant_method is "awq": Hy3 is read in bf16 or block FP8`,
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
