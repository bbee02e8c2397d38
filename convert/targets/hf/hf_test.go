package hf

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// The quantization configs of the test repos, as their tools write them.
const (
	ctW8A8 = `{"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
		"weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"},
		"input_activations": {"num_bits": 8, "type": "int", "symmetric": true, "dynamic": true, "strategy": "token"}}},
		"ignore": ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*linear_attn.*", "re:.*visual.*"]}`
	gptq4    = `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "lm_head": false}`
	awq4     = `{"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true, "version": "gemm", "modules_to_not_convert": ["visual"]}`
	awq4Bare = `{"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true, "version": "gemm", "modules_to_not_convert": null}`
	modelOpt = `{"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head", "*visual*"]}`
	quark    = `{"quant_method": "quark", "export": {"kv_cache_group": []}, "global_quant_config": {}, "exclude": ["lm_head"]}`
	fp8Block = `{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}`
)

func exportInto(t *testing.T, src *model.Model, dir string, o targets.Options) (*export.Outcome, error) {
	t.Helper()
	return export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Into(dir), Options: o, Version: "test", Jobs: 2})
}

// fileSums are the sha256 of every file of a folder (not below it).
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = manifests.SHA256(b)
		}
	}
	return out
}

// TestIntoEachMethod adds the head to a headless repo of each method: the
// repo's weight files keep their bytes, the head's tensors are the source's
// bytes, the config excludes the head in the method's form, both runtimes'
// rules then build every head module unquantized, and inspect finds nothing
// wrong (before the export it names the missing head and the command).
func TestIntoEachMethod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rs      repoSpec
		entries []string // what the method's exclusion list gains
		key     string   // where
	}{
		{"bf16 repo", repoSpec{Fixture: fixtures.Qwen36}, nil, ""},
		{"bf16 single file, no depth key", repoSpec{Fixture: fixtures.Qwen36, Single: true, NoDepth: true}, nil, ""},
		{"compressed-tensors W8A8, MoE", repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: trunkInt8}, []string{`re:^mtp\..*`}, "ignore"},
		{"compressed-tensors W8A8, text-only Qwen3_5MoeForCausalLM repo", repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: trunkInt8, TextOnly: true}, []string{`re:^mtp\..*`}, "ignore"},
		{"compressed-tensors W8A8, Qwen3.5 per-expert", repoSpec{Fixture: fixtures.Qwen35, Quant: ctW8A8, Storage: trunkInt8}, []string{`re:^mtp\..*`}, "ignore"},
		{"GPTQ 4-bit, dense", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptq4, Storage: trunkPacked}, []string{`-:^mtp\..*`}, "dynamic"},
		{"AWQ with modules_to_not_convert", repoSpec{Fixture: fixtures.Qwen36, Quant: awq4, Storage: trunkPacked}, []string{"mtp."}, "modules_to_not_convert"},
		{"ModelOpt FP8", repoSpec{Fixture: fixtures.Qwen36, Quant: modelOpt}, []string{"mtp.*"}, "ignore"},
		{"Quark", repoSpec{Fixture: fixtures.Qwen36, Quant: quark}, []string{`re:^mtp\..*`, "mtp.layers.0.mlp.experts"}, "exclude"},
		{"block FP8, bf16 head", repoSpec{Fixture: fixtures.Qwen36, Quant: fp8Block}, []string{"mtp.fc", "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.mlp.experts"}, "modules_to_not_convert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeRepo(t, tc.rs)
			before := fileSums(t, dir)
			sv, err := Serving(loadRepo(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			if err := sv.Err(); err == nil || !strings.Contains(err.Error(), "holds no MTP head") || !strings.Contains(err.Error(), "--target hf --into "+dir) {
				t.Fatalf("inspect of the headless repo: %v", err)
			}
			src := testmodel.Load(t, tc.rs.Fixture)
			if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
				t.Fatal(err)
			}
			after := fileSums(t, dir)
			for f, sum := range before {
				if f == model.ConfigFile || f == st.IndexFile {
					if tc.rs.NoDepth || tc.key != "" || f == st.IndexFile {
						if after[f] == sum {
							t.Errorf("%s was not updated", f)
						}
						orig, err := os.ReadFile(filepath.Join(dir, manifests.IntoOriginals, f))
						if err != nil || manifests.SHA256(orig) != sum {
							t.Errorf("%s: the original is not kept in %s (%v)", f, manifests.IntoOriginals, err)
						}
					}
					continue
				}
				if after[f] != sum {
					t.Errorf("trunk file %s changed", f)
				}
			}
			// The head's tensors are the source's bytes.
			got := loadRepo(t, dir)
			for _, n := range src.Checkpoint.Names {
				if !src.IsHead(n) {
					continue
				}
				gt, ok := got.Checkpoint.Tensors[n]
				if !ok || gt.Shard.Name != HeadFile {
					t.Fatalf("head tensor %s is not in %s", n, HeadFile)
				}
				a, _ := src.Checkpoint.ReadTensor(src.Checkpoint.Tensors[n], nil)
				b, _ := got.Checkpoint.ReadTensor(gt, nil)
				if !bytes.Equal(a, b) {
					t.Fatalf("head tensor %s differs from the source's bytes", n)
				}
			}
			if tc.rs.TextOnly && (got.Config.Nested || got.Config.ModelType != "qwen3_5_moe_text" || got.Config.Architectures[0] != "Qwen3_5MoeForCausalLM") {
				t.Errorf("not a text-only repo: model_type %s, %v", got.Config.ModelType, got.Config.Architectures)
			}
			if d, ok := got.Config.ConfigMTPDepth(); !ok || d != src.MTPDepth {
				t.Errorf("config declares depth %d (%v), want %d", d, ok, src.MTPDepth)
			}
			if tc.key != "" {
				q := quantOf(t, dir)
				list := q.Ignore
				if q.Method == RepoQuantGPTQ {
					list = q.Dynamic
				}
				for _, e := range tc.entries {
					if !slices.Contains(list, e) {
						t.Errorf("%s lacks %q: %v", tc.key, e, list)
					}
				}
			}
			sv, err = Serving(got)
			if err != nil {
				t.Fatal(err)
			}
			if err := sv.Err(); err != nil {
				t.Fatalf("inspect after the export: %v", err)
			}
			for _, mod := range sv.Modules {
				if mod.VLLM.Quantized || mod.SGLang.Quantized {
					t.Errorf("%s built quantized: %+v %+v", mod.Name, mod.VLLM, mod.SGLang)
				}
			}
			// Again: refused without --force, the same bytes with it.
			if _, err := exportInto(t, src, dir, targets.Options{}); err == nil || !strings.Contains(err.Error(), "--force") {
				t.Fatalf("a second --into without --force: %v", err)
			}
			if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Into(dir), Force: true, Version: "test"}); err != nil {
				t.Fatal(err)
			}
			if again := fileSums(t, dir); !mapsEqual(again, after) {
				t.Errorf("--force changed the repo: %v vs %v", again, after)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func quantOf(t *testing.T, dir string) *Quant {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, model.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	qraw, _, err := quantizationConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuant(qraw)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestIntoRefusals: what --into refuses, naming the cause, the repo untouched.
func TestIntoRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   repoSpec
		src  string
		want string
	}{
		{"AutoRound", repoSpec{Fixture: fixtures.Qwen36, Quant: `{"quant_method": "auto-round", "bits": 4}`}, fixtures.Qwen36, `"auto-round": AutoRound`},
		{"an unknown method", repoSpec{Fixture: fixtures.Qwen36, Quant: `{"quant_method": "frobnicate"}`}, fixtures.Qwen36, `"frobnicate": not a method`},
		{"GPTQ with a MoE head", repoSpec{Fixture: fixtures.Qwen36, Quant: gptq4, Storage: trunkPacked}, fixtures.Qwen36, "mtp.layers.0.mlp.experts: sglang 0.5.23 builds it auto_gptq-quantized"},
		{"a repo holding head tensors", repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Keep: func(n string) bool { return strings.HasSuffix(n, "norm.weight") }}, fixtures.Qwen36, "already holds MTP tensors (mtp."},
		{"another model", repoSpec{Fixture: fixtures.Qwen36Dense}, fixtures.Qwen36, "holds another model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeRepo(t, tc.rs)
			before := fileSums(t, dir)
			_, err := exportInto(t, testmodel.Load(t, tc.src), dir, targets.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if after := fileSums(t, dir); !mapsEqual(before, after) {
				t.Errorf("the repo changed: %v", after)
			}
		})
	}
}

// TestHeadPrecisionRefused: --head-precision other than bf16, and flags hf does not take.
func TestHeadPrecisionRefused(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36)
	dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36})
	for _, o := range []targets.Options{
		{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}},
		{GGUFType: "Q8_0", Set: map[string]bool{targets.OptGGUFType: true}},
	} {
		_, err := exportInto(t, src, dir, o)
		var ue targets.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%+v: err %v, want a usage error", o, err)
		}
	}
}

// TestOut writes a repo of the head alone: config.json the source's without
// its quantization, the head under its own names, the tokenizer.
func TestOut(t *testing.T) {
	for _, fx := range []string{fixtures.Qwen36, fixtures.Qwen36FP8, fixtures.GLM45} {
		t.Run(fx, func(t *testing.T) {
			src := testmodel.Load(t, fx)
			out := filepath.Join(t.TempDir(), "out")
			if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Out(out), Version: "test"}); err != nil {
				t.Fatal(err)
			}
			got := loadRepo(t, out)
			if got.Config.QuantizationConfig != nil {
				t.Errorf("config.json keeps a quantization_config")
			}
			var head int
			for _, n := range src.Checkpoint.Names {
				if src.IsHead(n) && !src.IsBlockScale(n) {
					head++
					gt, ok := got.Checkpoint.Tensors[n]
					if !ok {
						t.Fatalf("%s missing", n)
					}
					if st := src.Checkpoint.Tensors[n]; gt.DType != "BF16" && !src.Is(n, model.RoleKeepDType) || !slices.Equal(gt.Shape, st.Shape) {
						t.Errorf("%s: %s %v, source %s %v", n, gt.DType, gt.Shape, st.DType, st.Shape)
					}
				}
			}
			if len(got.Checkpoint.Names) != head {
				t.Errorf("%d tensors, the head has %d", len(got.Checkpoint.Names), head)
			}
			if len(got.MTPProblems) > 0 {
				t.Errorf("the head alone: %v", got.MTPProblems)
			}
		})
	}
}

// TestServingVerdicts: what inspect says of repos whose own files hold the
// head: as stored but misdeclared (the config entries to add), partial (the
// module named, no command: mtpconv does not rewrite the file), and whole
// and declared (nothing).
func TestServingVerdicts(t *testing.T) {
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name       string
		rs         repoSpec
		problem    string // a problem's message contains it ("" none)
		subject    string
		mendConfig string
	}{
		{"a bf16 head the W8A8 config quantizes", repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Keep: all}, "builds it compressed-tensors-quantized", "mtp.layers.0.self_attn.qkv_proj", `add re:^mtp\..* to config.json quantization_config.ignore`},
		{"norms without matrices", repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Keep: func(n string) bool { return strings.HasSuffix(n, "norm.weight") }}, "has no weights for mtp.fc", "mtp.fc", ""},
		{"the head excluded", repoSpec{Fixture: fixtures.Qwen36, Quant: withIgnore(ctW8A8, "lm_head", `re:^mtp\..*`), Keep: all}, "", "", ""},
		{"a whole GLM head, no quantization", repoSpec{Fixture: fixtures.GLM45, Keep: all}, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeRepo(t, tc.rs)
			r, err := Serving(loadRepo(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			if tc.problem == "" {
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
				return
			}
			found := false
			for _, p := range r.Problems {
				found = found || p.Subject == tc.subject && strings.Contains(p.Message, tc.problem)
			}
			if !found {
				t.Fatalf("no problem %q about %s in %+v", tc.problem, tc.subject, r.Problems)
			}
			if !strings.HasPrefix(r.MendConfig, tc.mendConfig) || (tc.mendConfig == "") != (r.MendConfig == "") {
				t.Errorf("mend_config %q, want %q", r.MendConfig, tc.mendConfig)
			}
			if r.Mend != "" {
				t.Errorf("a command %q for a head in the repo's own files", r.Mend)
			}
		})
	}
}

// TestServingDepth: a depth key disagreeing with the tensors is named; a
// huge one sizes nothing (the tensors' depth does).
func TestServingDepth(t *testing.T) {
	for _, declared := range []string{"2", "1073741824"} {
		t.Run(declared, func(t *testing.T) {
			dir := makeRepo(t, repoSpec{Fixture: fixtures.GLM45, Keep: func(string) bool { return true }})
			raw, err := os.ReadFile(filepath.Join(dir, model.ConfigFile))
			if err != nil {
				t.Fatal(err)
			}
			raw = bytes.Replace(raw, []byte(`"num_nextn_predict_layers": 1`), []byte(`"num_nextn_predict_layers": `+declared), 1)
			if err := os.WriteFile(filepath.Join(dir, model.ConfigFile), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Serving(loadRepo(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err == nil || !strings.Contains(err.Error(), "num_nextn_predict_layers says "+declared+" MTP layers, the tensors hold 1") {
				t.Fatalf("err %v", err)
			}
			if len(r.Modules) != 7 {
				t.Errorf("%d modules, want the one layer's 7", len(r.Modules))
			}
		})
	}
}

// TestTextOnlySource: a text-only Qwen3_5MoeForCausalLM checkpoint (with its
// head) as --src, into a vision-language repo and alone, the head's bytes
// its own.
func TestTextOnlySource(t *testing.T) {
	srcDir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36, TextOnly: true, Keep: func(string) bool { return true }})
	src := loadRepo(t, srcDir)
	if src.Config.ModelType != "qwen3_5_moe_text" || len(src.MTPProblems) > 0 {
		t.Fatalf("the text-only source: %s, %v", src.Config.ModelType, src.MTPProblems)
	}
	repo := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: trunkInt8})
	if _, err := exportInto(t, src, repo, targets.Options{}); err != nil {
		t.Fatal(err)
	}
	got := loadRepo(t, repo)
	for _, n := range src.Checkpoint.Names {
		if !src.IsHead(n) {
			continue
		}
		a, _ := src.Checkpoint.ReadTensor(src.Checkpoint.Tensors[n], nil)
		b, _ := got.Checkpoint.ReadTensor(got.Checkpoint.Tensors[n], nil)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs", n)
		}
	}
	if r, err := Serving(got); err != nil || r.Err() != nil {
		t.Fatalf("%v %v", err, r.Err())
	}
}

// intoAsStored adds src's head to a headless copy of fixture at the default
// precision, which into a block-FP8 repo is fp8: every head tensor the
// source's bytes. It returns the repo and the repo described.
func intoAsStored(t *testing.T, src *model.Model, fixture string) (string, *model.Model) {
	t.Helper()
	dir := makeRepo(t, repoSpec{Fixture: fixture})
	oc, err := exportInto(t, src, dir, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if oc.Plan.Options["head_precision"] != "fp8" {
		t.Errorf("head precision %s, want fp8 (the default into a block-FP8 repo)", oc.Plan.Options["head_precision"])
	}
	got := loadRepo(t, dir)
	for _, n := range src.Checkpoint.Names {
		if !src.IsHead(n) {
			continue
		}
		a, _ := src.Checkpoint.ReadTensor(src.Checkpoint.Tensors[n], nil)
		gt, ok := got.Checkpoint.Tensors[n]
		if !ok {
			t.Fatalf("%s missing", n)
		}
		if b, _ := got.Checkpoint.ReadTensor(gt, nil); !bytes.Equal(a, b) {
			t.Fatalf("%s differs from the source's bytes", n)
		}
	}
	return dir, got
}

// TestIntoFP8: an FP8 release's head into a block-FP8 repo goes in as
// stored (codes and scales byte for byte; verify --src recomputes it), both
// runtimes building its FP8 modules fp8 and mtp.fc unquantized; at bf16 the
// exclusions name every module; fp8 into another method is refused.
func TestIntoFP8(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36FP8)
	t.Run("fp8 as stored", func(t *testing.T) {
		dir, got := intoAsStored(t, src, fixtures.Qwen36FP8)
		r, err := Serving(got)
		if err != nil || r.Err() != nil {
			t.Fatalf("%v %v", err, r.Err())
		}
		for _, mod := range r.Modules {
			if want := mod.Name != "mtp.fc"; mod.VLLM.Quantized != want || mod.SGLang.Quantized != want {
				t.Errorf("%s stored %s built %+v %+v", mod.Name, mod.Stored, mod.VLLM, mod.SGLang)
			}
		}
		man, err := manifests.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := manifests.Verify(context.Background(), dir, src.Checkpoint)
		if err != nil || !rep.OK || rep.Recomputed == 0 {
			t.Fatalf("verify --src: %v %+v (%d tensors)", err, rep, len(man.Tensors))
		}
	})
	t.Run("bf16 into the FP8 repo", func(t *testing.T) {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36FP8})
		if _, err := exportInto(t, src, dir, targets.Options{HeadPrecision: "bf16", Set: map[string]bool{targets.OptHeadPrecision: true}}); err != nil {
			t.Fatal(err)
		}
		q := quantOf(t, dir)
		for _, e := range []string{"mtp.fc", "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.mlp.experts"} {
			if !slices.Contains(q.Ignore, e) {
				t.Errorf("%s lacks %s", q.IgnoreKey, e)
			}
		}
		if r, err := Serving(loadRepo(t, dir)); err != nil || r.Err() != nil {
			t.Fatalf("%v %v", err, r.Err())
		}
	})
	t.Run("fp8 into a compressed-tensors repo", func(t *testing.T) {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.Qwen36FP8, Quant: ctW8A8})
		_, err := exportInto(t, src, dir, targets.Options{HeadPrecision: "fp8", Set: map[string]bool{targets.OptHeadPrecision: true}})
		if err == nil || !strings.Contains(err.Error(), "not a block-FP8 repo") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("fp8 from a bf16 source", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		_, err := export.Export(context.Background(), export.Request{Model: testmodel.Load(t, fixtures.Qwen36), Target: "hf", Dest: export.Out(out), Version: "test",
			Options: targets.Options{HeadPrecision: "fp8", Set: map[string]bool{targets.OptHeadPrecision: true}}})
		if err == nil || !strings.Contains(err.Error(), "stores no FP8 weights") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("out at fp8", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Dest: export.Out(out), Version: "test",
			Options: targets.Options{HeadPrecision: "fp8", Set: map[string]bool{targets.OptHeadPrecision: true}}}); err != nil {
			t.Fatal(err)
		}
		got := loadRepo(t, out)
		if got.FP8Info == nil || got.Config.QuantizationConfig == nil || len(got.MTPProblems) > 0 {
			t.Fatalf("fp8 info %v, problems %v", got.FP8Info, got.MTPProblems)
		}
	})
}
