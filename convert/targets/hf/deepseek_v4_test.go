package hf

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// dsv4Release is the DeepSeek-V4 release's quantization_config: block FP8
// with ue8m0 .scale tensors (vLLM reads it as DeepseekV4FP8Config).
const dsv4Release = `{"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}`

// TestDecideDeepSeekV4: the MTP layer mtp.0.* asked of vLLM as
// model.layers.4.* (wq_a and wkv as attn.fused_wqa_wkv, the shared expert's
// w1/w3 as gate_up_proj and w2 as down_proj, no packed mapping: the fused
// names themselves), of SGLang as model.e_proj / model.decoder.* (self_attn,
// mlp, gate/up/down_proj); the routed experts by expert 0's w1, w3, w2 in
// vLLM's compressed-tensors and by an entry naming them under FP8.
func TestDecideDeepSeekV4(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.DeepSeekV4) // 4 trunk layers: vLLM's model.layers.4
	for _, tc := range []struct {
		name, quant, module string
		want                want
	}{
		{"the release quantizes e_proj in both", dsv4Release, "mtp.0.e_proj", want{"q", "q", "DeepseekV4FP8Config"}},
		{"the checkpoint's name is no runtime's", withList(dsv4Release, "modules_to_not_convert", "mtp.0.e_proj"), "mtp.0.e_proj", want{"q", "q", "not matched"}},
		{"vLLM's model.layers.4.e_proj", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.e_proj"), "mtp.0.e_proj", want{"u", "q", "matched by modules_to_not_convert, exact"}},
		{"SGLang's model.e_proj", withList(dsv4Release, "modules_to_not_convert", "model.e_proj"), "mtp.0.e_proj", want{"q", "u", "not matched"}},
		{"vLLM matches the fused wq_a ∥ wkv by its own name", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.attn.fused_wqa_wkv"), "mtp.0.attn.wkv", want{"u", "q", "exact"}},
		{"vLLM's draft has no packed mapping: the shards are not read", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.attn.wq_a", "model.layers.4.attn.wkv"), "mtp.0.attn.wq_a", want{"q", "q", "not matched"}},
		{"SGLang builds wq_a apart, under self_attn", withList(dsv4Release, "modules_to_not_convert", "model.decoder.self_attn.wq_a"), "mtp.0.attn.wq_a", want{"q", "u", "not matched"}},
		{"the shared expert's w2 is vLLM's down_proj", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.ffn.shared_experts.down_proj"), "mtp.0.ffn.shared_experts.w2", want{"u", "q", ""}},
		{"and SGLang's mlp.shared_experts.down_proj", withList(dsv4Release, "modules_to_not_convert", "model.decoder.mlp.shared_experts.down_proj"), "mtp.0.ffn.shared_experts.w2", want{"q", "u", ""}},
		{"w1 is vLLM's gate_up_proj", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.ffn.shared_experts.gate_up_proj"), "mtp.0.ffn.shared_experts.w1", want{"u", "q", ""}},
		{"the routed experts quantized (MXFP4) by the release", dsv4Release, "mtp.0.ffn.experts", want{"q", "q", "DeepseekV4FP8Config"}},
		{"the routed experts by an entry naming them", withList(dsv4Release, "modules_to_not_convert", "model.layers.4.ffn.experts"), "mtp.0.ffn.experts", want{"u", "q", ""}},
		{"compressed-tensors: vLLM asks expert 0's w1, w3, w2", withIgnore(ctW8A8, "model.layers.4.ffn.experts.0.w1", "model.layers.4.ffn.experts.0.w3", "model.layers.4.ffn.experts.0.w2"), "mtp.0.ffn.experts", want{"u", "q", "matched by ignore"}},
		{"compressed-tensors: vLLM's gate_proj names are not its experts'", withIgnore(ctW8A8, "model.layers.4.ffn.experts.0.gate_proj", "model.layers.4.ffn.experts.0.up_proj", "model.layers.4.ffn.experts.0.down_proj"), "mtp.0.ffn.experts", want{"q", "q", "config_groups target"}},
		{"compressed-tensors: SGLang's experts by gate/up/down_proj", withIgnore(ctW8A8, "model.decoder.mlp.experts.0.gate_proj", "model.decoder.mlp.experts.0.up_proj", "model.decoder.mlp.experts.0.down_proj"), "mtp.0.ffn.experts", want{"q", "u", ""}},
		{"compressed-tensors: some of vLLM's expert projections ignored", withIgnore(ctW8A8, "model.layers.4.ffn.experts.0.w1"), "mtp.0.ffn.experts", want{"e", "q", "some but not all"}},
		{"compressed-tensors: the layer's prefix for vLLM", withIgnore(ctW8A8, `re:^model\.layers\.4\..*`), "mtp.0.h_proj", want{"u", "q", "matched by ignore"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkDecide(t, m, 1, tc.quant, tc.module, Repo{Tensors: m.Checkpoint.Tensors}, tc.want)
		})
	}
}

// TestDeepSeekV4Repos: the head into a headless copy of the block-FP8
// release goes in as stored (FP8 and FP4 codes with their .scale byte for
// byte; inspect clean), at bf16 with every module excluded under each
// runtime's name; inspect --strict's verdicts on the release (clean), the
// headless repo, the head without its .scale tensors (imp#1428's case in
// the release's naming); a depth declared deeper than held is
// TestDepthVerdictPerClass's (vLLM 0.32.0's completeness check).
func TestDeepSeekV4Repos(t *testing.T) {
	t.Parallel()
	src := testmodel.Load(t, fixtures.DeepSeekV4FP8)
	all := func(string) bool { return true }
	t.Run("the release is clean", func(t *testing.T) {
		r, err := Serving(loadRepo(t, makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8, Keep: all})))
		if err != nil || r.Err() != nil || len(r.Modules) != 11 {
			t.Fatalf("%v %v %d modules", err, r.Err(), len(r.Modules))
		}
		for _, mod := range r.Modules {
			if !mod.VLLM.Quantized || !mod.SGLang.Quantized || mod.Form != "block FP8" && mod.Form != "MXFP4" {
				t.Errorf("%s stored %s (%s) built %+v %+v", mod.Name, mod.Stored, mod.Form, mod.VLLM, mod.SGLang)
			}
		}
	})
	t.Run("headless", func(t *testing.T) {
		r, err := Serving(loadRepo(t, makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8})))
		if err != nil || r.Err() == nil || !strings.Contains(r.Err().Error(), "mtp.*: the repo holds no MTP head") ||
			!strings.Contains(r.Mend, "--target hf --into") {
			t.Fatalf("%v %v", err, r.Err())
		}
	})
	t.Run("without the .scale tensors", func(t *testing.T) {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8, Keep: func(n string) bool { return !strings.HasSuffix(n, ".scale") }})
		r, err := Serving(loadRepo(t, dir))
		if err != nil || r.Err() == nil {
			t.Fatalf("%v %v", err, r.Err())
		}
		for _, s := range []string{"mtp.0.e_proj: stored block FP8 (.scale) without its scale (first missing: mtp.0.e_proj.scale)",
			"mtp.0.ffn.experts: stored FP4 (.scale) without its scale (first missing: mtp.0.ffn.experts.0.w1.scale)"} {
			if !strings.Contains(r.Err().Error(), s) {
				t.Errorf("no %q in %v", s, r.Err())
			}
		}
	})
	t.Run("X.scale found in the repo without scale_fmt", func(t *testing.T) {
		// Flash-Base's config (expert_dtype fp8) may not say ue8m0: the
		// trunk's X.scale tensors say how the head's are named.
		plain := `{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}`
		r, err := Serving(loadRepo(t, makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8, Quant: plain, Keep: all})))
		if err != nil || r.Err() != nil {
			t.Fatalf("%v %v", err, r.Err())
		}
		r, err = Serving(loadRepo(t, makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8, Quant: plain,
			Keep: func(n string) bool { return n != "mtp.0.wq_b.scale" && n != "mtp.0.attn.wq_b.scale" }})))
		if err != nil || r.Err() == nil || !strings.Contains(r.Err().Error(), "first missing: mtp.0.attn.wq_b.scale") {
			t.Fatalf("%v %v", err, r.Err())
		}
	})
	t.Run("SGLang takes one layer only", func(t *testing.T) {
		m := testmodel.Load(t, fixtures.DeepSeekV4)
		if got := depthVerdict(SGLang, m, nil, 2, 1); !strings.Contains(got, "num_nextn_predict_layers == 1") {
			t.Errorf("2 declared: %q", got)
		}
		if got := depthVerdict(SGLang, testmodel.Load(t, fixtures.DeepSeekV3), nil, 2, 1); got != "" {
			t.Errorf("DeepSeek-V3's NextN in SGLang builds one layer whatever is declared: %q", got)
		}
	})
	t.Run("into the headless release, as stored", func(t *testing.T) {
		dir, got := intoAsStored(t, src, fixtures.DeepSeekV4FP8)
		if r, err := Serving(got); err != nil || r.Err() != nil {
			t.Fatalf("%v %v", err, r.Err())
		}
		if rep, err := manifests.Verify(context.Background(), dir, src.Checkpoint); err != nil || !rep.OK || rep.Recomputed == 0 {
			t.Fatalf("verify --src: %v %+v", err, rep)
		}
	})
	t.Run("into the headless release at bf16", func(t *testing.T) {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4FP8})
		if _, err := exportInto(t, src, dir, targets.Options{HeadPrecision: "bf16", Set: map[string]bool{targets.OptHeadPrecision: true}}); err != nil {
			t.Fatal(err)
		}
		q := quantOf(t, dir)
		for _, e := range []string{"model.layers.4.e_proj", "model.e_proj", "model.layers.4.attn.fused_wqa_wkv", "model.decoder.self_attn.wkv",
			"model.layers.4.ffn.shared_experts.gate_up_proj", "model.decoder.mlp.shared_experts.up_proj", "model.layers.4.ffn.experts", "model.decoder.mlp.experts"} {
			if !slices.Contains(q.Ignore, e) {
				t.Errorf("%s lacks %s: %v", q.IgnoreKey, e, q.Ignore)
			}
		}
		r, err := Serving(loadRepo(t, dir))
		if err != nil || r.Err() != nil {
			t.Fatalf("%v %v", err, r.Err())
		}
		for _, mod := range r.Modules {
			if mod.VLLM.Quantized || mod.SGLang.Quantized || mod.Stored != "bf16" {
				t.Errorf("%s stored %s built %+v %+v", mod.Name, mod.Stored, mod.VLLM, mod.SGLang)
			}
		}
		// The FP4 experts decoded and the FP8 weights dequantized, recomputed.
		if rep, err := manifests.Verify(context.Background(), dir, src.Checkpoint); err != nil || !rep.OK || rep.Recomputed == 0 {
			t.Fatalf("verify --src: %v %+v", err, rep)
		}
	})
	t.Run("into a compressed-tensors repo", func(t *testing.T) {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4, Quant: ctW8A8})
		if _, err := exportInto(t, testmodel.Load(t, fixtures.DeepSeekV4), dir, targets.Options{}); err != nil {
			t.Fatal(err)
		}
		r, err := Serving(loadRepo(t, dir))
		if err != nil || r.Err() != nil || len(r.Modules) != 11 {
			t.Fatalf("%v %v", err, r.Err())
		}
	})
}

// TestDeepSeekV4IntoEachMethod: the bf16 head --into a headless DeepSeek-V4
// repo of each method a community quantization comes in, each exclusion
// naming every module as vLLM (model.layers.4.*, its fused names) and
// SGLang (model.decoder.*, model.e_proj) ask for it; inspect clean after. GPTQ is refused without
// --runtime (SGLang builds every MoE experts block GPTQ) and mended with
// --runtime vllm.
func TestDeepSeekV4IntoEachMethod(t *testing.T) {
	t.Parallel()
	src := testmodel.Load(t, fixtures.DeepSeekV4)
	nvfp4 := `{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}`
	for _, tc := range []struct {
		name, quant string
		entries     []string
		runtime     string // the --runtime --into needs, "" none
	}{
		{"compressed-tensors", ctW8A8, []string{`re:^mtp\..*`, `re:^model\.layers\.4\.attn\.fused_wqa_wkv.*`, `re:^model\.layers\.4\.ffn\.experts.*`, `re:^model\.decoder\.self_attn\.wq_a.*`, `re:^model\.decoder\.mlp\.experts.*`, `re:^model\.e_proj.*`}, ""},
		{"AWQ", awq4, []string{"mtp.", "model.layers.4.e_proj", "model.layers.4.ffn.shared_experts.gate_up_proj", "model.decoder.self_attn.wkv", "model.decoder.mlp.shared_experts.up_proj", "model.e_proj", "model.h_proj"}, ""},
		{"ModelOpt FP8", modelOpt, []string{"mtp.*", "model.layers.4.attn.fused_wqa_wkv*", "model.decoder.self_attn.wq_a*", "model.e_proj*"}, ""},
		{"ModelOpt NVFP4", nvfp4, []string{"mtp.*", "model.layers.4.ffn.experts*", "model.decoder.mlp.experts*"}, ""},
		{"Quark", quark, []string{`re:^model\.layers\.4\.h_proj.*`, "mtp.0.ffn.experts", "model.decoder.mlp.experts"}, ""},
		{"GPTQ", gptq4, []string{`-:^mtp\..*`, `-:^model\.layers\.4\.attn\.fused_wqa_wkv.*`, `-:^model\.layers\.4\.ffn\.experts.*`}, "vllm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeRepo(t, repoSpec{Fixture: fixtures.DeepSeekV4, Quant: tc.quant})
			o := targets.Options{}
			if tc.runtime != "" {
				if _, err := exportInto(t, src, dir, o); err == nil || !strings.Contains(err.Error(), "--runtime "+tc.runtime) {
					t.Fatalf("without --runtime: %v", err)
				}
				o = targets.Options{Runtime: tc.runtime, Set: map[string]bool{targets.OptRuntime: true}}
			}
			if _, err := exportInto(t, src, dir, o); err != nil {
				t.Fatal(err)
			}
			q := quantOf(t, dir)
			list := append(slices.Clone(q.Ignore), q.Dynamic...)
			for _, e := range tc.entries {
				if !slices.Contains(list, e) {
					t.Errorf("the exclusion lacks %s: %v", e, list)
				}
			}
			rts := Runtimes
			if tc.runtime != "" {
				rts = []Runtime{Runtime(tc.runtime)}
			}
			r, err := ServingFor(loadRepo(t, dir), rts)
			if err != nil || r.Err() != nil || len(r.Modules) != 11 {
				t.Fatalf("%v %v", err, r.Err())
			}
		})
	}
}
