package openvino_test

import (
	"testing"

	"github.com/mtpconv/mtpconv/convert"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/target/openvino" // registers the target
)

// A family whose head no OpenVINO pipeline runs is refused with the
// family's one sentence, before anything is planned.
func TestRefusesFamilyNoPipelineRuns(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	tg := testmodel.Target(t, "openvino")
	if _, err := tg.Plan(m, convert.Options{}); err != nil {
		t.Fatalf("qwen3_5_moe: %v", err)
	}
	m.Spec.OpenVINO.Refusal = "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."
	_, err := tg.Plan(m, convert.Options{})
	if err == nil || err.Error() != "--target openvino: OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only." {
		t.Fatalf("err = %v", err)
	}
}
