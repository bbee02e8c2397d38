package model_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// GLM-5.2's head (glm-dsa): DeepSeek-V3.2's names with the DSA indexer
// (indexer.proj float32), and no nextn.embed_tokens or shared_head_head:
// the release's NextN layer has neither (llama.cpp uses the trunk's).
func TestGLM52GGUFNames(t *testing.T) {
	for _, fx := range []string{fixtures.GLM52, fixtures.GLM53} {
		t.Run(fx, func(t *testing.T) { wantGGUFNames(t, fx, glmDsaGGUFNames...) })
	}
}

var glmDsaGGUFNames = []string{
	"blk.2.attn_k_b.weight BF16", "blk.2.attn_kv_a_mqa.weight BF16", "blk.2.attn_kv_a_norm.weight F32",
	"blk.2.attn_norm.weight F32", "blk.2.attn_output.weight BF16", "blk.2.attn_q_a.weight BF16",
	"blk.2.attn_q_a_norm.weight F32", "blk.2.attn_q_b.weight BF16", "blk.2.attn_v_b.weight BF16",
	"blk.2.exp_probs_b.bias F32", "blk.2.ffn_down_exps.weight BF16", "blk.2.ffn_down_shexp.weight BF16",
	"blk.2.ffn_gate_exps.weight BF16", "blk.2.ffn_gate_inp.weight F32", "blk.2.ffn_gate_shexp.weight BF16",
	"blk.2.ffn_norm.weight F32", "blk.2.ffn_up_exps.weight BF16", "blk.2.ffn_up_shexp.weight BF16",
	"blk.2.indexer.attn_k.weight BF16", "blk.2.indexer.attn_q_b.weight BF16", "blk.2.indexer.k_norm.bias F32",
	"blk.2.indexer.k_norm.weight F32", "blk.2.indexer.proj.weight F32", "blk.2.nextn.eh_proj.weight BF16",
	"blk.2.nextn.enorm.weight F32", "blk.2.nextn.hnorm.weight F32", "blk.2.nextn.shared_head_norm.weight F32",
	"output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
}

// The fixture is described as the family: the indexer in the head's layer
// and in the full trunk layer only (layer 1 shares, and has none); combined
// and OpenVINO are refused naming the missing consumer; bad configs are
// refused naming the family and the key.
func TestGLM52Family(t *testing.T) {
	for _, fx := range []string{fixtures.GLM52, fixtures.GLM53} {
		t.Run(fx, func(t *testing.T) { glmDsaFamily(t, testmodel.Load(t, fx)) })
	}
	t.Run(fixtures.GLM53+" release", func(t *testing.T) {
		m := testmodel.Load(t, fixtures.GLM53)
		if f := m.FP8Info; f == nil || f.ScaleDType != "F32" || f.Weights == 0 || !slices.Contains(f.KeptBF16, "model.layers.2.self_attn.indexers_proj") {
			t.Errorf("block FP8 with float32 scales, weights_proj kept under the release's name: %+v", f)
		}
		if m.Config.HeadDim != model.KeysOf[model.DeepSeekConfig](m.Config).QKRopeHeadDim || m.Config.RopeTheta != 8e6 {
			t.Errorf("head_dim %d (GlmMoeDsaConfig's is qk_rope_head_dim, not the config's key), theta %v", m.Config.HeadDim, m.Config.RopeTheta)
		}
		for _, n := range []string{"model.layers.2.embed_tokens.weight", "model.layers.2.shared_head.head.weight"} {
			if _, ok := m.Checkpoint.Tensors[n]; ok {
				t.Errorf("%s: the release has none", n)
			}
		}
		if !slices.Contains(m.Family.HF.PlainVLLM, "self_attn.indexer.weights_proj") || !slices.Contains(m.Family.HF.PlainSGLang, "self_attn.indexer.weights_proj") {
			t.Error("both runtimes build the indexer's weights_proj unquantized")
		}
	})
	base := `{"architectures":["GlmMoeDsaForCausalLM"],"model_type":"glm_moe_dsa","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":1,"topk_group":1,"first_k_dense_replace":1,
"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"num_nextn_predict_layers":1,
"index_n_heads":4,"index_head_dim":64,"index_topk":8`
	for extra, want := range map[string]string{
		`}`:                                 "q_lora_rank is 0",
		`,"q_lora_rank":16,"index_topk":0}`: "index_topk is 0",
		`,"q_lora_rank":16,"scoring_func":"softmax"}`:                      "GLM-5.2 heads route experts by sigmoid",
		`,"q_lora_rank":16,"partial_rotary_factor":0.5}`:                   "GLM-5.2 heads rotate all qk_rope_head_dim dimensions",
		`,"q_lora_rank":16,"indexer_types":["full","shared"]}`:             "indexer_types has 2 entries for 3 layers (num_hidden_layers 3)",
		`,"q_lora_rank":16,"indexer_types":["shared","full","full"]}`:      "indexer_types[0] is \"shared\" with no full layer before it",
		`,"q_lora_rank":16,"indexer_types":["full","sparse","full"]}`:      "indexer_types[1] is \"sparse\"",
		`,"q_lora_rank":16,"quantization_config":{"quant_method":"gptq"}}`: "GLM-5.2 checkpoints in bf16 or in the block-FP8 layout",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
	// indexer_types as GlmMoeDsaConfig derives it: from index_topk_pattern, or
	// from index_topk_freq and index_skip_topk_offset (defaults: every layer full).
	for extra, want := range map[string][]string{
		`}`:                            {"full", "full", "full"},
		`,"index_topk_pattern":"FSF"}`: {"full", "shared", "full"},
		`,"index_topk_freq":2}`:        {"full", "full", "shared"},
		`,"index_topk_freq":2,"index_skip_topk_offset":1}`: {"full", "shared", "full"},
		// GLM-5.3's keys beside GLM-5.2's change nothing (head_dim is GlmMoeDsaConfig's qk_rope_head_dim).
		`,"head_dim":99,"qk_head_dim":16,"index_share_for_mtp_iteration":true,"indexer_rope_interleave":true,"rope_interleave":true,"moe_router_dtype":"float32","index_topk_pattern":null,"mlp_layer_types":["dense","sparse","sparse"]}`: {"full", "full", "full"},
	} {
		c, err := model.ParseConfig([]byte(base + `,"q_lora_rank":16` + extra))
		if err != nil || !slices.Equal(model.KeysOf[model.DeepSeekConfig](c).IndexerTypes, want) {
			t.Errorf("%s: %v %v, want %v", extra, err, c, want)
		}
	}
}

// glmDsaFamily: the fixture is described as the family: the indexer in the
// head's layer and in the full trunk layer only (layer 1 shares, and has
// none); combined and OpenVINO are refused naming the missing consumer.
func glmDsaFamily(t *testing.T, m *model.Model) {
	if m.Family.Name != "glm_moe_dsa" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	has := func(ws []model.Want, s string) bool {
		return slices.ContainsFunc(ws, func(w model.Want) bool { return w.Suffix == s })
	}
	const wk = "self_attn.indexer.wk.weight"
	if !has(m.Spec.TrunkLayer(0), wk) || has(m.Spec.TrunkLayer(1), wk) || !has(m.Spec.HeadLayer, wk) {
		t.Error("the indexer belongs to layer 0 (full) and the NextN layer, not to layer 1 (shared)")
	}
	if !strings.Contains(m.Spec.Report.Attention, "DSA indexer (4 heads of 64, top 2048; in 1 of 2 trunk layers") {
		t.Errorf("report: %s", m.Spec.Report.Attention)
	}
	if m.Family.GGUF.Arch != "glm-dsa" || m.Family.MLX.DrafterModelType != "glm_moe_dsa_mtp" || m.Family.HF.MTPClass == "" {
		t.Errorf("tables: %s %s %s", m.Family.GGUF.Arch, m.Family.MLX.DrafterModelType, m.Family.HF.MTPClass)
	}
	for target, want := range map[string]string{"combined": "loads no GLM-5.2 checkpoint with shared indexer layers", "openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
}

// The mlx-vlm drafter (glm_moe_dsa_mtp) in its splitter's names: the NextN
// layer's tensors under mtp. (shared_head.norm as shared_head_norm, the
// indexer kept, kv_b_proj absorbed, experts stacked), dtypes as stored (the
// correction bias float32); no embedding or lm_head of its own.
func TestGLM52DrafterNames(t *testing.T) {
	for _, fx := range []string{fixtures.GLM52, fixtures.GLM53} {
		t.Run(fx, func(t *testing.T) { glmDsaDrafterNames(t, testmodel.Load(t, fx)) })
	}
}

// glmDsaDrafterNames: an FP8 release's drafter holds its weights dequantized, in bf16.
func glmDsaDrafterNames(t *testing.T, m *model.Model) {
	got := testmodel.PlanNames(t, "mlx", m)
	want := map[string]string{"mtp.mlp.gate.e_score_correction_bias": "F32"}
	for _, n := range []string{"enorm", "hnorm", "eh_proj", "shared_head_norm", "input_layernorm", "post_attention_layernorm",
		"self_attn.q_a_proj", "self_attn.q_a_layernorm", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa",
		"self_attn.kv_a_layernorm", "self_attn.embed_q", "self_attn.unembed_out", "self_attn.o_proj",
		"self_attn.indexer.wq_b", "self_attn.indexer.wk", "self_attn.indexer.k_norm", "self_attn.indexer.weights_proj",
		"mlp.gate", "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj", "mlp.shared_experts.down_proj",
		"mlp.switch_mlp.gate_proj", "mlp.switch_mlp.up_proj", "mlp.switch_mlp.down_proj"} {
		want["mtp."+n+".weight"] = "BF16"
	}
	want["mtp.self_attn.indexer.k_norm.bias"] = "BF16"
	if len(got) != len(want) {
		t.Errorf("%d tensors, want %d: %v", len(got), len(want), got)
	}
	for n, d := range want {
		if got[n] != d {
			t.Errorf("%s: %q, want %q", n, got[n], d)
		}
	}
}
