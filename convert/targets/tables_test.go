// Package targets_test checks that every target reads the family's tables
// and refuses, by name, what a family's Spec says that it cannot write.
package targets_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

// wantNames fails for each name not among the planned ones.
func wantNames(t *testing.T, planned map[string]string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, ok := planned[n]; !ok {
			t.Errorf("no tensor %s in %v", n, planned)
		}
	}
}

// The GGUF target names nothing itself: architecture, pre-tokenizer,
// tensor names and metadata keys all come from the family's table.
func TestGGUFReadsFamilyTable(t *testing.T) {
	m := testmodel.LoadDir(t, testmodel.WithTokenizer(t, fixtures.Qwen36))
	g := &testmodel.OwnFamily(m).GGUF
	g.Arch, g.PreTokenizer = "test_arch", "test_pre"
	g.Layer = maps.Clone(g.Layer)
	// The table gives kinds: their names, and their types (a router kind is float32).
	g.Layer["self_attn.q_proj.weight"] = gg.Weight(gg.KindFFNGateInp)
	g.HeadTop = maps.Clone(g.HeadTop)
	g.HeadTop["fc.weight"] = gg.Weight(gg.KindNextNSharedHeadHead)
	planned := testmodel.PlanNames(t, "gguf", m)
	wantNames(t, planned, "blk.4.ffn_gate_inp.weight", "blk.4.nextn.shared_head_head.weight", "token_embd.weight", "output.weight")
	if planned["blk.4.ffn_gate_inp.weight"] != "F32" || planned["blk.4.nextn.shared_head_head.weight"] != "BF16" {
		t.Errorf("types by kind: %v", planned)
	}
	p, err := testmodel.Target(t, "gguf").Plan(m, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]any{}
	for _, k := range p.GGUF {
		kv[k.Key] = k.Value.V
	}
	if kv["general.architecture"] != "test_arch" || kv["tokenizer.ggml.pre"] != "test_pre" || kv["test_arch.block_count"] == nil {
		t.Errorf("metadata %v", kv)
	}
	for k := range kv {
		if strings.HasPrefix(k, "qwen35moe.") {
			t.Errorf("key %s not from the table", k)
		}
	}
	// A family without a llama.cpp architecture is refused, naming it.
	g.Arch = ""
	if _, err := testmodel.Target(t, "gguf").Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), "does not know llama.cpp's architecture for family qwen3_5_moe") {
		t.Errorf("no arch: %v", err)
	}
}

// A head in the layer list with q/k/v biases, a score-correction bias and
// its own shared head: every tensor named by the family's table (biases
// as *.bias in float32), the MTP layer as block n_layer; multi-head latent
// attention's kv_b_proj split in two.
func TestGGUFSidecarOfLayerListHead(t *testing.T) {
	testmodel.RegisterGLM(t)
	m := testmodel.GLM(t, testmodel.GLMConfig(1, false), nil, testmodel.TokenizerFiles(t))
	types := testmodel.PlanNames(t, "gguf", m)
	for name, dt := range map[string]string{
		"blk.3.attn_q.bias": "F32", "blk.3.attn_v.bias": "F32", "blk.3.exp_probs_b.bias": "F32", "blk.3.attn_q.weight": "BF16",
		"blk.3.nextn.eh_proj.weight": "BF16", "blk.3.nextn.enorm.weight": "F32", "blk.3.nextn.shared_head_head.weight": "BF16",
		"blk.3.ffn_down_exps.weight": "BF16", "token_embd.weight": "BF16", "output.weight": "BF16",
	} {
		if types[name] != dt {
			t.Errorf("%s: %q, want %s", name, types[name], dt)
		}
	}
	if len(types) != 26 {
		t.Errorf("%d tensors: %v", len(types), types)
	}
	// Multi-head latent attention's kv_b_proj is stored as llama.cpp's
	// DeepSeek-V2 path wants it: attn_k_b (key rows transposed) and attn_v_b.
	flash := testmodel.Load(t, fixtures.GLM47Flash)
	types = testmodel.PlanNames(t, "gguf", flash)
	if types["blk.2.attn_k_b.weight"] != "BF16" || types["blk.2.attn_v_b.weight"] != "BF16" || types["blk.2.attn_kv_b.weight"] != "" {
		t.Errorf("mla: %v", types)
	}
}

// The drafter's model_type, the keys its config adds (text_config's after
// the source's, in order; top-level ones), the trunk tensors it carries
// and the head tensors it deals out row by row come from the family's MLX
// table; combined's refusal is the family's sentence.
func TestMLXReadsFamilyTable(t *testing.T) {
	m := testmodel.Load(t, fixtures.Next)
	fam := testmodel.OwnFamily(m)
	fam.MLX.DrafterModelType = "test_mtp"
	fam.MLX.DrafterTextConfig = func(m *model.Model, text *jsonobj.Object) { text.SetDefault("a_test_key", 7) }
	fam.MLX.DrafterConfig = func(m *model.Model) map[string]any { return map[string]any{"test_depth": m.MTPDepth} }
	fam.MLX.DrafterTrunk = map[string]string{"norm.weight": "test_norm.weight"}
	fam.MLX.DrafterDeinterleave = []model.DrafterSplit{{Src: "mlp.shared_expert.up_proj.weight", Outs: []string{"even.weight", "odd.weight"}}}
	p, err := testmodel.Target(t, "mlx").Plan(m, targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ModelType string         `json:"model_type"`
		Depth     int            `json:"test_depth"`
		Text      map[string]any `json:"text_config"`
	}
	var text jsonobj.Object
	for _, f := range p.Files {
		if f.Name == "config.json" {
			if err := json.Unmarshal(f.Contents, &cfg); err != nil {
				t.Fatal(err)
			}
			var root struct {
				Text json.RawMessage `json:"text_config"`
			}
			if err := json.Unmarshal(f.Contents, &root); err != nil {
				t.Fatal(err)
			}
			if text, err = jsonobj.Decode(root.Text); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, rope := cfg.Text["rope_parameters"]
	if cfg.ModelType != "test_mtp" || cfg.Text["a_test_key"] != 7.0 || text[len(text)-1].Key != "a_test_key" || cfg.Depth != 1 || rope {
		t.Errorf("config %+v (text_config keys end with %s)", cfg, text[len(text)-1].Key)
	}
	byName := map[string]plan.OutTensor{}
	for _, o := range p.Tensors {
		byName[o.Name] = o
	}
	src := "mtp.layers.0.mlp.shared_expert.up_proj.weight"
	rows := m.Checkpoint.Tensors[src].Shape[0]
	for k, name := range []string{"layers.0.even.weight", "layers.0.odd.weight"} {
		o := byName[name]
		if len(o.Segments) != int(rows/2) || o.Segments[1].Source != src || o.Segments[1].Row != int64(2+k) || o.Segments[1].Rows != 1 ||
			o.Shape[0] != rows/2 || o.Quant == nil || o.Component != plan.ComponentHead {
			t.Errorf("%s: %+v", name, o)
		}
	}
	if _, ok := byName["layers.0.mlp.shared_expert.up_proj.weight"]; ok {
		t.Error("the dealt tensor is written whole too")
	}
	if o := byName["test_norm.weight"]; len(o.Segments) != 1 || o.Segments[0].Source != "model.norm.weight" || o.Component != plan.ComponentTrunk {
		t.Errorf("the trunk's norm in the drafter: %+v", o)
	}
	fam.MLX.DrafterTrunk = map[string]string{"no_such.weight": "x"}
	if _, err := testmodel.Target(t, "mlx").Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), "carries the trunk's model.no_such.weight, which the checkpoint lacks") {
		t.Errorf("a missing trunk tensor: %v", err)
	}
	fam.MLX.CombinedRefusal = "the test family's combined file has no loader"
	if _, err := testmodel.Target(t, "combined").Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), "the test family's combined file has no loader") {
		t.Errorf("combined: %v", err)
	}
}

// A family with no mlx-vlm drafter is refused by name; with one, the
// drafter holds the head's tensors under their layer-relative names,
// whether the head sits apart or in the layer list.
func TestMLXDrafterOfLayerListHead(t *testing.T) {
	testmodel.RegisterGLM(t)
	m := testmodel.GLM(t, testmodel.GLMConfig(1, false), nil, nil)
	if _, err := testmodel.Target(t, "mlx").Plan(m, targets.Options{}); err == nil || err.Error() != "--target mlx: mlx-vlm has no drafter model for test_glm heads" {
		t.Fatalf("err = %v", err)
	}
	testmodel.OwnFamily(m).MLX.DrafterModelType = "test_glm_mtp"
	wantNames(t, testmodel.PlanNames(t, "mlx", m), "layers.0.eh_proj.weight", "layers.0.self_attn.q_proj.bias", "layers.0.mlp.switch_mlp.down_proj.weight", "layers.0.shared_head.head.weight")
}

// A family whose head no OpenVINO pipeline runs is refused with the
// family's one sentence, before anything is planned; what the IR blocks
// cannot lower is refused at planning, naming it: attention with biases
// (GQA) or latent attention, sigmoid group routing, ungated shared experts.
func TestOpenVINORefusals(t *testing.T) {
	testmodel.RegisterGLM(t)
	tg := testmodel.Target(t, "openvino")
	for _, mla := range []bool{false, true} {
		m := testmodel.GLM(t, testmodel.GLMConfig(1, mla), nil, nil)
		if _, err := tg.Plan(m, targets.Options{}); err == nil || err.Error() != "--target openvino: "+testmodel.GLMRefusal {
			t.Fatalf("refusal: %v", err)
		}
		testmodel.OwnFamily(m).OpenVINO.Refusal = ""
		want := `attention "gqa" (output gate false) has no lowering`
		if mla {
			want = `attention "mla" (output gate false) has no lowering`
		}
		if _, err := tg.Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mla %v: %v", mla, err)
		}
	}
	q := testmodel.Load(t, fixtures.Qwen36)
	if _, err := tg.Plan(q, targets.Options{}); err != nil {
		t.Fatalf("qwen3_5_moe: %v", err)
	}
	qwen := q.Spec.Forward
	for _, c := range []struct {
		change func(*model.Forward)
		want   string
	}{
		{func(f *model.Forward) { f.Layers[0].Attention.QBias = "x" }, "attention with q/k/v biases has no lowering"},
		{func(f *model.Forward) { f.Layers[0].MLP.Routing = model.RouteSigmoidGroupTopK }, `MoE routing "sigmoid_group_topk" has no lowering`},
		{func(f *model.Forward) { f.Layers[0].MLP.SharedExpertGate = "" }, "ungated shared experts have no lowering"},
	} {
		q.Spec.Forward = func(m *model.Model) model.Forward { f := qwen(m); c.change(&f); return f }
		if _, err := tg.Plan(q, targets.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q: %v", c.want, err)
		}
	}
}

// Several MTP layers (nextn_predict_layers 3, each with its own eh_proj,
// norms, shared head and MoE block) are blocks n_layer .. n_layer+2 of the
// sidecar where the architecture's draft graph chains heads
// (GGUFSpec.ChainedHeads), with block_count and nextn_predict_layers
// counting them and llama-quantize's choice made over every block; a
// family whose llama.cpp graph takes one is refused, naming the architecture.
func TestGGUFChainedHeads(t *testing.T) {
	testmodel.RegisterGLM(t)
	var cfg map[string]any
	if err := json.Unmarshal(testmodel.GLMConfig(3, false), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["moe_intermediate_size"] = 64 // rows of whole 32-blocks: every expert quantized
	raw, _ := json.Marshal(cfg)
	m := testmodel.GLM(t, raw, nil, testmodel.TokenizerFiles(t))
	if _, err := testmodel.Target(t, "gguf").Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), "3 MTP layers; llama.cpp's test_glm4moe MTP graph supports exactly one") {
		t.Fatalf("one-layer architecture: %v", err)
	}
	testmodel.OwnFamily(m).GGUF.ChainedHeads = true
	types := testmodel.PlanNames(t, "gguf", m)
	for _, b := range []string{"3", "4", "5"} {
		for name, dt := range map[string]string{"nextn.eh_proj.weight": "BF16", "nextn.enorm.weight": "F32", "nextn.hnorm.weight": "F32",
			"nextn.shared_head_norm.weight": "F32", "nextn.shared_head_head.weight": "BF16", "attn_q.weight": "BF16", "ffn_gate_inp.weight": "F32",
			"ffn_down_exps.weight": "BF16", "exp_probs_b.bias": "F32"} {
			if got := types["blk."+b+"."+name]; got != dt {
				t.Errorf("blk.%s.%s: %q, want %s", b, name, got, dt)
			}
		}
	}
	if len(types) != 3+3*23 {
		t.Errorf("%d tensors: %v", len(types), types)
	}
	for _, prec := range []string{"bf16", "int4"} {
		p, err := testmodel.Target(t, "gguf").Plan(m, targets.Options{HeadPrecision: prec, Set: map[string]bool{targets.OptHeadPrecision: true}})
		if err != nil {
			t.Fatal(err)
		}
		kv := map[string]any{}
		for _, k := range p.GGUF {
			kv[k.Key] = k.Value.V
		}
		if kv["test_glm4moe.block_count"] != uint32(6) || kv["test_glm4moe.nextn_predict_layers"] != uint32(3) {
			t.Errorf("%s: metadata %v", prec, kv)
		}
		if prec != "int4" {
			continue
		}
		// Q4_K_M over the 6 blocks: use_more_bits takes block 5's ffn_down
		// experts (the last eighth, by block) and the third of the three
		// attn_v (by llama-quantize's counter over the file) to Q6_K, which
		// 64-wide rows fall back to Q8_0; the rest is Q4_K, here Q5_0.
		q := map[string]string{}
		for _, o := range p.Tensors {
			if o.Quant != nil {
				q[o.Name] = o.Quant.GGMLType
			}
		}
		for name, want := range map[string]string{"blk.3.ffn_down_exps.weight": "Q5_0", "blk.4.ffn_down_exps.weight": "Q5_0",
			"blk.5.ffn_down_exps.weight": "Q8_0", "blk.4.attn_v.weight": "Q5_0", "blk.5.attn_v.weight": "Q8_0", "blk.5.attn_q.weight": "Q5_0"} {
			if q[name] != want {
				t.Errorf("int4: %s is %q, want %s (%v)", name, q[name], want, q)
			}
		}
	}
}
