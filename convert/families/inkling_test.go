package families_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Inkling's mlx-vlm drafter (inkling_mtp): layers.{j} as blocks.{j}, the
// block's names as InklingDecoderLayer's, wq/wk/wv/wr as one qkvr_proj,
// w13_dn's interleaved rows dealt to gate_proj and up_proj, the short
// convolutions relaid out as MLX's [C, K, 1], the trunk's final norm
// carried; depth 1's sliding-window dimensions its own. Quantized, every
// matrix whose rows divide into the groups, the convolutions and
// rel_proj (no .weight) float, the float32 global_scale kept.
func TestInklingMLXNames(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Inkling)
	got := testmodel.PlanNames(t, "mlx", m)
	for _, j := range []string{"0", "1"} {
		b := "blocks." + j + ".transformer_block."
		for _, n := range []string{"blocks." + j + ".embed_norm.weight", "blocks." + j + ".hidden_norm.weight", "blocks." + j + ".input_proj.weight",
			b + "self_attn.qkvr_proj.weight", b + "self_attn.o_proj.weight", b + "self_attn.k_sconv.conv.weight", b + "self_attn.rel_proj",
			b + "input_layernorm.weight", b + "post_attention_layernorm.weight", b + "attn_sconv.conv.weight", b + "mlp_sconv.conv.weight",
			b + "mlp.gate_proj.weight", b + "mlp.up_proj.weight", b + "mlp.down_proj.weight", b + "mlp.global_scale"} {
			if _, ok := got[n]; !ok {
				t.Errorf("the drafter lacks %s", n)
			}
		}
	}
	if got["norm.weight"] == "" || got["blocks.0.transformer_block.mlp.global_scale"] != "F32" {
		t.Errorf("norm %q, global_scale %q", got["norm.weight"], got["blocks.0.transformer_block.mlp.global_scale"])
	}
	for n := range got {
		if strings.Contains(n, "wq_du") || strings.Contains(n, "w13_dn") || strings.HasPrefix(n, "layers.") || strings.HasPrefix(n, "model.") {
			t.Errorf("the drafter has %s: the splitter renames it", n)
		}
	}
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]plan.OutTensor{}
	for _, o := range p.Tensors {
		byName[o.Name] = o
	}
	for name, quantized := range map[string]bool{"blocks.1.transformer_block.self_attn.qkvr_proj.weight": true, "blocks.0.input_proj.weight": true,
		"blocks.1.transformer_block.mlp.up_proj.weight": true, "blocks.1.transformer_block.self_attn.rel_proj": false,
		"blocks.1.transformer_block.self_attn.v_sconv.conv.weight": false, "norm.weight": false} {
		if o := byName[name]; (o.Quant != nil) != quantized {
			t.Errorf("%s quantized: %v", name, o.Quant)
		}
	}
	// Depth 1 is sliding-window: its keys and values have the swa_* heads
	// (4 × 32), its rel_proj the window's 32 positions; depth 0 is global.
	if s := byName["blocks.1.transformer_block.self_attn.qkvr_proj.weight"].Shape; !slices.Equal(s, []int64{128 + 128 + 128 + 64, 128}) {
		t.Errorf("depth 1 qkvr_proj %v", s)
	}
	if s := byName["blocks.0.transformer_block.self_attn.qkvr_proj.weight"].Shape; !slices.Equal(s, []int64{128 + 64 + 64 + 64, 128}) {
		t.Errorf("depth 0 qkvr_proj %v", s)
	}
	if s := byName["blocks.1.transformer_block.self_attn.rel_proj"].Shape; !slices.Equal(s, []int64{16, 32}) {
		t.Errorf("depth 1 rel_proj %v", s)
	}
	if s := byName["blocks.0.transformer_block.attn_sconv.conv.weight"].Shape; !slices.Equal(s, []int64{128, 4, 1}) {
		t.Errorf("attn_sconv %v", s)
	}
	up := byName["blocks.0.transformer_block.mlp.up_proj.weight"]
	if up.Segments[0].Row != 1 || up.Segments[1].Row != 3 || !slices.Equal(up.Shape, []int64{256, 128}) {
		t.Errorf("up_proj: the odd rows of w13_dn, got %+v", up.Segments[:2])
	}
	var cfg struct {
		Block int            `json:"block_size"`
		Depth int            `json:"num_mtp_layers"`
		Local []int          `json:"mtp_local_layer_ids"`
		Text  map[string]any `json:"text_config"`
	}
	for _, f := range p.Files {
		if f.Name == "config.json" {
			if err := json.Unmarshal(f.Contents, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg.Block != 4 || cfg.Depth != 2 || !slices.Equal(cfg.Local, []int{1}) || cfg.Text["num_mtp_layers"] != 2.0 || cfg.Text["model_type"] != "inkling_model" {
		t.Errorf("config: %+v", cfg)
	}
}

// The fixture is described as the family (two MTP depths of different
// attention shapes); the targets no pinned runtime runs it on refuse with
// the sentence naming the runtime; bad configs are refused naming the key.
func TestInklingFamily(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Inkling)
	if m.Family.Name != "inkling" || m.MTPDepth != 2 || m.HeadError() != nil || m.TrunkError() != nil || m.TextPrefix != "model.llm." {
		t.Fatalf("family %s depth %d prefix %s: %v %v", m.Family, m.MTPDepth, m.TextPrefix, m.HeadError(), m.TrunkError())
	}
	for _, c := range []struct{ target, want string }{
		{"gguf", "llama.cpp 0.3.36 has no Inkling architecture"},
		{"openvino", "runs Qwen3.5 heads only"},
		{"combined", "mlx-lm 0.32.2 has no Inkling model"},
	} {
		if _, err := testmodel.Plan(t, m, c.target, targets.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
	// --target hf is ported (vLLM 0.34.0's InklingMTP, SGLang 0.5.23's; convert/targets/hf).
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err != nil {
		t.Errorf("--target hf: %v", err)
	}
	text := `"model_type":"inkling_model","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,
"head_dim":32,"vocab_size":32,"dense_intermediate_size":64,"intermediate_size":16,"n_routed_experts":4,"num_experts_per_tok":2,
"n_shared_experts":1,"dense_mlp_idx":1,"local_layer_ids":[0],"swa_num_attention_heads":2,"swa_num_key_value_heads":2,"swa_head_dim":32`
	cfg := func(extra, mtp string) string {
		return `{"architectures":["InklingForConditionalGeneration"],"model_type":"inkling_mm_model","text_config":{` + text + extra +
			`},"mtp_config":{` + mtp + `}}`
	}
	const mtp = `"num_nextn_predict_layers":1,"local_layer_ids":[0]`
	if c, err := model.ParseConfig([]byte(cfg("", mtp))); err != nil || c.IntermediateSize != 64 || c.MoeIntermediateSize != 16 || c.NumExperts != 4 ||
		!slices.Equal(c.LayerTypes, []string{"sliding_attention", "full_attention"}) {
		t.Errorf("config: %v %+v", err, c)
	}
	for _, c := range []struct{ extra, mtp, want string }{
		{`,"moe_intermediate_size":16`, mtp, "this is transformers' Inkling layout"},
		{`,"use_sconv":false`, mtp, "use_sconv is false"},
		{`,"mlp_layer_types":["sparse","dense"]`, mtp, "takes leading dense layers only"},
		{`,"layer_types":["hybrid"]`, mtp, "layer_types has 1 entries for 2 layers"},
		{``, `"num_nextn_predict_layers":1,"local_layer_ids":[0],"chain_hidden_post_norm":true`, "does not apply model.mtp.chain_norm"},
		{``, `"num_nextn_predict_layers":1`, "would make the trunk's local layers the MTP depths'"},
		{``, `"local_layer_ids":[0]`, "mtp_config.num_nextn_predict_layers is missing or 0"},
		{``, `"num_nextn_predict_layers":1,"local_layer_ids":[1]`, "mtp_config.local_layer_ids has 1: the MTP depths are 0..0"},
	} {
		if _, err := model.ParseConfig([]byte(cfg(c.extra, c.mtp))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v", c.extra, c.mtp, err)
		}
	}
	swa := strings.Replace(cfg("", mtp), `"swa_num_key_value_heads":2`, `"swa_num_key_value_heads":3`, 1)
	if _, err := model.ParseConfig([]byte(swa)); err == nil || !strings.Contains(err.Error(), "swa_num_attention_heads 2 is not a multiple of swa_num_key_value_heads 3") {
		t.Errorf("swa heads: %v", err)
	}
	noHeadDim := strings.Replace(cfg("", mtp), `"head_dim":32,`, "", 1)
	if _, err := model.ParseConfig([]byte(noHeadDim)); err == nil || !strings.Contains(err.Error(), "head_dim is missing") {
		t.Errorf("no head_dim: %v", err)
	}
	flat := `{"architectures":["InklingForCausalLM"],"model_type":"inkling_model",` + text[len(`"model_type":"inkling_model",`):] + `}`
	if _, err := model.ParseConfig([]byte(flat)); err == nil || !strings.Contains(err.Error(), "no text_config") {
		t.Errorf("flat: %v", err)
	}
}
