package families_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Every target but gguf and mlx refuses 0731's DSpark stages in one sentence
// naming the tool that writes what the runtime drafts with, or that no
// runtime runs them; gguf refuses what it does not write of them (a graft,
// llama-quantize's types), mlx writes the splitter's folder in its one form
// only (deepseek_v41_mlx_test.go), and both refuse all of V4.1.
func TestDSparkTargetsRefuse(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.DSparkV4Flash)
	if m.Family.Name != "deepseek_v41" || !m.FP8 {
		t.Fatalf("the fixture: family %s, fp8 %v", m.Family, m.FP8)
	}
	for _, c := range []struct {
		target string
		o      targets.Options
		want   string
	}{
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "is a separate drafter model, loaded with -md next to its target's GGUF"},
		{"gguf", targets.Options{GGUFType: "BF16", Set: map[string]bool{targets.OptGGUFType: true}}, "would requantize the MXFP4 experts"},
		{"mlx", targets.Options{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}}, "ignores any quantization asked"},
		{"combined", targets.Options{}, "mlx-lm 0.32.2 has no deepseek_v4 model"},
		{"openvino", targets.Options{}, "OpenVINO GenAI has no DSpark"},
		{"hf", targets.Options{}, "vLLM drafts DSpark stages straight from the release checkpoint"},
	} {
		_, err := testmodel.Plan(t, m, c.target, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s %+v: %v", c.target, c.o, err)
		}
	}
	v41 := testmodel.Load(t, fixtures.DSparkV41Flash)
	if _, err := testmodel.Plan(t, v41, "gguf", targets.Options{}); err == nil || !strings.Contains(err.Error(), "no DeepSeek-V4.1 (deepseek_v41) architecture") {
		t.Errorf("--target gguf of V4.1: %v", err)
	}
}

// 0731's dflash draft, as the converter writes it: each stage a block of
// DeepSeek-V4's (no NextN tensors, no compressors, the router's bias),
// stage 0's main_proj and main_norm as fc and enc.output_norm, the last
// stage's norm, hc_head, Markov and confidence heads at the root, nothing
// of the trunk (token_embd, output); each tensor in its stored type (the
// FP4 experts MXFP4, bf16 matrices BF16, float32 and vectors F32; the FP8
// matrices dequantized to BF16, then Q8_0, which the gguf target's test
// reads in the file).
func TestDSparkGGUFNames(t *testing.T) {
	t.Parallel()
	want := []string{"fc.weight BF16", "enc.output_norm.weight F32", "output_norm.weight F32", "output_hc_fn.weight F32",
		"output_hc_base.weight F32", "output_hc_scale.weight F32", "markov_w1.weight BF16", "markov_w2.weight BF16", "conf_proj.weight BF16"}
	for b := range 3 {
		p := "blk." + strconv.Itoa(b) + "."
		for _, n := range []string{"attn_norm.weight F32", "ffn_norm.weight F32", "attn_q_a.weight BF16", "attn_q_a_norm.weight F32",
			"attn_q_b.weight BF16", "attn_kv.weight BF16", "attn_kv_a_norm.weight F32", "attn_output_a.weight BF16", "attn_output_b.weight BF16",
			"attn_sinks.weight F32", "ffn_gate_inp.weight BF16", "exp_probs_b.bias F32", "ffn_gate_shexp.weight BF16", "ffn_down_shexp.weight BF16",
			"ffn_up_shexp.weight BF16", "hc_attn_fn.weight F32", "hc_attn_base.weight F32", "hc_attn_scale.weight F32", "hc_ffn_fn.weight F32",
			"hc_ffn_base.weight F32", "hc_ffn_scale.weight F32", "ffn_gate_exps.weight MXFP4", "ffn_up_exps.weight MXFP4", "ffn_down_exps.weight MXFP4"} {
			want = append(want, p+n)
		}
	}
	for _, fx := range []string{fixtures.DSparkV4Flash, fixtures.DSparkV4FlashRigged, fixtures.DSparkV4FlashTrunk} {
		wantGGUFNames(t, fx, want...)
	}
}
