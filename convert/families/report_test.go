package families

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// inspect speaks each family's own terms: its attention, its layer list,
// its routing, and only the config keys it reads (no linear-attention keys
// for GLM, no MLA keys for Qwen).
func TestReportSpeaksTheFamily(t *testing.T) {
	for _, tc := range []struct {
		fixture      string
		lines        []string // lines of the text report
		dims, noDims []string // keys of the JSON dims
	}{
		{fixtures.Qwen36, []string{
			"attention:     gated full attention, heads 4/2 of dim 64 (rotary 16, theta 1e+07); gated delta-net linear attention, heads 2/4 of dims 64/64, conv kernel 4",
			"layers:        4 (3 linear attention, 1 full attention)",
		}, []string{"linear_num_key_heads", "linear_conv_kernel_dim"}, []string{"kv_lora_rank", "first_k_dense_replace"}},
		{fixtures.GLM45, []string{
			"attention:     GQA, heads 4/2 of dim 64 (rotary 32, theta 1e+06), q/k/v biases, q/k norms",
			"layers:        3 (1 dense MLP, 2 MoE), all full attention",
			"routing:       sigmoid, e_score_correction_bias for the choice, n_group 1, topk_group 1, weights renormalised, scaled by 2.5",
		}, []string{"first_k_dense_replace", "routed_scaling_factor", "use_qk_norm"}, []string{"linear_num_key_heads", "kv_lora_rank"}},
		{fixtures.GLM47Flash, []string{
			"attention:     multi-head latent attention, 4 heads: q_lora_rank 64, kv_lora_rank 64, qk dims 32 nope + 16 rope, v dim 32 (theta 1e+06)",
			"layers:        2 (1 dense MLP, 1 MoE), all full attention",
		}, []string{"kv_lora_rank", "qk_nope_head_dim", "v_head_dim"}, []string{"linear_num_key_heads", "use_qk_norm"}},
	} {
		m, err := model.Load(source.Dir(fixtures.Ensure(t, tc.fixture)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		r, err := m.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		r.WriteText(&text)
		got := strings.Split(text.String(), "\n")
		for _, want := range tc.lines {
			if !slices.Contains(got, want) {
				t.Errorf("%s: no line %q in\n%s", tc.fixture, want, text.String())
			}
		}
		for _, k := range tc.dims {
			if _, ok := r.Dims[k]; !ok {
				t.Errorf("%s: dims lack %s", tc.fixture, k)
			}
		}
		for _, k := range tc.noDims {
			if _, ok := r.Dims[k]; ok {
				t.Errorf("%s: dims hold %s, which the family does not read", tc.fixture, k)
			}
		}
	}
}
