package families_test

import (
	"strings"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The release's block FP8 (e4m3 X.weight with an F8_E8M0 X.scale per
// 128 × 128, quantization_config scale_fmt ue8m0) is read: every FP8 weight
// found with its scale and checked, the scales read with their weights (not
// unexplained tensors), the FP4 experts' scales still theirs; the 0731
// DSpark fixture (the same storage) is described without an FP8 problem.
// The GGUF plan dequantizes the FP8 matrices into Q8_0 (e_proj ∥ h_proj each
// part with its own scales); the MLX drafter moves them as mxfp8 where
// they are whole 128 × 128 blocks and refuses partial blocks.
func TestDeepSeekV4BlockFP8(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.DeepSeekV4FP8)
	if m.Family.Name != "deepseek_v4" || !m.FP8 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s fp8 %v: %v %v", m.Family, m.FP8, m.HeadError(), m.TrunkError())
	}
	// 4 trunk layers × 8 (attention 5, shared experts 3) + the ratio-4 layer's indexer wq_b + the MTP layer's 8 + e_proj, h_proj
	if i := m.FP8Info; i == nil || i.ScaleDType != "F8_E8M0" || i.Weights != 4*8+1+8+2 || i.Format != "e4m3" {
		t.Fatalf("FP8 info %+v", i)
	}
	for name, want := range map[string]bool{"mtp.0.attn.wq_a.scale": true, "layers.2.attn.indexer.wq_b.scale": true, "mtp.0.e_proj.scale": true,
		"mtp.0.ffn.experts.3.w2.scale": true, "mtp.0.attn.wq_a.weight": false, "mtp.0.hc_head_scale": false} {
		if m.IsBlockScale(name) != want {
			t.Errorf("IsBlockScale(%s) = %v", name, !want)
		}
	}
	if scale, block, ok := m.BlockScale("mtp.0.attn.wq_b.weight"); !ok || scale != "mtp.0.attn.wq_b.scale" || len(block) != 2 || block[0] != 128 {
		t.Errorf("wq_b's block scale %s %v %v", scale, block, ok)
	}
	p, err := testmodel.Plan(t, m, "gguf", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.Tensors {
		switch s := o.Segments[0]; o.Name {
		case "blk.4.attn_q_a.weight", "blk.4.ffn_down_shexp.weight":
			if !o.Has(plan.TDequantFP8) || o.Quant == nil || o.Quant.GGMLType != "Q8_0" || s.Scale != strings.TrimSuffix(s.Source, "weight")+"scale" {
				t.Errorf("%s: %v %+v from %+v: want dequantized with its ue8m0 scale, Q8_0", o.Name, o.Transforms, o.Quant, s)
			}
		case "blk.4.nextn.eh_proj.weight":
			if !o.Has(plan.TDequantFP8) || !o.Has(plan.TConcatColumns) || s.Scale != "mtp.0.e_proj.scale" || len(s.Then) != 1 || s.Then[0].Scale != "mtp.0.h_proj.scale" {
				t.Errorf("eh_proj: %v from %+v: want e_proj ∥ h_proj each with its own scales", o.Transforms, s)
			}
		}
	}
	// Partial blocks: the splitter's repeated scales would not fit the weight.
	if _, err := testmodel.Plan(t, m, "mlx", targets.Options{}); err == nil || !strings.Contains(err.Error(), "mtp.0.attn.wkv.weight (shape [64 128]) is not whole 128 × 128 blocks") {
		t.Errorf("--target mlx of an FP8 head in partial blocks: %v, want a refusal naming the tensor", err)
	}
	// Whole blocks: every FP8 weight moved as mxfp8 of 32 (codes as they
	// are, each block's scale repeated), nothing dequantized.
	b := testmodel.Load(t, fixtures.DeepSeekV4FP8Blocks)
	p, err = testmodel.Plan(t, b, "mlx", targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, o := range p.Tensors {
		if o.Has(plan.TDequantFP8) {
			t.Errorf("%s: %v: the splitter keeps the FP8 codes", o.Name, o.Transforms)
		}
		if o.Has(plan.TMoveMXFP8) {
			if o.Quant == nil || o.Quant.GroupSize != 32 || o.Segments[0].Block[0] != 128 {
				t.Errorf("%s: %+v from %+v: want mxfp8 of 32 from 128 × 128 blocks", o.Name, o.Quant, o.Segments[0])
			}
			moved++
		}
	}
	if moved != 10 { // wq_a, wq_b, wkv, wo_a, wo_b, the 3 shared experts, e_proj, h_proj
		t.Errorf("%d FP8 tensors moved as mxfp8, want 10", moved)
	}
	d := testmodel.Load(t, fixtures.DSparkV4Flash)
	if i := d.FP8Info; i == nil || i.ScaleDType != "F8_E8M0" || i.Weights == 0 {
		t.Errorf("0731's FP8 info %+v", i)
	}
	for _, p := range append(d.MTPProblems, d.TrunkProblems...) {
		if strings.Contains(p, ".scale ") || strings.Contains(p, "block scale") {
			t.Errorf("0731: %s", p)
		}
	}
}
