package families_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The MXFP8 fixture is described as the family (the whole trunk explained:
// streams, gates, sinks, indexers in the full layers only, fused experts,
// every MXFP8 scale read with its tensor), the MTP layer apart under
// model.mtp_layers.0.; the mlx plan moves every whole MXFP8 tensor as
// mxfp8 and re-quantizes kv_b_proj's halves from the decoded values, as
// mlx-vlm's hy_v4_mtp splitter does; the targets no pinned runtime runs
// the head on refuse naming why; bad configs are refused naming the key.
func TestHyV4Family(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Hy4)
	if m.Family.Name != "hy_v4" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if m.MXFP8 != 48 || m.FP8 || m.FP8Info != nil {
		t.Errorf("%d MXFP8 tensors (FP8 %v %+v): want the fixture's 48, none read as block FP8", m.MXFP8, m.FP8, m.FP8Info)
	}
	const mtp = "model.mtp_layers.0."
	if m.HeadLayerPrefix(0) != mtp || !m.IsHead(mtp+"eh_proj.weight") || m.IsHead("model.layers.2.input_layernorm.weight") ||
		!m.IsBlockScale(mtp+"mlp.experts.gate_up_proj_scale") || !m.IsBlockScale(mtp+"self_attn.q_a_proj.weight_scale") {
		t.Errorf("head prefix %s, or the MXFP8 scales not read with their tensors", m.HeadLayerPrefix(0))
	}
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]plan.OutTensor{}
	for _, o := range p.Tensors {
		byName[o.Name] = o
	}
	for name, want := range map[string][]plan.Transform{
		"decoder.mlp.switch_mlp.gate_up_proj.weight": {plan.TMoveMXFP8},
		"decoder.self_attn.q_a_proj.weight":          {plan.TMoveMXFP8},
		"decoder.self_attn.embed_q.weight":           {plan.TDequantMXFP8, plan.TTranspose, plan.TCast, plan.TQuantize},
		"decoder.self_attn.unembed_out.weight":       {plan.TDequantMXFP8, plan.TCast, plan.TQuantize},
		"decoder.self_attn.learnable_sink_param":     nil,
		"decoder.mlp.gate.weight":                    nil,
		"eh_proj.weight":                             nil,
		"norm.weight":                                nil,
	} {
		o, ok := byName[name]
		if !ok {
			t.Errorf("%s not planned", name)
			continue
		}
		if strings.Join(transformNames(o.Transforms), ",") != strings.Join(transformNames(want), ",") {
			t.Errorf("%s: transforms %v, want %v", name, o.Transforms, want)
		}
		if (want != nil) != (o.Quant != nil) || o.Quant != nil && (o.Quant.GroupSize != 32 || o.Quant.Bits != 8) {
			t.Errorf("%s: quant %+v", name, o.Quant)
		}
	}
	if o := byName["decoder.mlp.switch_mlp.gate_up_proj.weight"]; len(o.Shape) != 3 || o.Shape[1] != 128 {
		t.Errorf("fused experts planned %v: want them kept fused [E, 2I, H]", o.Shape)
	}
	if _, ok := byName["decoder.mlp.switch_mlp.gate_proj.weight"]; ok {
		t.Error("the fused experts split: the splitter keeps gate_up_proj whole")
	}
	for _, c := range []struct {
		target string
		opts   targets.Options
		want   string
	}{
		{"gguf", targets.Options{}, "conversion/hy_v4.py"},
		{"openvino", targets.Options{}, "runs Qwen3.5 heads only"},
		{"combined", targets.Options{}, "mlx-lm 0.32.2 has no Hy4 model"},
		{"mlx", targets.Options{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}}, "ignores any quantization asked"},
	} {
		if _, err := testmodel.Plan(t, m, c.target, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v, want %q", c.target, err, c.want)
		}
	}
	// --target hf is ported (vLLM 0.34.0's HYV4MTP, SGLang 0.5.23's NextN class; convert/targets/hf).
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err != nil {
		t.Errorf("--target hf: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(fixtures.Ensure(t, fixtures.Hy4), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"indexer_types": [`, `"indexer_types": ["full", `, "indexer_types has 4 entries"},
		{`"indexer_types": [
    "full"`, `"indexer_types": [
    "shared"`, `indexer_types[0] is "shared"`},
		{`"num_nextn_predict_layers": 1`, `"num_nextn_predict_layers": 2`, "runs one MTP layer"},
		{`"hc_mult": 4`, `"hc_mult": 0`, "hc_mult"},
		{`"use_cache": true`, `"use_cache": true, "quantization_config": {"quant_method": "mxfp8"}`, "knows no quantization_config"},
	} {
		bad := strings.Replace(string(raw), c.from, c.to, 1)
		if bad == string(raw) {
			t.Fatalf("the fixture's config has no %s", c.from)
		}
		if _, err := model.ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.to, err, c.want)
		}
	}
}

func transformNames(ts []plan.Transform) []string {
	var out []string
	for _, x := range ts {
		out = append(out, string(x))
	}
	return out
}
