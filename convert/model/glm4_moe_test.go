package model_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The GLM fixtures are described as their families: the NextN layer at
// num_hidden_layers is the head (its eh_proj, norms, shared head, own
// embedding copy and a whole MoE layer), the leading dense layers route no
// experts, nothing is missing.
func TestGLMFamiliesDescribeFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture, family string
		headTensors     int // non-expert head tensors
	}{
		{fixtures.GLM45, "glm4_moe", 22},
	} {
		m, err := model.Load(source.Dir(fixtures.Ensure(t, tc.fixture)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		if m.Family.Name != tc.family || m.MTPDepth != 1 {
			t.Fatalf("%s: family %s depth %d", tc.fixture, m.Family, m.MTPDepth)
		}
		if err := m.HeadError(); err != nil {
			t.Fatal(err)
		}
		if err := m.TrunkError(); err != nil {
			t.Fatal(err)
		}
		head := m.HeadTensors()
		if len(head) != tc.headTensors {
			t.Errorf("%s: %d head tensors: %v", tc.fixture, len(head), head)
		}
		n := m.Config.NumHiddenLayers
		for _, h := range head {
			if !strings.HasPrefix(h, "model.layers.3.") {
				t.Errorf("%s: head tensor %s outside model.layers.%d", tc.fixture, h, n)
			}
		}
		if len(m.TrunkExperts) != n-model.KeysOf[model.DeepSeekConfig](m.Config).FirstKDenseReplace || len(m.MTPExperts) != 1 {
			t.Errorf("%s: %d trunk expert blocks, %d MTP", tc.fixture, len(m.TrunkExperts), len(m.MTPExperts))
		}
	}
}

// Configs GLM's rules refuse, each with the key named; an FP8 release in a
// layout other than block FP8 is refused naming its quantization method.
func TestGLMConfigRefusals(t *testing.T) {
	base := `{"architectures":["Glm4MoeForCausalLM"],"model_type":"glm4_moe","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,"intermediate_size":96,
"moe_intermediate_size":16,"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":1,"topk_group":1,
"routed_scaling_factor":2.5,"first_k_dense_replace":1,"num_nextn_predict_layers":1,"attention_bias":true,"rms_norm_eps":1e-5`
	if _, err := model.ParseConfig([]byte(base + "}")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ extra, want string }{
		{`,"first_k_dense_replace":4`, "first_k_dense_replace 4"},
		{`,"n_group":3`, "do not split into the groups"},
		{`,"n_routed_experts":0`, "n_routed_experts"},
		{`,"scoring_func":"softmax"`, `scoring_func is "softmax"`},
		{`,"routed_scaling_factor":0`, "routed_scaling_factor is 0"},
		{`,"routed_scaling_factor":-1.5`, "routed_scaling_factor is -1.5"},
		{`,"quantization_config":{"quant_method":"compressed-tensors","format":"float-quantized"}`, `quant_method is "compressed-tensors"`},
	} {
		_, err := model.ParseConfig([]byte(base + tc.extra + "}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.extra, err)
		}
	}
}

// The families' llama.cpp architecture keys are the reference converter's,
// key for key and value for value (testdata/gguf_reference, recorded by
// interop/reference_gguf.py), deepseek2's for GLM-4.7-Flash included,
// which the gguf target does not write yet.
func TestGLMGGUFMetadataEqualsReference(t *testing.T) {
	for _, fx := range []string{fixtures.GLM45, fixtures.GLM47Flash} {
		m, err := model.Load(source.Dir(fixtures.Ensure(t, fx)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-bf16.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Metadata map[string]struct {
				Type  string `json:"type"`
				Value any    `json:"value"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		hp, err := m.Config.Hparams()
		if err != nil {
			t.Fatal(err)
		}
		base, own, err := m.GGUFMetadata(hp)
		if err != nil {
			t.Fatal(err)
		}
		ours := map[string]string{}
		for _, kv := range append(base, own...) {
			ours[kv.Key] = fmt.Sprint(kv.Value.V)
		}
		want := map[string]string{}
		for k, v := range rec.Metadata {
			if strings.HasPrefix(k, m.Family.GGUF.Arch+".") {
				if f, ok := v.Value.(float64); ok && v.Type == "FLOAT32" {
					want[k] = fmt.Sprint(float32(f))
				} else {
					want[k] = fmt.Sprint(v.Value)
				}
			}
		}
		if !reflect.DeepEqual(ours, want) {
			t.Errorf("%s:\n ours %v\n want %v", fx, ours, want)
		}
	}
}

// GLM-4.5's head (glm4moe): GQA with q/k/v biases (float32) and q/k norms,
// the score-correction bias as exp_probs_b.bias, the NextN layer's own
// embedding and shared head.
func TestGLM45GGUFNames(t *testing.T) {
	wantGGUFNames(t, fixtures.GLM45,
		"blk.3.attn_k.bias F32", "blk.3.attn_k.weight BF16", "blk.3.attn_k_norm.weight F32",
		"blk.3.attn_norm.weight F32", "blk.3.attn_output.weight BF16", "blk.3.attn_q.bias F32",
		"blk.3.attn_q.weight BF16", "blk.3.attn_q_norm.weight F32", "blk.3.attn_v.bias F32",
		"blk.3.attn_v.weight BF16", "blk.3.exp_probs_b.bias F32", "blk.3.ffn_down_exps.weight BF16",
		"blk.3.ffn_down_shexp.weight BF16", "blk.3.ffn_gate_exps.weight BF16", "blk.3.ffn_gate_inp.weight F32",
		"blk.3.ffn_gate_shexp.weight BF16", "blk.3.ffn_up_exps.weight BF16", "blk.3.ffn_up_shexp.weight BF16",
		"blk.3.nextn.eh_proj.weight BF16", "blk.3.nextn.embed_tokens.weight BF16", "blk.3.nextn.enorm.weight F32",
		"blk.3.nextn.hnorm.weight F32", "blk.3.nextn.shared_head_head.weight BF16", "blk.3.nextn.shared_head_norm.weight F32",
		"blk.3.post_attention_norm.weight F32", "output.weight BF16", "output_norm.weight F32",
		"token_embd.weight BF16",
	)
}

// A config of the lineage is refused in the words of the family the user
// has: GLM-4.5's scoring function is GLM-4.5/4.6/4.7's rule, GLM-4.7-Flash's
// its own.
func TestGLMRefusalsNameTheFamily(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{`{"architectures":["Glm4MoeForCausalLM"],"model_type":"glm4_moe",` + glmKeys + `,"scoring_func":"softmax"}`, "GLM-4.5/4.6/4.7 heads route experts by sigmoid"},
		{`{"architectures":["Glm4MoeLiteForCausalLM"],"model_type":"glm4_moe_lite",` + glmKeys + `,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"scoring_func":"softmax"}`, "GLM-4.7-Flash heads route experts by sigmoid"},
	} {
		_, err := model.ParseConfig([]byte(c.config))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

const glmKeys = `"hidden_size":64,"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,
"intermediate_size":96,"moe_intermediate_size":16,"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":1,
"topk_group":1,"first_k_dense_replace":1,"num_nextn_predict_layers":1`
