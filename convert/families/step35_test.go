package families_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/families"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Step-3.5's three chained heads (step35): blocks 4, 5 and 6, each a whole
// decoder layer (the head-wise gate attn_gate, a dense MLP) with its own
// nextn.* and shared head; norms and the router float32 as the converter writes them.
func TestStep35GGUFNames(t *testing.T) {
	var want []string
	for b := 4; b <= 6; b++ {
		for _, n := range []string{"attn_gate.weight BF16", "attn_k.weight BF16", "attn_k_norm.weight F32", "attn_norm.weight F32",
			"attn_output.weight BF16", "attn_q.weight BF16", "attn_q_norm.weight F32", "attn_v.weight BF16", "ffn_down.weight BF16",
			"ffn_gate.weight BF16", "ffn_norm.weight F32", "ffn_up.weight BF16", "nextn.eh_proj.weight BF16", "nextn.enorm.weight F32",
			"nextn.hnorm.weight F32", "nextn.shared_head_head.weight BF16", "nextn.shared_head_norm.weight F32"} {
			want = append(want, fmt.Sprintf("blk.%d.%s", b, n))
		}
	}
	wantGGUFNames(t, fixtures.Step35, append(want, "output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16")...)
}

// The fixture is described as the family (3 MTP layers, sliding-window
// heads of attention_other_setting), MLX, combined, OpenVINO and hf are refused
// naming the missing consumer, and configs llama.cpp's step35 cannot
// represent are refused naming the family or the key.
func TestStep35Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.Step35)
	if m.Family.Name != "step3p5" || m.MTPDepth != 3 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	st := model.KeysOf[families.Step35Config](m.Config)
	if len(st.Types) != 7 || !st.Sliding(4) || st.Sliding(0) || st.SWAHeads != 8 || st.RopeBase != 5e6 || st.RopeBaseSWA != 1e4 {
		t.Errorf("config: %+v", st)
	}
	if !strings.Contains(m.Spec.Report.Attention, "sliding-window (8 tokens) heads 8/2") {
		t.Errorf("attention: %s", m.Spec.Report.Attention)
	}
	for target, want := range map[string]string{"mlx": "no drafter model for step3p5", "combined": "drops the MTP layers",
		"openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	base := `{"architectures":["Step3p5ForCausalLM"],"model_type":"step3p5","hidden_size":64,"num_hidden_layers":2,
"num_attention_heads":4,"num_attention_groups":2,"head_dim":16,"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,
"moe_num_experts":4,"moe_top_k":2,"share_expert_dim":16,"moe_layers_enum":"1","num_nextn_predict_layers":2,"sliding_window":4,
"attention_other_setting":{"attention_type":"sliding_attention","num_attention_heads":6,"num_attention_groups":2,"head_dim":16}`
	ok := `,"layer_types":["full_attention","sliding_attention","sliding_attention","sliding_attention"],"partial_rotary_factors":[0.5,1,1,1]`
	if _, err := model.ParseConfig([]byte(base + ok + `,"rope_theta":[5e6,1e4,1e4,1e4]}`)); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	// llama3 scaling in the full-attention layers: the converter's defaults
	// (factor 8, 1 and 4, 8192 positions, or the top level's).
	c, err := model.ParseConfig([]byte(base + ok + `,"rope_theta":[5e6,1e4,1e4,1e4],"rope_scaling":{"type":"llama3"},"yarn_only_types":["full_attention"],"original_max_position_embeddings":4096}`))
	if err != nil {
		t.Fatalf("llama3 scaling: %v", err)
	}
	want := computed.Llama3RopeFactors{Base: 5e6, HeadDim: 16, RotaryDim: 8, Factor: 8, LowFreq: 1, HighFreq: 4, OriginalMaxPositionEmbeddings: 4096}
	if f := model.KeysOf[families.Step35Config](c).RopeFactors; f == nil || *f != want {
		t.Errorf("rope factors %+v, want %+v", f, want)
	}
	// --target hf takes the releases' dense MTP layers; MoE ones are refused
	// in one sentence (how the runtimes name their stacked experts is not ported).
	for enum, want := range map[string]string{"1": "", "1,2,3": "the MTP layers MoE"} {
		c, err := model.ParseConfig([]byte(base + ok + `,"moe_layers_enum":"` + enum + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.Family()
		if err != nil {
			t.Fatal(err)
		}
		if got := f.HF.Refuse(c); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("moe_layers_enum %q: refusal %q, want %q", enum, got, want)
		}
	}
	for extra, want := range map[string]string{
		ok + `,"rope_theta":[5e6,1e4,5e5,1e4]}`:                                                                                              "rope_theta[2] is 500000 for a sliding_attention layer",
		`,"layer_types":["full_attention","sliding_attention"],"partial_rotary_factors":[0.5,1,1]}`:                                          "partial_rotary_factors[2] is 1 for a full_attention layer",
		`,"layer_types":["full_attention","sliding_attention","sliding_attention","full_attention"],"partial_rotary_factors":[0.5,1,1,0.5]}`: "MTP layer 1 differs from MTP layer 0",
		ok + `,"rope_scaling":{"rope_type":"llama3","factor":2}}`:                                                                            `yarn_only_types is [] with llama3 rope_scaling`,
		ok + `,"rope_scaling":{"rope_type":"yarn","factor":2},"yarn_only_types":["full_attention"]}`:                                         `rope_scaling.rope_type is "yarn"`,
		ok + `,"rope_scaling":{"type":"llama3","low_freq_factor":4,"high_freq_factor":4},"yarn_only_types":["full_attention"]}`:              "not 0 < low < high",
		ok + `,"rope_scaling":{"rope_type":"llama3"},"yarn_only_types":["full_attention","sliding_attention"]}`:                              "scales full-attention layers only",
		ok + `,"quantization_config":{"quant_method":"fp8"}}`:                                                                                "Step-3.5-Flash releases are read in bf16 only",
		ok + `,"sliding_window":0}`:                                   "sliding_window is 0",
		ok + `,"attention_other_setting":{"num_attention_heads":5}}`:  "5 heads do not group over 2 key-value heads",
		ok + `,"layer_types":["full_attention","chunked_attention"]}`: `layer_types[1] is "chunked_attention"`,
		ok + `,"use_moe_router_bias":false}`:                          "routes experts with router_bias",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

// Step-3.7's fixture (nested text_config, vision tower, llama3 scaling) is
// the same family: its names are Step-3.5's with rope_freqs first (float32,
// computed from the config), the vision tensors apart, its messages name
// Step-3.7-Flash.
func TestStep37Family(t *testing.T) {
	var want []string
	for b := 4; b <= 6; b++ {
		for _, n := range []string{"attn_gate.weight BF16", "attn_k.weight BF16", "attn_k_norm.weight F32", "attn_norm.weight F32",
			"attn_output.weight BF16", "attn_q.weight BF16", "attn_q_norm.weight F32", "attn_v.weight BF16", "ffn_down.weight BF16",
			"ffn_gate.weight BF16", "ffn_norm.weight F32", "ffn_up.weight BF16", "nextn.eh_proj.weight BF16", "nextn.enorm.weight F32",
			"nextn.hnorm.weight F32", "nextn.shared_head_head.weight BF16", "nextn.shared_head_norm.weight F32"} {
			want = append(want, fmt.Sprintf("blk.%d.%s", b, n))
		}
	}
	wantGGUFNames(t, fixtures.Step37, append(want, "output.weight BF16", "output_norm.weight F32", "rope_freqs.weight F32", "token_embd.weight BF16")...)

	m := testmodel.Load(t, fixtures.Step37)
	st := model.KeysOf[families.Step35Config](m.Config)
	if m.Family.Name != "step3p5" || m.MTPDepth != 3 || m.HeadError() != nil || m.TrunkError() != nil || st.Name != "Step-3.7-Flash" || !m.Config.Nested {
		t.Fatalf("family %s depth %d name %s: %v %v", m.Family, m.MTPDepth, st.Name, m.HeadError(), m.TrunkError())
	}
	wantF := computed.Llama3RopeFactors{Base: 5e6, HeadDim: 64, RotaryDim: 32, Factor: 8, LowFreq: 1, HighFreq: 32, OriginalMaxPositionEmbeddings: 256}
	if f := st.RopeFactors; f == nil || *f != wantF || st.Sliding(4) || m.Groups[model.GroupVision].Tensors != 2 {
		t.Errorf("rope factors %+v, MTP layer sliding %v, vision %v", f, st.Sliding(4), m.Groups[model.GroupVision].Tensors)
	}
	if !strings.Contains(m.Spec.Report.Attention, "llama3 RoPE scaling") {
		t.Errorf("attention: %s", m.Spec.Report.Attention)
	}
	cfg := `{"architectures":["Step3p7ForConditionalGeneration"],"model_type":"step3p7","vision_config":{},"text_config":{"model_type":"step3p5",
"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_attention_groups":2,"head_dim":16,"vocab_size":32,"intermediate_size":96,
"moe_intermediate_size":16,"moe_num_experts":4,"moe_top_k":2,"share_expert_dim":16,"moe_layers_enum":"1","num_nextn_predict_layers":2,"sliding_window":4,
"layer_types":["full_attention","sliding_attention","sliding_attention","sliding_attention"],"partial_rotary_factors":[0.5,1,1,1],
"rope_scaling":{"rope_type":"llama3","factor":2.0,"original_max_position_embeddings":131072,"low_freq_factor":1.0,"high_freq_factor":32.0}`
	if _, err := model.ParseConfig([]byte(cfg + `,"yarn_only_types":["full_attention"]}}`)); err != nil {
		t.Fatalf("a valid Step-3.7 config: %v", err)
	}
	for extra, want := range map[string]string{
		`}}`: "Step-3.7-Flash needs",
		`,"yarn_only_types":["full_attention"],"use_moe_router_bias":false}}`:                  "Step-3.7-Flash routes experts with router_bias",
		`,"yarn_only_types":["full_attention"]},"quantization_config":{"quant_method":"fp8"}}`: "Step-3.7-Flash releases are read in bf16 only",
	} {
		_, err := model.ParseConfig([]byte(cfg + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
