package families_test

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Every target refuses DSpark stages in one sentence naming the tool that
// writes what the runtime drafts with, or that no runtime runs them; mlx
// writes 0731's splitter folder in its one form only (deepseek_v41_mlx_test.go).
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
		{"gguf", targets.Options{}, "`convert_hf_to_gguf.py --dspark --target-model-dir` writes the `dflash` draft"},
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "no DeepSeek-V4.1 (deepseek_v41) architecture"},
		{"mlx", targets.Options{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}}, "ignores any quantization asked"},
		{"combined", targets.Options{}, "mlx-lm 0.32.2 has no deepseek_v4 model"},
		{"openvino", targets.Options{}, "OpenVINO GenAI has no DSpark"},
		{"hf", targets.Options{}, "vLLM drafts DSpark stages straight from the release checkpoint"},
	} {
		_, err := testmodel.Plan(t, m, c.target, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
}
