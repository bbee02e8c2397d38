package model

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// Every config value that would silently break an output (NaN in the
// IR's inv_freq, a RoPE over an odd number of dimensions, a division by a
// zero eps, ...) is refused with its key and the file named.
func TestBadConfigValuesAreRefused(t *testing.T) {
	set := func(kv ...any) func(map[string]any) {
		return func(text map[string]any) {
			for i := 0; i < len(kv); i += 2 {
				text[kv[i].(string)] = kv[i+1]
			}
		}
	}
	rope := func(k string, v any) func(map[string]any) {
		return func(text map[string]any) { text["rope_parameters"].(map[string]any)[k] = v }
	}
	cases := []struct {
		name    string
		fixture string
		mutate  func(map[string]any)
		want    string
	}{
		{"rope_theta 0", fixtures.Next, set("rope_theta", 0), "rope_theta is 0; it must be a positive finite number"},
		{"rope_theta negative", fixtures.Next, set("rope_theta", -10000), "rope_theta is -10000"},
		{"rope_theta beyond float64", fixtures.Next, set("rope_theta", json1e999{}), "rope_theta"},
		{"rope_parameters.rope_theta 0", fixtures.Qwen36, rope("rope_theta", 0), "rope_parameters.rope_theta is 0"},
		{"rope_parameters.rope_theta negative", fixtures.Qwen36, rope("rope_theta", -1), "rope_parameters.rope_theta is -1"},
		{"partial_rotary_factor 0", fixtures.Next, set("partial_rotary_factor", 0), "partial_rotary_factor is 0; it must be in (0, 1]"},
		{"partial_rotary_factor negative", fixtures.Next, set("partial_rotary_factor", -0.25), "partial_rotary_factor is -0.25"},
		{"partial_rotary_factor above 1", fixtures.Next, set("partial_rotary_factor", 1.5), "partial_rotary_factor is 1.5"},
		{"partial_rotary_factor odd dims", fixtures.Next, set("partial_rotary_factor", 0.3), "partial_rotary_factor 0.3 of head_dim 64 gives 19 rotary dimensions"},
		{"partial_rotary_factor zero dims", fixtures.Next, set("partial_rotary_factor", 0.01), "partial_rotary_factor 0.01 of head_dim 64 gives 0 rotary dimensions"},
		{"rope_parameters.partial_rotary_factor odd dims", fixtures.Qwen36, rope("partial_rotary_factor", 0.3), "rope_parameters.partial_rotary_factor 0.3 of head_dim 64 gives 19"},
		{"rope_parameters.partial_rotary_factor 0", fixtures.Qwen36, rope("partial_rotary_factor", 0), "rope_parameters.partial_rotary_factor is 0"},
		{"rms_norm_eps 0", fixtures.Next, set("rms_norm_eps", 0), "rms_norm_eps is 0; it must be a positive finite number"},
		{"rms_norm_eps negative", fixtures.Qwen36, set("rms_norm_eps", -1e-6), "rms_norm_eps is -1e-06"},
		{"head_dim 0", fixtures.Next, set("head_dim", 0), "head_dim is 0"},
		{"head_dim negative", fixtures.Qwen36, set("head_dim", -64), "head_dim is -64"},
		{"hidden_size 0", fixtures.Qwen36, set("hidden_size", 0), "hidden_size is 0"},
		{"hidden_size negative", fixtures.Next, set("hidden_size", -128), "hidden_size is -128"},
		{"heads not a multiple of kv heads", fixtures.Next, set("num_attention_heads", 5, "head_dim", 64), "num_attention_heads 5 is not a multiple of num_key_value_heads 2"},
		{"experts_per_tok 0", fixtures.Qwen36, set("num_experts_per_tok", 0), "num_experts_per_tok is 0"},
		{"experts_per_tok above experts", fixtures.Next, set("num_experts_per_tok", 513), "num_experts_per_tok 513 exceeds num_experts 512"},
		{"full_attention_interval 0", fixtures.Next, set("full_attention_interval", 0), "full_attention_interval is 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := withConfig(t, c.fixture, c.mutate)
			m, err := Load(source.Dir(dir))
			if err == nil {
				m.Checkpoint.Close()
				t.Fatalf("accepted; want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir+": "+ConfigFile) {
				t.Fatalf("error %v, want %q naming %s", err, c.want, ConfigFile)
			}
		})
	}
}

// json1e999 marshals as a number no float64 holds (JSON has no NaN or Inf).
type json1e999 struct{}

func (json1e999) MarshalJSON() ([]byte, error) { return []byte("1e999"), nil }

// Absent keys take the Hugging Face defaults; the fixtures' values are read.
func TestConfigDefaults(t *testing.T) {
	dir := withConfig(t, fixtures.Next, func(text map[string]any) {
		for _, k := range []string{"rope_theta", "partial_rotary_factor", "rms_norm_eps", "head_dim", "full_attention_interval"} {
			delete(text, k)
		}
	})
	cfg, err := LoadConfig(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RopeTheta != 10000 || cfg.PartialRotaryFactor != 0.25 || cfg.RMSNormEps != 1e-6 || cfg.HeadDim != 32 || cfg.FullAttentionInterval != 4 {
		t.Errorf("defaults %+v", cfg)
	}
	// NaN and infinities cannot come from JSON, but are refused all the same.
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		c := *cfg
		c.RopeTheta = v
		if err := validateHybrid(&c); err == nil || !strings.Contains(err.Error(), "rope_theta") {
			t.Errorf("rope_theta %v: %v", v, err)
		}
		c = *cfg
		c.RMSNormEps = v
		if err := validateHybrid(&c); err == nil || !strings.Contains(err.Error(), "rms_norm_eps") {
			t.Errorf("rms_norm_eps %v: %v", v, err)
		}
		c = *cfg
		c.PartialRotaryFactor = v
		if err := validateHybrid(&c); err == nil || !strings.Contains(err.Error(), "partial_rotary_factor") {
			t.Errorf("partial_rotary_factor %v: %v", v, err)
		}
	}
	for _, f := range fixtures.All {
		m := load(t, f)
		if m.Config.RopeTheta != 1e7 || m.Config.RotaryDim() != 16 || m.Config.RMSNormEps <= 0 {
			t.Errorf("%s: %+v", f, m.Config)
		}
	}
}

// fixtureConfig is a fixture's config.json with the text configuration's
// keys set (a nil value deletes the key), without writing the fixture.
func fixtureConfig(t *testing.T, fixture string, kv ...any) []byte {
	t.Helper()
	spec, err := fixtures.Build(fixture)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := spec.ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		var v []byte
		if kv[i+1] != nil {
			if v, err = json.Marshal(kv[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		raw = withKey(raw, kv[i].(string), v)
	}
	return raw
}

// Every per-layer list a family reads is checked against the layer count
// (CheckLayerLists), naming the key, before any is indexed by layer: the
// Step-3.5 lists that hold the MTP layers' entries against a smaller
// num_nextn_predict_layers panicked.
func TestPerLayerListsAreChecked(t *testing.T) {
	t.Parallel()
	seven := func(v any) []any { return slices.Repeat([]any{v}, 7) }
	cases := []struct {
		name, fixture string
		kv            []any
		want          string
	}{
		{"step3.5 one MTP layer", fixtures.Step35, []any{"num_nextn_predict_layers", 1},
			"layer_types has 7 entries for 5 layers (num_hidden_layers 4 + num_nextn_predict_layers 1): at most one per layer"},
		{"step3.5 two MTP layers", fixtures.Step35, []any{"num_nextn_predict_layers", 2}, "layer_types has 7 entries for 6 layers"},
		{"step3.7 one MTP layer", fixtures.Step37, []any{"num_nextn_predict_layers", 1}, "layer_types has 7 entries for 5 layers"},
		{"step3.5 rope_theta too long", fixtures.Step35, []any{"rope_theta", append(seven(10000.0), 10000.0)}, "rope_theta has 8 entries for 7 layers"},
		{"step3.5 partial_rotary_factors too long", fixtures.Step35, []any{"partial_rotary_factors", append(seven(0.5), 0.5)}, "partial_rotary_factors has 8 entries"},
		{"step3.5 use_rope_layers too long", fixtures.Step35, []any{"use_rope_layers", append(seven(true), true)}, "use_rope_layers has 8 entries"},
		{"qwen layer_types", fixtures.Qwen36, []any{"layer_types", []string{"full_attention"}}, "layer_types has 1 entries for 4 layers (num_hidden_layers 4): one per layer"},
		{"qwen3-next layer_types", fixtures.Next, []any{"layer_types", []string{}}, "layer_types has 0 entries for 4 layers"},
		{"glm-5.2 indexer_types", fixtures.GLM52, []any{"indexer_types", []string{"full"}}, "indexer_types has 1 entries"},
		{"glm-5.3-flash mlp_layer_types", fixtures.GLM53Flash, []any{"mlp_layer_types", []string{"dense"}}, "mlp_layer_types has 1 entries"},
		{"mimo hybrid_layer_pattern", fixtures.MiMoV25, []any{"hybrid_layer_pattern", []int{0}}, "hybrid_layer_pattern has 1 entries"},
		{"mimo moe_layer_freq", fixtures.MiMoV25, []any{"moe_layer_freq", nil}, "moe_layer_freq has 0 entries"},
		{"nemotron-h hybrid_override_pattern", fixtures.NemotronHMoE, []any{"hybrid_override_pattern", "ME"}, "hybrid_override_pattern has 2 entries"},
		{"hy3 mlp_layer_types", fixtures.Hy3, []any{"mlp_layer_types", []string{"dense", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse", "sparse"}}, "mlp_layer_types has 9 entries"},
		{"ling swiglu limits", fixtures.Ling3, []any{"expert_swiglu_limit_list", []any{nil, 7.0, 7.0, 7.0}}, "expert_swiglu_limit_list has 4 entries for 3 layers (num_hidden_layers 2 + num_nextn_predict_layers 1): at most one per layer"},
		{"step3.5 MTP depth bounded", fixtures.Step35, []any{"num_nextn_predict_layers", 16000000}, "num_nextn_predict_layers is 16000000; this tool reads Step-3.5-Flash heads of at most 256 MTP layers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig(fixtureConfig(t, c.fixture, c.kv...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// The fixtures' own lists pass.
	for _, f := range []string{fixtures.Step35, fixtures.Step37, fixtures.Qwen36, fixtures.GLM52, fixtures.GLM53Flash, fixtures.MiMoV25, fixtures.NemotronHMoE, fixtures.Hy3, fixtures.Ling3} {
		if _, err := ParseConfig(fixtureConfig(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A family's typed keys are decoded once and read back by type: a
// lineage's and the family's own side by side, a second SetKeys of one
// type replacing the first, a type never set read as its zero value.
func TestKeysOf(t *testing.T) {
	t.Parallel()
	type lineage struct{ A int }
	type own struct{ B string }
	c := &Config{}
	SetKeys(c, &lineage{A: 1})
	SetKeys(c, &own{B: "x"})
	SetKeys(c, &lineage{A: 2})
	if KeysOf[lineage](c).A != 2 || KeysOf[own](c).B != "x" || len(c.keys) != 2 {
		t.Errorf("keys %+v", c.keys)
	}
	if k := KeysOf[struct{ C int }](c); k == nil || k.C != 0 {
		t.Errorf("absent keys: %+v", k)
	}
}
