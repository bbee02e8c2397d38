package families_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Qwen3.8-Flash-Next's mlx-vlm drafter (qwen4_exp_mtp): every mtp.* tensor
// under its name without "mtp.", the fused experts split into switch_mlp,
// the zero-centred norms written as stored (the drafter applies 1+w), and
// quantized, mlp.gate float while shared_expert_gate is quantized.
func TestQwen4ExpMLXNames(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Qwen38FlashNext)
	var got []string
	for n := range testmodel.PlanNames(t, "mlx", m) {
		got = append(got, n)
	}
	slices.Sort(got)
	for _, n := range []string{"fc_embedding.weight", "fc_hidden.weight", "pre_fc_norm_hidden.weight",
		"hyper_connection_mixer.hc_norm.weight", "hyper_connection_mixer.input_mix_weight_up.weight",
		"layers.0.attn_hyper_connection.block_inject_weight.weight", "layers.0.self_attn.indexer.index_qk_proj.weight",
		"layers.0.mlp.switch_mlp.gate_proj.weight", "layers.0.mlp.switch_mlp.up_proj.weight", "layers.0.mlp.switch_mlp.down_proj.weight",
		"layers.0.mlp.shared_expert_gate.weight"} {
		if _, ok := slices.BinarySearch(got, n); !ok {
			t.Errorf("the drafter lacks %s (has %s)", n, strings.Join(got, ", "))
		}
	}
	for _, n := range got {
		if strings.HasPrefix(n, "mtp.") || strings.Contains(n, "experts.gate_up_proj") {
			t.Errorf("the drafter has %s: the splitter strips mtp. and splits the experts", n)
		}
	}
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Tensors {
		switch {
		case o.Has(plan.TNormPlusOne):
			t.Errorf("%s is shifted: qwen4_exp_mtp applies 1+w itself", o.Name)
		case o.Name == "layers.0.mlp.gate.weight" && o.Quant != nil, o.Name == "layers.0.mlp.shared_expert_gate.weight" && o.Quant == nil:
			t.Errorf("%s: quantized %v, the splitter does the opposite", o.Name, o.Quant)
		}
	}
}

// The fixture is described as the family (its whole trunk explained, the
// MTP layer apart under mtp.); the targets no pinned runtime runs it on
// refuse with the sentence naming that runtime, --graft included; bad
// configs are refused naming the family and the key.
func TestQwen4ExpFamily(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Qwen38FlashNext)
	if m.Family.Name != "qwen4_exp" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil || m.TextPrefix != "model.language_model." {
		t.Fatalf("family %s depth %d prefix %s: %v %v", m.Family, m.MTPDepth, m.TextPrefix, m.HeadError(), m.TrunkError())
	}
	if f := testmodel.Load(t, fixtures.Qwen38FlashNextFP8); !f.FP8 || f.HeadError() != nil || f.TrunkError() != nil || len(f.MTPExperts) != 1 || f.MTPExperts[0].Layout == model.Fused {
		t.Errorf("the block-FP8 fixture (per-expert experts): fp8 %v: %v %v", f.FP8, f.HeadError(), f.TrunkError())
	}
	for _, c := range []struct {
		target string
		o      targets.Options
		want   string
	}{
		{"gguf", targets.Options{}, "llama.cpp 0.3.36 has no draft graph for Qwen3.8-Flash-Next (qwen4exp's MTP graph is llama.cpp#28243"},
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "llama.cpp#28243"},
		{"openvino", targets.Options{}, "runs Qwen3.5 heads only"},
		{"combined", targets.Options{}, "mlx-lm 0.32.2 has no Qwen3.8-Flash-Next model"},
	} {
		if _, err := testmodel.Plan(t, m, c.target, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
	// The GGUF table (llama.cpp#28243's dialect, kept for the pin bump) names
	// every tensor of the head but the routed experts (the MoE kinds) and
	// index_qk_proj (split into indexer.q_proj and k_proj).
	g := m.Family.GGUF
	for _, n := range m.HeadTensors() {
		rel := m.HeadRelative(n)
		_, top := g.HeadTop[rel]
		_, layer := g.Layer[strings.TrimPrefix(rel, "layers.0.")]
		if !top && !layer && !strings.HasSuffix(rel, "indexer.index_qk_proj.weight") {
			t.Errorf("the GGUF table does not name %s", n)
		}
	}
	if g.HeadTop["fc_embedding.weight"].In(48) != "blk.48.nextn.eh_proj.weight" || g.HeadTop["hyper_connection_mixer.input_mix_weight_up.weight"].In(48) != "blk.48.nextn.hc_head_up.weight" {
		t.Errorf("head names: %s, %s", g.HeadTop["fc_embedding.weight"].In(48), g.HeadTop["hyper_connection_mixer.input_mix_weight_up.weight"].In(48))
	}
	text := `"model_type":"qwen4_exp_text","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":2,"num_key_value_heads":1,
"head_dim":32,"vocab_size":32,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":16,"linear_value_head_dim":16,
"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":16,"shared_expert_intermediate_size":16,
"mtp_num_hidden_layers":1`
	nested := func(extra string) string {
		return `{"architectures":["Qwen4ExpForConditionalGeneration"],"model_type":"qwen4_exp","text_config":{` + text + extra + `}}`
	}
	c, err := model.ParseConfig([]byte(nested(`,"layer_types":["linear_attention","linear_attention","linear_attention","qwen_sparse_attention"]`)))
	if err != nil || !c.Nested || c.LayerTypes[3] != model.FullAttention || c.LayerTypes[0] != model.LinearAttention {
		t.Errorf("nested: %v %v", c, err)
	}
	if c, err := model.ParseConfig([]byte(nested(""))); err != nil || !slices.Equal(c.LayerTypes, []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"}) {
		t.Errorf("layer_types from full_attention_interval: %v", err)
	}
	for extra, want := range map[string]string{
		`,"hc_count":1`:                           "hc_count is 1: Qwen3.8-Flash-Next has at least two hyper-connection streams",
		`,"hc_lowrank":0`:                         "hc_lowrank is 0",
		`,"indexer_kv_heads":2`:                   "indexer_kv_heads is 2",
		`,"indexer_budget":10`:                    "indexer_budget 10 is not a multiple of indexer_compress_ratio 4",
		`,"output_gate_type":"relu"`:              `output_gate_type is "relu"`,
		`,"ple_layer_ids":[4]`:                    "ple_layer_ids has 4",
		`,"layer_types":["full_attention"]`:       "layer_types has 1 entries for 4 layers",
		`,"num_experts":0,"intermediate_size":32`: "layers are all sparse MoE",
	} {
		if _, err := model.ParseConfig([]byte(nested(extra))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
