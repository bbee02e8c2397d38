package families_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The fixture is described as the family (its whole trunk explained: hash
// table, compressors, indexer, hyper-connections, FP4 experts with their
// scales), the MTP layer apart under mtp.0.; the GGUF plan moves the FP4
// experts into MXFP4 untouched and joins e_proj ∥ h_proj by columns; the
// targets no pinned runtime runs the head on refuse naming it; bad
// configs are refused naming the key.
func TestDeepSeekV4Family(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.DeepSeekV4)
	if m.Family.Name != "deepseek_v4" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil || len(m.MTPExperts) != 1 || len(m.TrunkExperts) != 4 {
		t.Fatalf("family %s depth %d experts %d/%d: %v %v", m.Family, m.MTPDepth, len(m.TrunkExperts), len(m.MTPExperts), m.HeadError(), m.TrunkError())
	}
	if m.HeadLayerPrefix(0) != "mtp.0." || !m.IsHead("mtp.0.e_proj.weight") || m.IsHead("layers.0.attn_norm.weight") || !m.IsBlockScale("mtp.0.ffn.experts.3.w2.scale") {
		t.Errorf("head prefix %s; mtp.0.e_proj head %v; the FP4 scale read with its weight %v", m.HeadLayerPrefix(0), m.IsHead("mtp.0.e_proj.weight"), m.IsBlockScale("mtp.0.ffn.experts.3.w2.scale"))
	}
	p, err := testmodel.Plan(t, m, "gguf", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, o := range p.Tensors {
		switch o.Name {
		case "blk.4.ffn_gate_exps.weight", "blk.4.ffn_up_exps.weight", "blk.4.ffn_down_exps.weight":
			seen++
			if !o.Has(plan.TRepackMXFP4) || o.Has(plan.TDequantFP4) || o.DType != plan.DTypeMXFP4 || o.Quant != nil || len(o.Segments) != 8 || o.Segments[0].Packed != "e2m1" {
				t.Errorf("%s: %v %s %+v: want the 8 experts' FP4 codes moved into MXFP4", o.Name, o.Transforms, o.DType, o.Segments[0])
			}
		case "blk.4.nextn.eh_proj.weight":
			seen++
			s := o.Segments[0]
			if !o.Has(plan.TConcatColumns) || s.Source != "mtp.0.e_proj.weight" || len(s.Then) != 1 || s.Then[0].Source != "mtp.0.h_proj.weight" || o.RowLen != 256 || o.Quant == nil || o.Quant.GGMLType != "Q8_0" {
				t.Errorf("eh_proj: %v %+v row %d quant %+v: want e_proj ∥ h_proj, Q8_0", o.Transforms, s, o.RowLen, o.Quant)
			}
		case "output_hc_fn.weight":
			seen++
			if o.Segments[0].Source != "mtp.0.hc_head_fn" {
				t.Errorf("output_hc_fn from %s: the MTP layer's own hc_head", o.Segments[0].Source)
			}
		}
	}
	if seen != 5 {
		t.Errorf("%d of the 5 tensors checked planned", seen)
	}
	for _, c := range []struct {
		target string
		want   string
	}{
		{"openvino", "runs Qwen3.5 heads only"},
		{"combined", "mlx-lm 0.32.2 has no DeepSeek-V4 model"},
		{"gguf", "only the sidecar at --head-precision bf16 or f16"},
	} {
		o := targets.Options{}
		if c.target == "gguf" {
			o.HeadPrecision = "int4"
		}
		if _, err := testmodel.Plan(t, m, c.target, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
	// --target hf: the head under the release's own names (vLLM's
	// DeepSeekV4MTP and SGLang's deepseek_v4_nextn read them, their rules in
	// convert/targets/hf); a repo of the head alone has no quantization
	// config, so its FP4 experts are decoded to bf16 at their full width.
	hp, err := testmodel.Plan(t, m, "hf", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var hfNames []string
	for _, o := range hp.Tensors {
		hfNames = append(hfNames, o.Name)
		if o.Name == "mtp.0.ffn.experts.0.w1.weight" && (o.DType != "BF16" || !slices.Equal(o.Shape, []int64{int64(m.Config.MoeIntermediateSize), int64(m.Config.HiddenSize)})) {
			t.Errorf("%s: %s %v, want BF16 [%d %d]", o.Name, o.DType, o.Shape, m.Config.MoeIntermediateSize, m.Config.HiddenSize)
		}
	}
	for _, n := range []string{"mtp.0.e_proj.weight", "mtp.0.h_proj.weight", "mtp.0.hc_head_fn", "mtp.0.ffn.experts.0.w1.weight"} {
		if !slices.Contains(hfNames, n) {
			t.Errorf("--target hf lacks %s", n)
		}
	}
	if slices.ContainsFunc(hfNames, func(n string) bool { return strings.HasSuffix(n, ".scale") }) {
		t.Errorf("--target hf at bf16 wrote a scale: %v", hfNames)
	}
	// mlx-vlm's deepseek_v4_mtp drafter: the FP4 experts moved as mxfp4
	// (stacked gate, down, up as its sanitize stacks them), wo_a in its
	// output groups, names as its sanitize renames them; the splitter's
	// one form only.
	mp, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var experts []string
	for _, o := range mp.Tensors {
		if strings.Contains(o.Name, "switch_mlp") {
			experts = append(experts, o.Name)
			if !o.Has(plan.TMoveMXFP4) || o.Has(plan.TQuantize) || o.Quant == nil || o.Quant.GroupSize != 32 {
				t.Errorf("%s: %v %+v: want the FP4 codes moved as mxfp4 of 32", o.Name, o.Transforms, o.Quant)
			}
		}
		switch o.Name {
		case "decoder.attn.wo_a.weight":
			if len(o.Shape) != 3 || o.Shape[0] != 2 || o.Shape[1] != 32 {
				t.Errorf("wo_a shape %v, want [o_groups, o_lora_rank, in]", o.Shape)
			}
		case "decoder.ffn.gate.e_score_correction_bias", "decoder.attn_hc.fn", "hc_head.scale", "decoder.ffn.shared_experts.down_proj.weight", "e_proj.weight":
		default:
			continue
		}
		experts = append(experts, o.Name)
	}
	if want := []string{"decoder.ffn.switch_mlp.gate_proj.weight", "decoder.ffn.switch_mlp.down_proj.weight", "decoder.ffn.switch_mlp.up_proj.weight"}; !slices.Equal(experts[len(experts)-3:], want) || len(experts) != 9 {
		t.Errorf("drafter tensors %v: want the splitter's names, the experts last in its stacking order %v", experts, want)
	}
	if _, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}}); err == nil || !strings.Contains(err.Error(), "ignores any quantization asked") {
		t.Errorf("--target mlx --head-precision int4: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(fixtures.Ensure(t, fixtures.DeepSeekV4), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{
		`"num_key_value_heads": 1`:       `"num_key_value_heads": 2`,
		`"scoring_func": "sqrtsoftplus"`: `"scoring_func": "softmax"`,
		`"num_hash_layers": 1`:           `"num_hash_layers": 5`,
		`"compress_ratios": [`:           `"compress_ratios": [0, `,
		`"use_cache": true`:              `"use_cache": true, "quantization_config": {"quant_method": "awq", "bits": 4}`,
	} {
		bad := strings.Replace(string(raw), from, to, 1)
		if bad == string(raw) {
			t.Fatalf("the fixture's config has no %s", from)
		}
		want := map[string]string{`"num_key_value_heads": 1`: "num_key_value_heads is 2", `"scoring_func": "sqrtsoftplus"`: `scoring_func is "softmax"`,
			`"num_hash_layers": 1`: "num_hash_layers is 5", `"compress_ratios": [`: "compress_ratios has 6 entries", `"use_cache": true`: `quant_method is "awq"`}[from]
		if _, err := model.ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", to, err, want)
		}
	}
}
