package hf

import (
	"slices"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Every storage form of the table, complete, lacks nothing; without any one
// companion it needs under the repo's method it lacks exactly that one,
// named with the first tensor missing. The method decides what is needed
// beyond the form's own: input_scale for static activations, g_idx for
// GPTQ's desc_act, weight_zero_point for asymmetric weights; a form shared
// by two methods (qweight) is told by the method. A float module has no form.
func TestCompanionsTable(t *testing.T) {
	static := &Quant{Method: RepoQuantCompressedTensors, StaticActivations: true}
	for _, tc := range []struct {
		name   string
		q      *Quant
		marker string
		dtype  st.DType
		form   string
		needs  []string
	}{
		{"GPTQ", &Quant{Method: RepoQuantGPTQ}, "qweight", st.I32, "GPTQ", []string{"qzeros", "scales"}},
		{"GPTQ desc_act", &Quant{Method: RepoQuantGPTQ, DescAct: true}, "qweight", st.I32, "GPTQ", []string{"qzeros", "scales", "g_idx"}},
		{"AWQ", &Quant{Method: RepoQuantAWQ}, "qweight", st.I32, "AWQ", []string{"qzeros", "scales"}},
		{"packed int4", &Quant{Method: RepoQuantCompressedTensors}, "weight_packed", st.I32, "packed int (compressed-tensors)", []string{"weight_scale", "weight_shape"}},
		{"packed int4 asymmetric", &Quant{Method: RepoQuantCompressedTensors, Asymmetric: true}, "weight_packed", st.I32, "packed int (compressed-tensors)", []string{"weight_scale", "weight_shape", "weight_zero_point"}},
		{"compressed-tensors NVFP4", static, "weight_packed", st.U8, "NVFP4 (compressed-tensors)", []string{"weight_scale", "weight_global_scale", "input_global_scale"}},
		{"block FP8", &Quant{Method: RepoQuantFP8}, "weight", st.F8E4M3, "block FP8", []string{"weight_scale_inv"}},
		{"block FP8, static activations", &Quant{Method: RepoQuantFP8, StaticActivations: true}, "weight", st.F8E4M3, "block FP8", []string{"weight_scale_inv", "input_scale"}},
		{"ModelOpt NVFP4", &Quant{Method: RepoQuantModelOptFP4, StaticActivations: true}, "weight", st.U8, "NVFP4", []string{"weight_scale", "weight_scale_2", "input_scale"}},
		{"ModelOpt FP8", &Quant{Method: RepoQuantModelOpt, StaticActivations: true}, "weight", st.F8E4M3, "FP8", []string{"weight_scale", "input_scale"}},
		{"W8A8 int8, dynamic", &Quant{Method: RepoQuantCompressedTensors}, "weight", st.I8, "int8", []string{"weight_scale"}},
		{"W8A8 int8, static", static, "weight", st.I8, "int8", []string{"weight_scale", "input_scale"}},
		{"DeepSeek-V4 block FP8 (ue8m0 .scale)", &Quant{Method: RepoQuantFP8, DotScale: true}, "weight", st.F8E4M3, "block FP8 (.scale)", []string{"scale"}},
		{"DeepSeek-V4 FP4 experts", &Quant{Method: RepoQuantFP8, DotScale: true}, "weight", st.I8, "FP4 (.scale)", []string{"scale"}},
		{"NVFP4 experts beside .scale FP8 (moe_quant_algo NVFP4)", &Quant{Method: RepoQuantFP8, DotScale: true}, "weight", st.U8, "NVFP4", []string{"weight_scale", "weight_scale_2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mod := Module{Name: "mtp.fc", Kind: KindLinear}
			full := Repo{Tensors: map[string]*st.Tensor{"mtp.fc." + tc.marker: {TensorInfo: st.TensorInfo{DType: tc.dtype}}}}
			for _, n := range tc.needs {
				full.Tensors["mtp.fc."+n] = &st.Tensor{TensorInfo: st.TensorInfo{DType: st.F32}}
			}
			if form, lack, _ := companionsOf(full, tc.q, mod); form != tc.form || lack != nil {
				t.Fatalf("complete: form %q lacks %v, want %q", form, lack, tc.form)
			}
			for _, n := range tc.needs {
				without := Repo{Tensors: map[string]*st.Tensor{}}
				for k, v := range full.Tensors {
					if k != "mtp.fc."+n {
						without.Tensors[k] = v
					}
				}
				if _, lack, first := companionsOf(without, tc.q, mod); !slices.Equal(lack, []string{n}) || first != "mtp.fc."+n {
					t.Errorf("without %s: lacks %v (first %s)", n, lack, first)
				}
			}
		})
	}
	t.Run("float", func(t *testing.T) {
		repo := Repo{Tensors: map[string]*st.Tensor{"mtp.fc.weight": {TensorInfo: st.TensorInfo{DType: st.BF16}}}}
		if form, lack, _ := companionsOf(repo, static, Module{Name: "mtp.fc", Kind: KindLinear}); form != "" || lack != nil {
			t.Fatalf("form %q lacks %v", form, lack)
		}
	})
}

// A repo per method whose head is quantized without its companions:
// inspect --strict names the module, the storage and the first tensor
// missing, routed experts (every expert's projections) included; GPTQ's
// g_idx only where desc_act says the loader reads it.
func TestCompanionsInRepos(t *testing.T) {
	all := func(string) bool { return true }
	gptqAct := strings.Replace(gptq4, `"desc_act": false`, `"desc_act": true`, 1)
	for _, tc := range []struct {
		name string
		rs   repoSpec
		want string // "" none about companions
	}{
		{"W8A8 per-expert experts without weight_scale", repoSpec{Fixture: fixtures.Qwen35, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, NoHeadScales: true, Keep: all},
			"mtp.layers.0.mlp.experts: stored int8 without its weight_scale (first missing: mtp.layers.0.mlp.experts.0."},
		{"W8A8 per-expert experts with their scales", repoSpec{Fixture: fixtures.Qwen35, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all}, ""},
		{"GPTQ, desc_act false: no g_idx needed", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptq4, Storage: trunkPacked, HeadStorage: trunkPacked, Keep: all}, ""},
		{"GPTQ, desc_act true, no g_idx", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptqAct, Storage: trunkPacked, HeadStorage: trunkPacked, Keep: all},
			"mtp.fc: stored GPTQ without its g_idx (first missing: mtp.fc.g_idx)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := ServingFor(loadRepo(t, makeRepo(t, tc.rs)), []Runtime{VLLM})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range r.Problems {
				if strings.Contains(p.Message, "first missing") {
					got = append(got, p.Subject+": "+p.Message)
				}
			}
			if (tc.want == "") != (len(got) == 0) || (tc.want != "" && !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, tc.want) })) {
				t.Fatalf("companion problems %q, want %q", got, tc.want)
			}
		})
	}
}

// The head's tensors against the config: a head tensor of another shape is
// named with the shape the config implies, float or stored quantized (the
// marker's packed shape: GPTQ's qweight [in*bits/32, out]); a norm stored
// as integers is named; the repos as written (a bf16 head, an int8 head
// with its scales, a GPTQ head) have none.
func TestShapesAgainstConfig(t *testing.T) {
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name   string
		rs     repoSpec
		tensor string // reshaped ("" none)
		shape  func([]int64) []int64
		dtype  st.DType // retyped ("" keep)
		want   string
	}{
		{"bf16, as written", repoSpec{Fixture: fixtures.Qwen36Dense, Keep: all}, "", nil, "", ""},
		{"bf16 mtp.fc of hidden_size inputs", repoSpec{Fixture: fixtures.Qwen36Dense, Keep: all}, "mtp.fc.weight", func(s []int64) []int64 { return []int64{s[0], s[1] / 2} }, "",
			"mtp.fc.weight: has shape [128 128]; the config implies [128 256]"},
		{"int8, as written", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all}, "", nil, "", ""},
		{"int8 o_proj transposed", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all}, "mtp.layers.0.self_attn.o_proj.weight", func(s []int64) []int64 { return []int64{s[1], s[0]} }, "",
			"mtp.layers.0.self_attn.o_proj.weight: has shape"},
		{"GPTQ, as written", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptq4, Storage: trunkPacked, HeadStorage: trunkPacked, Keep: all}, "", nil, "", ""},
		{"GPTQ qweight unpacked", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptq4, Storage: trunkPacked, HeadStorage: trunkPacked, Keep: all}, "mtp.fc.qweight", func(s []int64) []int64 { return []int64{s[0] * 8, s[1]} }, "",
			"mtp.fc.qweight: has shape [256 128]; the config implies [128 256] for mtp.fc.weight, which GPTQ stores as [32 128]"},
		{"a norm stored int8", repoSpec{Fixture: fixtures.Qwen36Dense, Keep: all}, "mtp.norm.weight", nil, st.I8, "mtp.norm.weight: is I8, stored in no quantized form the runtimes read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := loadRepo(t, makeRepo(t, tc.rs))
			if tc.tensor != "" {
				orig, ok := m.Checkpoint.Tensors[tc.tensor]
				if !ok {
					t.Fatalf("no %s", tc.tensor)
				}
				c := *orig
				if tc.shape != nil {
					c.Shape = tc.shape(orig.Shape)
				}
				if tc.dtype != "" {
					c.DType = tc.dtype
				}
				m.Checkpoint.Tensors[tc.tensor] = &c
			}
			r, err := ServingFor(m, []Runtime{VLLM})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range r.Problems {
				if strings.Contains(p.Message, "the config implies") || strings.Contains(p.Message, "first missing") || strings.Contains(p.Message, "no quantized form") {
					got = append(got, p.Subject+": "+p.Message)
				}
			}
			if (tc.want == "") != (len(got) == 0) || (tc.want != "" && !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, tc.want) })) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
		})
	}
}

// The microscaling forms are told by their E8M0 scale: FP4 e2m1 codes in
// int8 with a ue8m0 `scale` (DeepSeek-V4's routed experts) are MXFP4 packed
// two a byte, not int8 lacking its weight_scale; e4m3 codes with a ue8m0
// `scale` (DeepSeek-V4's other matrices) block FP8 lacking nothing; e4m3
// codes with an F8_E8M0 `weight_scale` per 32 MXFP8, not per-tensor FP8,
// which an F32 weight_scale still is.
func TestMicroscalingForms(t *testing.T) {
	tensor := func(d st.DType, shape ...int64) *st.Tensor {
		return &st.Tensor{TensorInfo: st.TensorInfo{DType: d, Shape: shape}}
	}
	mod := Module{Name: "mtp.fc", Kind: KindLinear}
	for _, tc := range []struct {
		name     string
		q        *Quant
		tensors  map[string]*st.Tensor
		form     string
		stored   string
		packedAs []int64 // the weight's shape for a [8, 64] matrix
	}{
		{"MXFP4", nil, map[string]*st.Tensor{"weight": tensor(st.I8, 8, 32), "scale": tensor(st.F8E8M0, 8, 2)}, "MXFP4", storedMXFP4, []int64{8, 32}},
		{"block FP8, ue8m0 scale", &Quant{Method: RepoQuantFP8}, map[string]*st.Tensor{"weight": tensor(st.F8E4M3, 8, 64), "scale": tensor(st.F8E8M0, 1, 1)}, "block FP8", storedFP8Block, []int64{8, 64}},
		{"MXFP8", nil, map[string]*st.Tensor{"weight": tensor(st.F8E4M3, 8, 64), "weight_scale": tensor(st.F8E8M0, 8, 2)}, "MXFP8", storedMXFP8, []int64{8, 64}},
		{"per-tensor FP8", &Quant{Method: RepoQuantModelOpt}, map[string]*st.Tensor{"weight": tensor(st.F8E4M3, 8, 64), "weight_scale": tensor(st.F32)}, "FP8", "quantized (F32, F8_E4M3; weight, weight_scale)", []int64{8, 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := Repo{Tensors: map[string]*st.Tensor{}}
			for leaf, x := range tc.tensors {
				repo.Tensors["mtp.fc."+leaf] = x
			}
			if form, lack, _ := companionsOf(repo, tc.q, mod); form != tc.form || lack != nil {
				t.Errorf("form %q lacking %v, want %q lacking nothing", form, lack, tc.form)
			}
			if s := stored(repo, mod, map[string]bool{}); s != tc.stored {
				t.Errorf("stored %q, want %q", s, tc.stored)
			}
			f, ok := formOf(repo, tc.q, "mtp.fc")
			if got, known := f.Packs(8, 64, 0); !ok || !known || !slices.Equal(got, tc.packedAs) {
				t.Errorf("a [8 64] weight packs as %v (known %v), want %v", got, known, tc.packedAs)
			}
		})
	}
}

// inspect of DeepSeek-V4's release layout says its routed experts are
// MXFP4, lacking nothing, at the shape FP4 packs (it said "int8 without
// weight_scale" and a shape problem per expert projection), and its
// block-FP8 matrices' ue8m0 scales are their scales.
func TestServingDeepSeekV4Storage(t *testing.T) {
	for fx, want := range map[string]map[string]string{
		fixtures.DeepSeekV4:    {"mtp.0.ffn.experts": storedMXFP4, "mtp.0.e_proj": "bf16"},
		fixtures.DeepSeekV4FP8: {"mtp.0.ffn.experts": storedMXFP4, "mtp.0.e_proj": storedFP8Block, "mtp.0.attn.wq_a": storedFP8Block},
	} {
		r, err := Serving(testmodel.Load(t, fx))
		if err != nil {
			t.Fatal(err)
		}
		for _, mod := range r.Modules {
			if w, ok := want[mod.Name]; ok && (mod.Stored != w || len(mod.Lacks) > 0) {
				t.Errorf("%s: %s stored %q lacking %v, want %q", fx, mod.Name, mod.Stored, mod.Lacks, w)
			}
		}
		for _, p := range r.Problems {
			if strings.Contains(p.Message, "has shape") || strings.Contains(p.Message, "int8") || strings.Contains(p.Message, "first missing") {
				t.Errorf("%s: %s: %s", fx, p.Subject, p.Message)
			}
		}
	}
}
