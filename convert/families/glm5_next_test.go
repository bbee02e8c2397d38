package families_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	"github.com/mtpconv/mtpconv/convert/targets/hf"
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

// GLM-5.3-Flash's mlx-vlm drafter (glm5_next_mtp): the NextN layer's own
// tensors at the top, the decoder layer as mtp_block with qkv_a_proj and the
// shared expert's gate_up_proj concatenated, kv_b_proj absorbed, experts
// stacked, the float32 tensors kept float32 (the dry-run name list).
func TestGlm5NextMLXNames(t *testing.T) {
	m := testmodel.Load(t, fixtures.GLM53Flash)
	var got []string
	for n, dt := range testmodel.PlanNames(t, "mlx", m) {
		got = append(got, n+" "+dt)
	}
	want := []string{
		"eh_proj.weight BF16", "enorm.weight BF16", "hnorm.weight BF16", "shared_head_norm.weight BF16",
		"mtp_block.input_layernorm.weight BF16", "mtp_block.post_attention_layernorm.weight BF16",
		"mtp_block.mlp.gate.weight BF16", "mtp_block.mlp.gate.e_score_correction_bias F32",
		"mtp_block.mlp.shared_experts.gate_up_proj.weight BF16", "mtp_block.mlp.shared_experts.down_proj.weight BF16",
		"mtp_block.mlp.switch_mlp.gate_proj.weight BF16", "mtp_block.mlp.switch_mlp.up_proj.weight BF16",
		"mtp_block.mlp.switch_mlp.down_proj.weight BF16",
		"mtp_block.self_attn.qkv_a_proj.weight BF16", "mtp_block.self_attn.q_a_layernorm.weight BF16",
		"mtp_block.self_attn.q_b_proj.weight BF16", "mtp_block.self_attn.kv_a_layernorm.weight BF16",
		"mtp_block.self_attn.embed_q.weight BF16", "mtp_block.self_attn.unembed_out.weight BF16",
		"mtp_block.self_attn.o_proj.weight BF16",
		"mtp_block.self_attn.indexer.wq_b.weight BF16", "mtp_block.self_attn.indexer.wk.weight BF16",
		"mtp_block.self_attn.indexer.k_norm.weight BF16", "mtp_block.self_attn.indexer.k_norm.bias BF16",
		"mtp_block.self_attn.indexer.weights_proj.weight BF16",
		"mtp_block.self_attn.indexer.index_kpool_compress_ape F32", "mtp_block.self_attn.indexer.index_kpool_compress_gate F32",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the drafter's tensors are\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Tensors {
		if o.Name == "mtp_block.self_attn.qkv_a_proj.weight" {
			if len(o.Segments) != 2 || !strings.HasSuffix(o.Segments[0].Source, "q_a_proj.weight") ||
				!strings.HasSuffix(o.Segments[1].Source, "kv_a_proj_with_mqa.weight") || !slices.Equal(o.Shape, []int64{128, 128}) {
				t.Errorf("qkv_a_proj: %+v", o)
			}
		}
	}
}

// The fixture is described as the family (its whole trunk explained, the
// NextN layer at layers.4); the targets no runtime runs it on refuse with
// the sentence naming that runtime, --graft included; bad configs are
// refused naming the family and the key.
func TestGlm5NextFamily(t *testing.T) {
	m := testmodel.Load(t, fixtures.GLM53Flash)
	if m.Family.Name != "glm5_next" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil || m.TextPrefix != "model.language_model." {
		t.Fatalf("family %s depth %d prefix %s: %v %v", m.Family, m.MTPDepth, m.TextPrefix, m.HeadError(), m.TrunkError())
	}
	if f := testmodel.Load(t, fixtures.GLM53FlashFP8); !f.FP8 || f.HeadError() != nil || f.TrunkError() != nil {
		t.Errorf("the block-FP8 fixture: fp8 %v: %v %v", f.FP8, f.HeadError(), f.TrunkError())
	}
	for _, c := range []struct {
		target string
		o      targets.Options
		want   string
	}{
		{"gguf", targets.Options{}, "llama.cpp 0.3.36 has no draft graph for GLM-5.3-Flash"},
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "llama.cpp 0.3.36 has no draft graph for GLM-5.3-Flash"},
		{"openvino", targets.Options{}, "runs Qwen3.5 heads only"},
		{"combined", targets.Options{}, "mlx-lm 0.32.2 has no GLM-5.3-Flash model"},
	} {
		if _, err := testmodel.Plan(t, m, c.target, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
	// inspect's serving report judges the head (vLLM's glm5_next_mtp and
	// SGLang's glm5_next_nextn rules, convert/targets/hf): the bf16 release
	// is clean.
	if r, err := hf.Serving(m); err != nil || r.Err() != nil || r.NotJudged != "" || len(r.Modules) == 0 {
		t.Errorf("serving report: %v %+v", err, r)
	}
	text := `"model_type":"glm5_next_text","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":2,
"vocab_size":32,"intermediate_size":96,"moe_intermediate_size":16,"n_routed_experts":4,"n_shared_experts":1,"num_experts_per_tok":2,
"n_group":1,"topk_group":1,"first_k_dense_replace":1,"routed_scaling_factor":2.5,"q_lora_rank":16,"kv_lora_rank":16,
"qk_nope_head_dim":16,"qk_rope_head_dim":0,"v_head_dim":16,"index_n_heads":2,"index_head_dim":16,"index_topk":8,"index_kpool":4,
"num_nextn_predict_layers":1,"layer_types":["linear_attention","full_attention"]`
	kda := `,"linear_attn_config":{"num_heads":2,"head_dim":16,"short_conv_kernel_size":4}`
	nested := func(extra string) string {
		return `{"architectures":["Glm5NextForConditionalGeneration"],"model_type":"glm5_next","text_config":{` + text + extra + `}}`
	}
	if c, err := model.ParseConfig([]byte(nested(kda))); err != nil || !c.Nested || c.HeadDim != 16 {
		t.Errorf("nested: %v", err)
	}
	if c, err := model.ParseConfig([]byte(`{` + text + kda + `}`)); err != nil { // a flat text-only config
		t.Errorf("flat glm5_next_text: %v", err)
	} else if f, _ := c.Family(); f.Name != "glm5_next" {
		t.Errorf("flat glm5_next_text: %s", f.Name)
	}
	for extra, want := range map[string]string{
		kda + `,"qk_rope_head_dim":64`:   "qk_rope_head_dim is 64 (mla_use_nope unset): GLM-5.3-Flash's latent attention has no rotary part",
		``:                               "linear_attn_config is missing: GLM-5.3-Flash's KDA layers",
		kda + `,"num_key_value_heads":1`: "num_attention_heads 2 differs from num_key_value_heads 1",
		kda + `,"index_topk":6`:          "index_topk 6 is not a multiple of index_kpool 4",
		kda + `,"layer_types":["linear_attention"]`:           "layer_types has 1 entries for 2 layers (num_hidden_layers 2): one per layer (GLM-5.3-Flash)",
		kda + `,"mlp_layer_types":["dense","moe"]`:            `mlp_layer_types[1] is "moe": GLM-5.3-Flash's layers are dense, sparse`,
		kda + `,"q_lora_rank":null`:                           "q_lora_rank is 0",
		kda + `,"scoring_func":"softmax"`:                     "GLM-5.3-Flash heads route experts by sigmoid",
		`,"linear_attn_config":{"num_heads":2,"head_dim":16}`: "linear_attn_config.short_conv_kernel_size is 0",
	} {
		_, err := model.ParseConfig([]byte(nested(extra)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}
