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
	return export.Export(context.Background(), export.Request{Model: src, Target: "hf", Into: dir, Options: o, Version: "test", Jobs: 2})
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
		{"bf16 repo", repoSpec{fixture: fixtures.Qwen36}, nil, ""},
		{"bf16 single file, no depth key", repoSpec{fixture: fixtures.Qwen36, single: true, noDepth: true}, nil, ""},
		{"compressed-tensors W8A8, MoE", repoSpec{fixture: fixtures.Qwen36, quant: ctW8A8, storage: trunkInt8}, []string{`re:^mtp\..*`}, "ignore"},
		{"compressed-tensors W8A8, Qwen3.5 per-expert", repoSpec{fixture: fixtures.Qwen35, quant: ctW8A8, storage: trunkInt8}, []string{`re:^mtp\..*`}, "ignore"},
		{"GPTQ 4-bit, dense", repoSpec{fixture: fixtures.Qwen36Dense, quant: gptq4, storage: trunkPacked}, []string{`-:^mtp\..*`}, "dynamic"},
		{"AWQ with modules_to_not_convert", repoSpec{fixture: fixtures.Qwen36, quant: awq4, storage: trunkPacked}, []string{"mtp."}, "modules_to_not_convert"},
		{"ModelOpt FP8", repoSpec{fixture: fixtures.Qwen36, quant: modelOpt}, []string{"mtp.*"}, "ignore"},
		{"Quark", repoSpec{fixture: fixtures.Qwen36, quant: quark}, []string{`re:^mtp\..*`, "mtp.layers.0.mlp.experts"}, "exclude"},
		{"block FP8, bf16 head", repoSpec{fixture: fixtures.Qwen36, quant: fp8Block}, []string{"mtp.fc", "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.mlp.experts"}, "modules_to_not_convert"},
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
			src := testmodel.Load(t, tc.rs.fixture)
			if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
				t.Fatal(err)
			}
			after := fileSums(t, dir)
			for f, sum := range before {
				if f == model.ConfigFile || f == st.IndexFile {
					if tc.rs.noDepth || tc.key != "" || f == st.IndexFile {
						if after[f] == sum {
							t.Errorf("%s was not updated", f)
						}
						orig, err := os.ReadFile(filepath.Join(dir, export.IntoOriginals, f))
						if err != nil || manifests.SHA256(orig) != sum {
							t.Errorf("%s: the original is not kept in %s (%v)", f, export.IntoOriginals, err)
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
			if d, ok := got.Config.ConfigMTPDepth(); !ok || d != src.MTPDepth {
				t.Errorf("config declares depth %d (%v), want %d", d, ok, src.MTPDepth)
			}
			if tc.key != "" {
				q := quantOf(t, dir)
				list := q.Ignore
				if q.Method == MethodGPTQ {
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
			if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Into: dir, Force: true, Version: "test"}); err != nil {
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
		{"AutoRound", repoSpec{fixture: fixtures.Qwen36, quant: `{"quant_method": "auto-round", "bits": 4}`}, fixtures.Qwen36, `"auto-round": AutoRound`},
		{"an unknown method", repoSpec{fixture: fixtures.Qwen36, quant: `{"quant_method": "frobnicate"}`}, fixtures.Qwen36, `"frobnicate": not a method`},
		{"GPTQ with a MoE head", repoSpec{fixture: fixtures.Qwen36, quant: gptq4, storage: trunkPacked}, fixtures.Qwen36, "sglang 0.5.23 build the head unquantized: for mtp.layers.0.mlp.experts"},
		{"a repo holding head tensors", repoSpec{fixture: fixtures.Qwen36, quant: ctW8A8, keep: func(n string) bool { return strings.HasSuffix(n, "norm.weight") }}, fixtures.Qwen36, "already holds MTP tensors (mtp."},
		{"another model", repoSpec{fixture: fixtures.Qwen36Dense}, fixtures.Qwen36, "holds another model"},
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
	dir := makeRepo(t, repoSpec{fixture: fixtures.Qwen36})
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
			if _, err := export.Export(context.Background(), export.Request{Model: src, Target: "hf", Out: out, Version: "test"}); err != nil {
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
