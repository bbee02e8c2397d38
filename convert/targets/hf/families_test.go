package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// A family whose MTP model vLLM has but whose rules are not ported
// (HFSpec.Unported) is refused by --target hf in its one sentence, and
// inspect's serving report of its checkpoint says it is not judged: no
// problem, so inspect --strict does not fail a healthy checkpoint. A family
// no runtime serves (HFSpec.Refusal) is refused too, and its checkpoint's
// report names that as the problem.
func TestFamiliesWithoutRules(t *testing.T) {
	for _, c := range []struct {
		fixture, why string
		unported     bool
		depth        int
	}{
		{fixtures.MiMoV25FP8, "MiMoV2MTP runs the first of MiMo-V2's 3 MTP layers only", true, 3},
		{fixtures.Hy3, "how vLLM's hy_v3_mtp and SGLang build Hy3's head", true, 3},
		{fixtures.Ling3, "how vLLM's bailing_moe_v3_mtp and SGLang build Ling-3.0's head", true, 1},
		{fixtures.Step35, "how vLLM's step3p5_mtp and SGLang build Step-3.5/3.7-Flash's heads", true, 3},
		{fixtures.NemotronHMoE, "how vLLM's nemotron_h_mtp and SGLang build Nemotron-H's head", true, 1},
		{fixtures.GLM53Flash, "neither vLLM 0.32.0 nor SGLang 0.5.23 has a GLM-5.3-Flash MTP model", false, 1},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			m := testmodel.Load(t, c.fixture)
			if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("--target hf: %v", err)
			}
			r, err := Serving(m)
			if err != nil {
				t.Fatal(err)
			}
			if c.unported {
				if !strings.Contains(r.NotJudged, c.why) || r.Err() != nil || r.TensorDepth != c.depth {
					t.Errorf("serving report: %+v (%v)", r, r.Err())
				}
				return
			}
			if r.NotJudged != "" || r.Err() == nil || !strings.Contains(r.Err().Error(), c.why) {
				t.Errorf("serving report: %+v (%v)", r, r.Err())
			}
		})
	}
}
