package model

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// The base keys are TextModel.set_gguf_parameters's, in its order, from
// the values the configuration class has: every branch of its RoPE
// scaling, the gating function from the scoring function's name, keys
// present but null left out, a family's key set again kept in place.
func TestGGUFBaseKeys(t *testing.T) {
	common := `"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-6,"rope_theta":10000`
	for _, c := range []struct {
		name, json string
		own        func(m *Model, h Hparams, g *GGUFKeys) error
		want       string // base keys, then "|" and the own ones
		err        string
	}{
		{name: "plain", json: `{` + common + `,"max_position_embeddings":4096,"intermediate_size":256}`,
			want: "block_count=3 context_length=4096 embedding_length=64 feed_forward_length=256 attention.head_count=4 attention.head_count_kv=2 rope.freq_base=10000 attention.layer_norm_rms_epsilon=1e-06 |"},
		{name: "yarn", json: `{` + common + `,"rope_scaling":{"type":"yarn","factor":40,"original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1,"mscale_all_dim":1}}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.scaling.type=yarn rope.scaling.factor=40 rope.scaling.original_context_length=4096 rope.scaling.yarn_beta_fast=32 rope.scaling.yarn_beta_slow=1 rope.freq_base=10000 attention.layer_norm_rms_epsilon=1e-06 |"},
		{name: "yarn without its original context", json: `{` + common + `,"rope_scaling":{"rope_type":"yarn","factor":4}}`, err: "original_max_position_embeddings"},
		{name: "linear, per attention kind", json: `{` + common + `,"rope_parameters":{"full_attention":{"rope_type":"linear","factor":2,"rope_theta":5e6},"sliding_attention":{"rope_theta":1e4}}}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.scaling.type=linear rope.scaling.factor=2 rope.freq_base=5e+06 rope.freq_base_swa=10000 attention.layer_norm_rms_epsilon=1e-06 |"},
		{name: "longrope, local theta mirrored", json: `{` + common + `,"rope_scaling":{"type":"longrope"},"local_rope_theta":500}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.scaling.type=longrope rope.freq_base=10000 rope.freq_base_swa=500 attention.layer_norm_rms_epsilon=1e-06 |"},
		{name: "sigmoid groups, null q_lora_rank", json: `{` + common + `,"n_routed_experts":8,"num_experts_per_tok":2,"n_group":2,"topk_group":1,"scoring_func":"sigmoid","head_dim":16,"max_position_embeddings":null}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.freq_base=10000 attention.layer_norm_rms_epsilon=1e-06 expert_count=8 expert_used_count=2 expert_group_count=2 expert_group_used_count=1 expert_gating_func=2 attention.key_length=16 attention.value_length=16 |"},
		{name: "softmax", json: `{` + common + `,"scoring_func":"softmax"}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.freq_base=10000 attention.layer_norm_rms_epsilon=1e-06 expert_gating_func=1 |"},
		{name: "unknown scoring", json: `{` + common + `,"scoring_func":"tanh"}`, err: "scoring function tanh"},
		{name: "a family's key set again stays in place", json: `{` + common + `,"head_dim":16}`,
			own: func(m *Model, h Hparams, g *GGUFKeys) error {
				g.U32("attention.key_length", 80)
				g.U32("nextn_predict_layers", m.MTPDepth)
				return nil
			},
			want: "block_count=3 embedding_length=64 attention.head_count=4 attention.head_count_kv=2 rope.freq_base=10000 attention.layer_norm_rms_epsilon=1e-06 attention.key_length=80 attention.value_length=16 | nextn_predict_layers=1"},
		{name: "class defaults", json: `{"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4}`,
			want: "block_count=3 embedding_length=64 attention.head_count=4 rope.freq_base=1e+06 attention.layer_norm_rms_epsilon=1e-05 |"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Model{Config: &Config{NumHiddenLayers: 2, RopeTheta: 1e6, RMSNormEps: 1e-5, Raw: []byte(c.json)}, MTPDepth: 1,
				Spec: &Spec{}, Family: &Family{GGUF: GGUFSpec{Arch: "a", Metadata: c.own}}}
			h, err := m.Config.Hparams()
			if err != nil {
				t.Fatal(err)
			}
			base, own, err := m.GGUFMetadata(h)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(keysString(base) + " | " + keysString(own)); got != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

func keysString(kvs []gg.KV) string {
	var b strings.Builder
	for _, kv := range kvs {
		v := kv.Value.V
		if f, ok := v.(float32); ok {
			v = json.Number(fmt.Sprint(f))
		}
		fmt.Fprintf(&b, "%s=%v ", strings.TrimPrefix(kv.Key, "a."), v)
	}
	return strings.TrimSuffix(b.String(), " ")
}
