package model

import (
	"strings"
	"testing"
)

// The lineage's rules speak of the family the user has: a DeepSeek-V3
// config refused by a rule GLM shares is never described as GLM's, and the
// FP8 refusal is the family's own sentence.
func TestDeepSeekLineageNamesTheFamily(t *testing.T) {
	dsv3 := deepseekFamily{name: "DeepSeek-V3", defaults: ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 10000}, mla: true,
		quantRefusal: func(m string) string { return "DeepSeek-V3 is released in block FP8 only" }}
	base := `{"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":2,"topk_group":1,"first_k_dense_replace":1,
"q_lora_rank":16,"kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"num_nextn_predict_layers":1`
	c, err := parseDeepSeekConfig([]byte(base+"}"), dsv3)
	if err != nil {
		t.Fatal(err)
	}
	if KeysOf[DeepSeekConfig](c).NRoutedExperts != 8 || c.NumExperts != 8 || *KeysOf[DeepSeekConfig](c).QLoraRank != 16 || !deepseekMLA(c) {
		t.Errorf("config %+v %+v", c, KeysOf[DeepSeekConfig](c))
	}
	for _, tc := range []struct{ extra, want string }{
		{`,"scoring_func":"softmax"}`, `scoring_func is "softmax": DeepSeek-V3 heads route experts by sigmoid scores only`},
		{`,"quantization_config":{"quant_method":"awq"}}`, `quant_method is "awq": DeepSeek-V3 is released in block FP8 only`},
		{`,"n_group":3}`, "the experts do not split into the groups"},
		{`,"qk_rope_head_dim":7}`, "qk_rope_head_dim 7 is odd"},
	} {
		_, err := parseDeepSeekConfig([]byte(base+tc.extra), dsv3)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "GLM") {
			t.Errorf("%s: %v", tc.extra, err)
		}
	}
	if r := deepseekCombinedRefusal(dsv3.name); !strings.Contains(r, "DeepSeek-V3 checkpoints") || strings.Contains(r, "GLM") {
		t.Errorf("combined refusal %q", r)
	}
}
