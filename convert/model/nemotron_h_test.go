package model_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Nemotron-H MoE's head (nemotron_h_moe): mtp.layers.0 (NextN fusion and
// attention) and mtp.layers.1 (MoE, final_layernorm) in one block 4, the
// experts stacked without a gate, the latent projections, the router bf16
// as the converter writes it.
func TestNemotronHGGUFNames(t *testing.T) {
	wantGGUFNames(t, fixtures.NemotronHMoE,
		"blk.4.attn_k.weight BF16", "blk.4.attn_norm.weight F32", "blk.4.attn_output.weight BF16", "blk.4.attn_q.weight BF16",
		"blk.4.attn_v.weight BF16", "blk.4.exp_probs_b.bias F32", "blk.4.ffn_down_exps.weight BF16", "blk.4.ffn_down_shexp.weight BF16",
		"blk.4.ffn_gate_inp.weight BF16", "blk.4.ffn_latent_down.weight BF16", "blk.4.ffn_latent_up.weight BF16",
		"blk.4.ffn_up_exps.weight BF16", "blk.4.ffn_up_shexp.weight BF16", "blk.4.nextn.eh_proj.weight BF16",
		"blk.4.nextn.enorm.weight F32", "blk.4.nextn.hnorm.weight F32", "blk.4.nextn.shared_head_norm.weight F32",
		"blk.4.post_attention_norm.weight F32", "output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
	)
}

// The fixture is described as the family (one MTP layer of two
// sub-layers, the trunk complete), the MLX drafter takes mlx-vlm's names
// (router float: --router-bits refused), combined and OpenVINO are refused (hf is planned)
// naming the missing consumer, and the dense Nemotron-H, other heads and
// bad configs are refused naming the family and the key.
func TestNemotronHFamily(t *testing.T) {
	m := testmodel.Load(t, fixtures.NemotronHMoE)
	if m.Family.Name != "nemotron_h" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil || len(m.MTPExperts) != 1 {
		t.Fatalf("family %s depth %d experts %d: %v %v", m.Family, m.MTPDepth, len(m.MTPExperts), m.HeadError(), m.TrunkError())
	}
	if got := m.HeadRelative("mtp.layers.1.mixer.gate.weight"); got != "layers.0.layers.1.mixer.gate.weight" || m.HeadName(got) != "mtp.layers.1.mixer.gate.weight" {
		t.Errorf("head names: %s", got)
	}
	if !strings.Contains(m.Spec.Report.Routing, "latent space of 64") || !strings.Contains(m.Spec.Report.Layers, "ME*E") {
		t.Errorf("report: %s / %s", m.Spec.Report.Layers, m.Spec.Report.Routing)
	}
	names := testmodel.PlanNames(t, "mlx", m)
	for _, n := range []string{"layers.0.enorm.weight", "layers.1.mixer.switch_mlp.fc1.weight", "layers.1.mixer.switch_mlp.fc2.weight", "layers.1.final_layernorm.weight"} {
		if _, ok := names[n]; !ok {
			t.Errorf("mlx drafter: no %s in %v", n, names)
		}
	}
	o := targets.Options{HeadPrecision: "int4", RouterBits: 8, Set: map[string]bool{targets.OptRouterBits: true, targets.OptHeadPrecision: true}}
	if _, err := testmodel.Plan(t, m, "mlx", o); err == nil || !strings.Contains(err.Error(), "keeps the routers float") {
		t.Errorf("--router-bits: %v", err)
	}
	for target, want := range map[string]string{"combined": "MTP head of Nemotron-H", "openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err != nil { // both runtimes' nemotron_h_mtp
		t.Errorf("--target hf: %v", err)
	}
	base := `{"architectures":["NemotronHForCausalLM"],"model_type":"nemotron_h","hidden_size":64,"num_hidden_layers":3,
"hybrid_override_pattern":"M*E","num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,
"mamba_num_heads":2,"mamba_head_dim":32,"n_groups":1,"ssm_state_size":16,"n_routed_experts":4,"moe_intermediate_size":16,
"moe_shared_expert_intermediate_size":16`
	if _, err := model.ParseConfig([]byte(base + `,"num_experts_per_tok":2,"num_nextn_predict_layers":1}`)); err != nil {
		t.Errorf("base: %v", err)
	}
	for extra, want := range map[string]string{
		`,"num_nextn_predict_layers":1}`:                                                                           "dense nemotron_h",
		`,"num_experts_per_tok":2}`:                                                                                "num_nextn_predict_layers is 0",
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":2}`:                                                   "num_nextn_predict_layers is 2",
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"mtp_hybrid_override_pattern":"*"}`:                 `mtp_hybrid_override_pattern is "*"`,
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"hybrid_override_pattern":"M-E"}`:                   `has a '-' layer`,
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"hybrid_override_pattern":"M*EE"}`:                  "hybrid_override_pattern has 4 entries for 3 layers (num_hidden_layers 3)",
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"quantization_config":{"quant_method":"modelopt"}}`: `"modelopt": Nemotron-H's quantized releases`,
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"moe_latent_size":0}`:                               "moe_latent_size is 0",
		`,"num_experts_per_tok":2,"num_nextn_predict_layers":1,"mlp_hidden_act":"silu"}`:                           "ReLU²",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
