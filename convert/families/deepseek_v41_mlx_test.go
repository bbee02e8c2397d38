package families_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// 0731's --target mlx is mlx-vlm's DSpark splitter's deepseek_v4_dspark
// folder: stage s under stages.{s}. in a shard of its own, deepseek_v4_mtp's
// block names without decoder., the Markov head at the root, the confidence
// head dropped; the FP4 experts stacked and moved mxfp4, every block-FP8
// weight moved mxfp8 (nothing dequantized), wo_a per group; config.json the
// splitter's extra keys, block_size dspark_block_size + 1. V4.1 is refused
// (mlx-vlm has no splitter for it).
func TestDSparkMLXDrafter(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.DSparkV4Flash)
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]plan.OutTensor{}
	stageOf := func(name string) string {
		if rest, ok := strings.CutPrefix(name, "stages."); ok {
			return rest[:1]
		}
		return "2" // the Markov head: written with the last stage
	}
	for _, o := range p.Tensors {
		byName[o.Name] = o
		if strings.Contains(o.Name, "decoder.") || strings.Contains(o.Name, "confidence") || strings.HasPrefix(o.Name, "mtp.") {
			t.Errorf("%s: not a name of the splitter's", o.Name)
		}
		if want := "model-0000" + string(rune('1'+stageOf(o.Name)[0]-'0')) + "-of-00003.safetensors"; o.File != want {
			t.Errorf("%s in %s, want %s", o.Name, o.File, want)
		}
		if o.Has(plan.TDequantFP8) || o.Has(plan.TDequantFP4) {
			t.Errorf("%s: %v: the splitter keeps the release's codes", o.Name, o.Transforms)
		}
	}
	if !slices.Equal(p.TensorFiles, []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
		t.Errorf("tensor files %v", p.TensorFiles)
	}
	for name, want := range map[string]plan.Transform{
		"stages.0.main_proj.weight": plan.TMoveMXFP8, "stages.2.attn.wkv.weight": plan.TMoveMXFP8,
		"stages.1.ffn.shared_experts.down_proj.weight": plan.TMoveMXFP8, "stages.1.ffn.switch_mlp.up_proj.weight": plan.TMoveMXFP4,
	} {
		if o, ok := byName[name]; !ok || !o.Has(want) {
			t.Errorf("%s: %+v, want %s", name, o.Transforms, want)
		}
	}
	for name, shape := range map[string][]int64{"stages.0.attn.wo_a.weight": {2, 128, 128}, "markov_head.markov_w2.weight": {512, 32},
		"stages.2.hc_head.fn": {4, 512}, "stages.0.ffn.gate.e_score_correction_bias": {4}} {
		if o, ok := byName[name]; !ok || !slices.Equal(o.Shape, shape) {
			t.Errorf("%s: shape %v, want %v", name, o.Shape, shape)
		}
	}
	var cfg map[string]any
	for _, f := range p.Files {
		if f.Name == "config.json" {
			if err := json.Unmarshal(f.Contents, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	q, _ := cfg["quantization"].(map[string]any)
	if cfg["model_type"] != "deepseek_v4_dspark" || cfg["n_mtp_layers"] != 3.0 || cfg["block_size"] != 5.0 || cfg["mask_token_id"] != 500.0 ||
		q["stages.0.main_proj"] == nil || q["stages.2.ffn.switch_mlp.gate_proj"] == nil {
		t.Errorf("config.json %v", cfg)
	}
	v41 := testmodel.Load(t, fixtures.DSparkV41Flash)
	if _, err := testmodel.Plan(t, v41, "mlx", targets.Options{}); err == nil || !strings.Contains(err.Error(), "no DSpark splitter for DeepSeek-V4.1") {
		t.Errorf("--target mlx of V4.1: %v", err)
	}
}
