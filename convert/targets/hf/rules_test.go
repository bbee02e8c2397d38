package hf

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// want is a runtime's expected build of a module: "q" quantized, "u"
// unquantized, "e" refused; with a word its rule must contain.
type want struct{ vllm, sglang, rule string }

// TestDecideRules: the ported rules, one case per rule of each method, on
// the Qwen3.6 head (fused experts), Qwen3.5's (per-expert) and GLM-4.5's.
func TestDecideRules(t *testing.T) {
	qwen36 := testmodel.Load(t, fixtures.Qwen36)
	qwen35 := testmodel.Load(t, fixtures.Qwen35)
	glm := testmodel.Load(t, fixtures.GLM45)
	// A repo's tensors: the source's head as stored (bf16) and, for the
	// header-derived lists, one quantized trunk layer.
	repoOf := func(m *model.Model) Repo {
		ts := map[string]*st.Tensor{}
		for n, tt := range m.Checkpoint.Tensors {
			if m.IsHead(n) {
				ts[n] = tt
			}
		}
		ts["model.language_model.layers.0.mlp.experts.0.gate_proj.qweight"] = &st.Tensor{TensorInfo: st.TensorInfo{DType: "I32"}}
		return Repo{Tensors: ts}
	}
	for _, tc := range []struct {
		name   string
		m      *model.Model
		quant  string
		module string
		want   want
	}{
		{"none", qwen36, ``, "mtp.fc", want{"u", "u", "declares no quantization"}},
		{"ct: no mtp in ignore, fc", qwen36, ctW8A8, "mtp.fc", want{"q", "u", ""}},
		{"ct: no mtp in ignore, qkv", qwen36, ctW8A8, "mtp.layers.0.self_attn.qkv_proj", want{"q", "q", "config_groups target"}},
		{"ct: no mtp in ignore, experts", qwen36, ctW8A8, "mtp.layers.0.mlp.experts", want{"q", "q", ""}},
		{"ct: regex ignore", qwen36, withIgnore(ctW8A8, `re:^mtp\..*`), "mtp.layers.0.mlp.experts", want{"u", "u", "matched by ignore"}},
		{"ct: two of three qkv shards ignored", qwen36, withIgnore(ctW8A8, "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.self_attn.k_proj"), "mtp.layers.0.self_attn.qkv_proj", want{"e", "e", "some but not all shards"}},
		{"ct: every qkv shard ignored", qwen36, withIgnore(ctW8A8, "mtp.layers.0.self_attn.q_proj", "mtp.layers.0.self_attn.k_proj", "mtp.layers.0.self_attn.v_proj"), "mtp.layers.0.self_attn.qkv_proj", want{"u", "u", "ignore"}},
		{"ct: expert 0's projections ignored", qwen35, withIgnore(ctW8A8, "mtp.layers.0.mlp.experts.0.gate_proj", "mtp.layers.0.mlp.experts.0.up_proj", "mtp.layers.0.mlp.experts.0.down_proj"), "mtp.layers.0.mlp.experts", want{"u", "u", "ignore"}},
		{"ct: a dotted suffix is SGLang's only", qwen36, withIgnore(ctW8A8, "self_attn.o_proj"), "mtp.layers.0.self_attn.o_proj", want{"q", "u", ""}},
		{"ct: not targeted", qwen36, `{"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["re:.*self_attn.*"]}}, "ignore": []}`, "mtp.layers.0.mlp.experts", want{"u", "u", "no config_groups target"}},
		{"gptq: dynamic -: mtp, a layer", qwen36, `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "dynamic": {"-:.*mtp.*": {}}}`, "mtp.layers.0.self_attn.qkv_proj", want{"u", "u", "dynamic"}},
		{"gptq: dynamic -: mtp, the experts", qwen36, `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "dynamic": {"-:.*mtp.*": {}}}`, "mtp.layers.0.mlp.experts", want{"u", "q", ""}},
		{"gptq: dynamic -: mtp, fc", qwen36, `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "dynamic": {"-:.*mtp.*": {}}}`, "mtp.fc", want{"u", "u", ""}},
		{"gptq: a positive key first", qwen36, `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "dynamic": {"+:.*o_proj.*": {"bits": 8}, "-:^mtp\\..*": {}}}`, "mtp.layers.0.self_attn.o_proj", want{"u", "q", ""}},
		{"gptq: header-derived list, fc stored bf16", qwen36, gptq4, "mtp.fc", want{"u", "u", "headers store quantized"}},
		{"gptq: header-derived list, experts", qwen36, gptq4, "mtp.layers.0.mlp.experts", want{"q", "q", ""}},
		{"gptq: modules_in_block_to_quantize", qwen36, `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]]}`, "mtp.layers.0.self_attn.o_proj", want{"u", "q", "modules_in_block_to_quantize"}},
		{"awq: a list without mtp", qwen36, awq4, "mtp.layers.0.self_attn.qkv_proj", want{"q", "q", "not matched"}},
		{"awq: mtp. in the list", qwen36, withList(awq4, "modules_to_not_convert", "mtp."), "mtp.layers.0.mlp.experts", want{"u", "u", "substring"}},
		{"awq: no list, fused experts stored bf16", qwen36, awq4Bare, "mtp.layers.0.mlp.experts", want{"u", "q", "headers store float"}},
		{"awq: no list, per-expert experts", qwen35, awq4Bare, "mtp.layers.0.mlp.experts", want{"q", "q", "headers store float"}},
		{"awq: no list, fc", qwen35, awq4Bare, "mtp.fc", want{"u", "u", ""}},
		{"fp8: the release's list", qwen36, `{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head", "mtp.fc", "mlp.gate"]}`, "mtp.fc", want{"u", "u", "exact"}},
		{"fp8: a short name: exact in vLLM, a whole dotted part in SGLang", qwen36, `{"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": ["o_proj"]}`, "mtp.layers.0.self_attn.o_proj", want{"q", "u", "exact"}},
		{"fp8: SGLang matches whole dotted parts only", qwen36, `{"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": ["self_attn.o"]}`, "mtp.layers.0.self_attn.o_proj", want{"q", "q", "exact"}},
		{"fp8: SGLang reads an entry with and without model.", qwen36, `{"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": ["model.mtp.layers.0.self_attn.o_proj"]}`, "mtp.layers.0.self_attn.o_proj", want{"q", "u", "exact"}},
		{"fp8: experts by name", qwen36, `{"quant_method": "fp8", "activation_scheme": "dynamic", "modules_to_not_convert": ["mtp.layers.0.mlp.experts"]}`, "mtp.layers.0.mlp.experts", want{"u", "u", ""}},
		{"modelopt fp8: wildcard", qwen36, modelOpt, "mtp.layers.0.mlp.experts", want{"q", "q", "not matched"}},
		{"modelopt fp8: mtp.*", qwen36, withIgnore(modelOpt, "mtp.*"), "mtp.layers.0.mlp.experts", want{"u", "u", "matched"}},
		{"modelopt fp8: a dotted part (SGLang)", qwen36, withIgnore(modelOpt, "mt*"), "mtp.layers.0.self_attn.o_proj", want{"u", "u", ""}},
		{"modelopt nvfp4: fc forced in vLLM", qwen36, `{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}`, "mtp.fc", want{"u", "u", "forced"}},
		{"modelopt nvfp4: a layer", qwen36, `{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}`, "mtp.layers.0.self_attn.qkv_proj", want{"q", "u", ""}},
		{"modelopt mixed: no mtp layer listed", qwen36, `{"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {"model.language_model.layers.0.mlp.experts": {"quant_algo": "NVFP4"}}}`, "mtp.layers.0.mlp.experts", want{"u", "u", "quantized_layers"}},
		{"quark: the experts by name", qwen36, withList(quark, "exclude", "mtp.layers.0.mlp.experts"), "mtp.layers.0.self_attn.qkv_proj", want{"q", "u", ""}},
		{"quark: regex", qwen36, withList(quark, "exclude", `re:^mtp\..*`), "mtp.layers.0.self_attn.qkv_proj", want{"u", "u", "exclude"}},
		{"a lookahead is not judged", qwen36, `{"quant_method": "gptq", "bits": 4, "dynamic": {"-:^(?!model).*": {}}}`, "mtp.layers.0.self_attn.qkv_proj", want{"n", "n", "cannot judge this pattern"}},
		{"a Python syntax error is invalid", qwen36, withIgnore(ctW8A8, `re:^mtp\z`), "mtp.layers.0.self_attn.qkv_proj", want{"e", "e", "invalid in Python's re (bad escape \\z"}},
		{"glm: eh_proj is an nn.Linear", glm, ctW8A8, "model.layers.3.eh_proj", want{"u", "u", "nn.Linear"}},
		{"glm: shared_head.head is quantized by name only", glm, ctW8A8, "model.layers.3.shared_head.head", want{"u", "u", "no config_groups target"}},
		{"glm: SGLang names the layer model.decoder", glm, withIgnore(ctW8A8, `re:^model\.layers\.3\..*`), "model.layers.3.self_attn.qkv_proj", want{"u", "q", ""}},
		{"glm: both prefixes", glm, withIgnore(ctW8A8, `re:^model\.layers\.3\..*`, `re:^model\.decoder\..*`), "model.layers.3.mlp.experts", want{"u", "u", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkDecide(t, tc.m, 1, tc.quant, tc.module, repoOf(tc.m), tc.want)
		})
	}
}

// checkDecide asks both runtimes how they build module of m's head (of
// depth layers) under the quantization config quant ("" none), against w:
// the answer, and vLLM's rule naming w.rule.
func checkDecide(t *testing.T, m *model.Model, depth int, quant, module string, repo Repo, w want) {
	t.Helper()
	var raw []byte
	if quant != "" {
		raw = []byte(quant)
	}
	q, err := ParseQuant(raw)
	if err != nil {
		t.Fatal(err)
	}
	mods := HeadModules(m, depth)
	i := slicesIndex(mods, module)
	if i < 0 {
		t.Fatalf("no module %s among %v", module, mods)
	}
	for _, c := range []struct {
		rt   Runtime
		want string
	}{{VLLM, w.vllm}, {SGLang, w.sglang}} {
		b := Decide(c.rt, q, m, mods[i], repo)
		got := "u"
		switch {
		case b.Error != "":
			got = "e"
		case b.NotJudged != "":
			got = "n"
		case b.Quantized:
			got = "q"
		}
		if got != c.want {
			t.Errorf("%s: %s (%+v), want %s", c.rt, got, b, c.want)
		}
		if w.rule != "" && got == c.want && !strings.Contains(b.Rule+b.Error+b.NotJudged, w.rule) && c.rt == VLLM {
			t.Errorf("%s: rule %q does not say %q", c.rt, b.Rule+b.Error, w.rule)
		}
	}
}

func slicesIndex(mods []Module, name string) int {
	for i, m := range mods {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// withIgnore replaces a config's ignore list.
func withIgnore(cfg string, entries ...string) string { return withList(cfg, "ignore", entries...) }

// withList sets a list member of a JSON config.
func withList(cfg, key string, entries ...string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(cfg), &m); err != nil {
		panic(err)
	}
	m[key] = entries
	b, _ := json.Marshal(m)
	return string(b)
}

// TestParseQuant: each method's config read; the refused ones named.
func TestParseQuant(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		method    RepoQuant
		ignoreKey string
		err       string
	}{
		{"none", ``, RepoQuantNone, "", ""},
		{"compressed-tensors", ctW8A8, RepoQuantCompressedTensors, "ignore", ""},
		{"gptq", gptq4, RepoQuantGPTQ, "", ""},
		{"awq", awq4, RepoQuantAWQ, "modules_to_not_convert", ""},
		{"fp8 ignored_layers", `{"quant_method": "fp8", "ignored_layers": ["a"], "modules_to_not_convert": ["b"]}`, RepoQuantFP8, "ignored_layers", ""},
		{"fp8 modules_to_not_convert", fp8Block, RepoQuantFP8, "modules_to_not_convert", ""},
		{"modelopt flat", modelOpt, RepoQuantModelOpt, "ignore", ""},
		{"modelopt legacy", `{"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}`, RepoQuantModelOptFP4, "quantization.exclude_modules", ""},
		{"modelopt unknown algo", `{"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}`, "", "", `quant_algo "W4A8_AWQ"`},
		{"quark", quark, RepoQuantQuark, "exclude", ""},
		{"auto-round", `{"quant_method": "auto-round"}`, "", "", "AutoRound"},
		{"inc", `{"quant_method": "inc"}`, "", "", "vllm#49552"},
		{"bitsandbytes", `{"quant_method": "bitsandbytes"}`, "", "", "bitsandbytes"},
		{"not an object", `[1]`, "", "", "not a JSON object"},
		{"a string where a list goes", `{"quant_method": "awq", "modules_to_not_convert": "mtp"}`, "", "", "quantization_config.modules_to_not_convert is a JSON string"},
		{"a string where an object goes", `{"quant_method": "modelopt", "quantization": "x"}`, "", "", "quantization_config.quantization is a JSON string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw []byte
			if tc.cfg != "" {
				raw = []byte(tc.cfg)
			}
			q, err := ParseQuant(raw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if q.Method != tc.method || q.IgnoreKey != tc.ignoreKey {
				t.Errorf("method %q key %q, want %q %q", q.Method, q.IgnoreKey, tc.method, tc.ignoreKey)
			}
		})
	}
}

// TestExclusions: each method's config before and after the head's
// exclusions are added (the entries it had kept, in order), for Qwen's mtp.
// and GLM's layer in the list, and, after, both runtimes build every module
// of the head unquantized (GPTQ's MoE experts excepted: SGLang does not
// read dynamic for them, so --into refuses that case).
func TestExclusions(t *testing.T) {
	qwen := testmodel.Load(t, fixtures.Qwen36)
	dense := testmodel.Load(t, fixtures.Qwen36Dense)
	glm := testmodel.Load(t, fixtures.GLM45)
	for _, tc := range []struct {
		name  string
		m     *model.Model
		cfg   string
		after string // the quantization_config written, compact
	}{
		{"compressed-tensors", qwen, `{"quant_method":"compressed-tensors","config_groups":{"g":{"targets":["Linear"]}},"ignore":["lm_head"]}`,
			`{"quant_method":"compressed-tensors","config_groups":{"g":{"targets":["Linear"]}},"ignore":["lm_head","re:^mtp\\..*"]}`},
		{"compressed-tensors, GLM", glm, `{"quant_method":"compressed-tensors","config_groups":{"g":{"targets":["Linear"]}},"ignore":["lm_head"]}`,
			`{"quant_method":"compressed-tensors","config_groups":{"g":{"targets":["Linear"]}},"ignore":["lm_head","re:^model\\.layers\\.3\\..*","re:^model\\.decoder\\..*","re:^model\\.shared_head\\.head.*"]}`},
		{"gptq, no dynamic", dense, `{"quant_method":"gptq","bits":4}`, `{"quant_method":"gptq","bits":4,"dynamic":{"-:^mtp\\..*":{}}}`},
		{"gptq, dynamic kept", dense, `{"quant_method":"gptq","bits":4,"dynamic":{"+:.*down_proj.*":{"bits":8}}}`, `{"quant_method":"gptq","bits":4,"dynamic":{"-:^mtp\\..*":{},"+:.*down_proj.*":{"bits":8}}}`},
		{"gptq, the repo's own key after a catch-all, moved first", dense, `{"quant_method":"gptq","bits":4,"dynamic":{"+:.*":{"bits":8},"-:^mtp\\..*":{"x":1}}}`,
			`{"quant_method":"gptq","bits":4,"dynamic":{"-:^mtp\\..*":{"x":1},"+:.*":{"bits":8}}}`},
		{"gptq, the repo's own key first already", dense, `{"quant_method":"gptq","bits":4,"dynamic":{"-:^mtp\\..*":{},"+:.*":{"bits":8}}}`,
			`{"quant_method":"gptq","bits":4,"dynamic":{"-:^mtp\\..*":{},"+:.*":{"bits":8}}}`},
		{"awq, list", qwen, `{"quant_method":"awq","bits":4,"modules_to_not_convert":["visual"]}`, `{"quant_method":"awq","bits":4,"modules_to_not_convert":["visual","mtp."]}`},
		{"fp8", dense, `{"quant_method":"fp8","activation_scheme":"dynamic","modules_to_not_convert":["lm_head"]}`,
			`{"quant_method":"fp8","activation_scheme":"dynamic","modules_to_not_convert":["lm_head","mtp.fc","mtp.layers.0.self_attn.q_proj","mtp.layers.0.self_attn.k_proj","mtp.layers.0.self_attn.v_proj","mtp.layers.0.self_attn.o_proj","mtp.layers.0.mlp.gate_proj","mtp.layers.0.mlp.up_proj","mtp.layers.0.mlp.down_proj"]}`},
		{"modelopt flat", qwen, `{"quant_method":"modelopt","quant_algo":"FP8","ignore":["lm_head"]}`, `{"quant_method":"modelopt","quant_algo":"FP8","ignore":["lm_head","mtp.*"]}`},
		{"modelopt legacy", qwen, `{"quant_method":"modelopt","quantization":{"quant_algo":"NVFP4","exclude_modules":["lm_head"]}}`, `{"quant_method":"modelopt","quantization":{"quant_algo":"NVFP4","exclude_modules":["lm_head","mtp.*"]}}`},
		{"quark", qwen, `{"quant_method":"quark","exclude":["lm_head"]}`, `{"quant_method":"quark","exclude":["lm_head","re:^mtp\\..*","mtp.layers.0.mlp.experts"]}`},
		{"already excluded", qwen, `{"quant_method":"awq","modules_to_not_convert":["mtp."]}`, `{"quant_method":"awq","modules_to_not_convert":["mtp."]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseQuant([]byte(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			mods := HeadModules(tc.m, 1)
			obj, _, err := q.withExclusions(mods, hfNames{tc.m}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := string(mustRaw(obj))
			if got != tc.after {
				t.Fatalf("got  %s\nwant %s", got, tc.after)
			}
			after, err := ParseQuant([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			repo := Repo{Tensors: tc.m.Checkpoint.Tensors}
			for _, mod := range mods {
				for _, rt := range Runtimes {
					if b := Decide(rt, after, tc.m, mod, repo); b.Quantized || b.Error != "" {
						t.Errorf("%s builds %s %+v after the exclusions", rt, mod.Name, b)
					}
				}
			}
		})
	}
}
