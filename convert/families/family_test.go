package families

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// glm45Config is a GLM-4.5-shaped config.json of a test-only model type
// (the real glm4_moe is a registered family): no linear attention, sigmoid
// routing over expert groups, leading dense layers.
const glm45Config = `{"architectures":["TestGlm4MoeForCausalLM"],"model_type":"test_glm4_moe","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"partial_rotary_factor":0.5,"vocab_size":32,"intermediate_size":96,
"moe_intermediate_size":16,"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":2,"topk_group":1,
"routed_scaling_factor":2.5,"first_k_dense_replace":1,"num_nextn_predict_layers":1,"attention_bias":true,"rms_norm_eps":1e-5}`

// testFamily is a family the tests register for a while: it recognises
// GLM-4.5's identity and validates its config with its own rule, counting
// its calls in parsed.
func testFamily(parsed *int) *model.Family {
	return &model.Family{Name: "test_glm", ModelTypes: []string{"test_glm4_moe"}, Arch: "TestGlm4Moe",
		ParseConfig: func(raw []byte) (*model.Config, error) { *parsed++; return parseTestGLM(raw) },
		Spec:        func(c *model.Config) *model.Spec { return &model.Spec{} }}
}

func parseTestGLM(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 0.5, RMSNormEps: 1e-5, RopeTheta: 10000})
	if err != nil {
		return nil, err
	}
	if err := DecodeDeepSeekConfig(c); err != nil {
		return nil, err
	}
	c.NumExperts = model.KeysOf[DeepSeekConfig](c).NRoutedExperts // GLM names the routed experts its own way
	if err := model.CheckPositive(c.CommonKeys()...); err != nil {
		return nil, err
	}
	if model.KeysOf[DeepSeekConfig](c).NGroup <= 0 {
		return nil, fmt.Errorf("n_group is %d; test_glm routes over expert groups", model.KeysOf[DeepSeekConfig](c).NGroup)
	}
	return c, c.CheckCommon()
}

// withFamily registers f for the duration of a test.
func withFamily(t *testing.T, f *model.Family) { t.Cleanup(model.RegisterFamily(f)) }

// The family is detected from architectures and model_type before any
// key is validated, and the family validates its own config: a GLM-4.5
// config is no longer refused for the hybrid Qwen's missing
// linear_num_key_heads.
func TestFamilyDetectedBeforeValidation(t *testing.T) {
	_, err := model.ParseConfig([]byte(glm45Config))
	if err == nil || !strings.Contains(err.Error(), `model_type "test_glm4_moe" (architectures [TestGlm4MoeForCausalLM]) is not a supported family`) {
		t.Fatalf("without its family: %v", err)
	}
	parsed := 0
	withFamily(t, testFamily(&parsed))
	cfg, err := model.ParseConfig([]byte(glm45Config))
	if err != nil {
		t.Fatal(err)
	}
	if parsed != 1 || cfg.PartialRotaryFactor != 0.5 || model.KeysOf[DeepSeekConfig](cfg).NGroup != 2 {
		t.Errorf("parsed %d times, config %+v", parsed, cfg)
	}
	if f, err := cfg.Family(); err != nil || f.Name != "test_glm" {
		t.Errorf("family %v, %v", f, err)
	}
	// The family's own rule, not a shared one, refuses its config.
	_, err = model.ParseConfig([]byte(strings.Replace(glm45Config, `"n_group":2`, `"n_group":0`, 1)))
	if err == nil || !strings.Contains(err.Error(), "n_group is 0; test_glm routes over expert groups") {
		t.Fatalf("n_group 0: %v", err)
	}
}

// A family with an MTP head that mtpconv does not convert yet is refused by
// the name its users know, saying what is missing, not as an unknown model_type.
func TestUnsupportedFamiliesRefusedByName(t *testing.T) {
	for _, c := range []struct{ arch, want string }{
		{"KimiK25ForConditionalGeneration", "Kimi-K2.5 (architectures [KimiK25ForConditionalGeneration]) is not supported yet"},
		{"DeepseekV2ForCausalLM", "DeepSeek-V2 (architectures"},
		{"Dots3NoteMoeForCausalLM", "dots3 (architectures"},
	} {
		_, err := model.ParseConfig([]byte(`{"architectures":["` + c.arch + `"],"model_type":"x","hidden_size":64}`))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "; mtpconv converts ") || !strings.Contains(err.Error(), "glm4_moe") {
			t.Errorf("%s: %v", c.arch, err)
		}
	}
}

// What a family's descriptor says without a config agrees with its Spec for
// a config of each of its fixtures: the head's norms zero-centred or not,
// the concat projection taking the embedding first (the MLX health check
// assumes it), and the per-target tables the targets read: a GGUF
// architecture or the refusal, an OpenVINO refusal where no lowering runs.
func TestFamilyStaticFacts(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, fx := range fixtures.Catalog {
		raw := fixtureConfig(t, fx.Name)
		c, err := model.ParseConfig(raw)
		if err != nil {
			continue // a fixture of a config the families refuse
		}
		fam, _ := c.Family()
		seen[fam.Name] = true
		spec := fam.Spec(c)
		if got := spec.HeadZeroCentred(); got != fam.ZeroCentredHead {
			t.Errorf("%s (%s): the Spec's head norms zero-centred %v, the descriptor says %v", fam.Name, fx.Name, got, fam.ZeroCentredHead)
		}
		if got, want := fam.HeadOwn(0), fam.HeadOwnIn(spec, 0); !slices.Equal(got, want) {
			t.Errorf("%s (%s): the head's own tensors read without a config %v, for the fixture's %v", fam.Name, fx.Name, got, want)
		}
		if spec.Forward != nil {
			// The MLX folder's health check takes a drafter tensor named
			// fc / eh_proj for [embedding, hidden] (mlx/health.go isConcat);
			// a family whose projection takes the hidden state first must
			// name it otherwise (Inkling's input_proj, which it leaves whole).
			m := &model.Model{Family: fam, Spec: spec, Config: c, TextPrefix: spec.TextPrefixes[0], MTPDepth: 1}
			fc := m.HeadRelative(spec.Forward(m).FC)
			if f := fam.MLX.DrafterName; f != nil {
				fc = f(fc)
			}
			if !spec.Forward(m).EmbeddingFirst && (fc == "fc.weight" || strings.HasSuffix(fc, ".fc.weight") || strings.HasSuffix(fc, "eh_proj.weight")) {
				t.Errorf("%s: the concat projection %s takes the hidden state first; give the descriptor that fact before the MLX health check reads it", fam.Name, fc)
			}
		}
		if (fam.GGUF.Arch == "") == (fam.GGUF.Refusal == "") {
			t.Errorf("%s: the GGUF table has architecture %q and refusal %q: exactly one", fam.Name, fam.GGUF.Arch, fam.GGUF.Refusal)
		}
		if fam.Title == "" || fam.ParseConfig == nil || fam.Spec == nil {
			t.Errorf("%s: descriptor without a title, parser or Spec", fam.Name)
		}
	}
	for _, name := range model.Families() {
		if !seen[name] {
			t.Errorf("family %s: no fixture parsed", name)
		}
	}
}
