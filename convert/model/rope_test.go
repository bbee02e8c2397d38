package model

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// familyFixtures is one fixture of every registered family, by family name.
func familyFixtures(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fx := range fixtures.Catalog {
		id, err := readIdentity(fixtureConfig(t, fx.Name))
		if err != nil {
			t.Fatal(err)
		}
		if fam, err := detectFamily(id); err == nil && out[fam.Name] == "" {
			out[fam.Name] = fx.Name
		}
	}
	for _, fam := range families {
		if out[fam.Name] == "" {
			t.Errorf("family %s has no fixture", fam.Name)
		}
	}
	return out
}

// A malformed RoPE scaling is refused by name in every family (the one
// parser in DecodeConfig): DeepSeek-V3's YaRN with a string factor or as a
// string was dropped, a factor of 0 or -1 written.
func TestMalformedRopeScalingIsRefused(t *testing.T) {
	t.Parallel()
	yarn := func(kv ...any) map[string]any {
		m := map[string]any{"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 1}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name  string
		key   string
		value any
		want  string
	}{
		{"string factor", "rope_scaling", yarn("factor", "40"), `rope_scaling.factor is "40": it must be a number`},
		{"a string", "rope_scaling", "yarn", `rope_scaling is "yarn": it must be an object`},
		{"a list", "rope_scaling", []any{1}, `rope_scaling is [1]: it must be an object`},
		{"factor 0", "rope_scaling", yarn("factor", 0), "rope_scaling.factor is 0: it must be a positive number"},
		{"factor -1", "rope_scaling", yarn("factor", -1), "rope_scaling.factor is -1: it must be a positive number"},
		{"yarn without factor", "rope_scaling", yarn("factor", nil), `rope_scaling.rope_type is "yarn" without a factor`},
		{"string mscale_all_dim", "rope_scaling", yarn("mscale_all_dim", "1"), `rope_scaling.mscale_all_dim is "1": it must be a number`},
		{"numeric type", "rope_scaling", yarn("type", 3), "rope_scaling.type is 3: it must be a string"},
		{"fractional original context", "rope_scaling", yarn("original_max_position_embeddings", 4096.5), "rope_scaling.original_max_position_embeddings is 4096.5"},
		{"rope_parameters factor 0", "rope_parameters", map[string]any{"rope_type": "linear", "factor": 0}, "rope_parameters.factor is 0"},
		{"per attention kind", "rope_parameters", map[string]any{"full_attention": map[string]any{"rope_type": "yarn", "factor": "2"}}, `rope_parameters.full_attention.factor is "2"`},
	}
	for family, fixture := range familyFixtures(t) {
		for _, c := range cases {
			t.Run(family+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				_, err := ParseConfig(fixtureConfig(t, fixture, c.key, c.value))
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: error %v, want %q", fixture, err, c.want)
				}
			})
		}
	}
}

// A well-formed YaRN scaling is read: its numbers as the converter reads them.
func TestRopeScalingIsRead(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig(fixtureConfig(t, fixtures.DeepSeekV3, "rope_parameters", nil, "rope_scaling",
		map[string]any{"type": "YaRN", "factor": 40, "original_max_position_embeddings": 4096, "mscale_all_dim": 1.0}))
	if err != nil {
		t.Fatal(err)
	}
	r := c.RopeScaling
	if r == nil || r.Key != "rope_scaling" || r.Type != "yarn" || r.Number("factor", 0) != 40 || r.Number("mscale_all_dim", 0) != 1 || r.Number("beta_fast", 32) != 32 {
		t.Errorf("rope scaling %+v", r)
	}
	// rope_parameters, when the config has it, is what the converters read.
	c, err = ParseConfig(fixtureConfig(t, fixtures.Qwen36))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RopeScaling; r == nil || r.Key != "rope_parameters" || r.Type != "default" {
		t.Errorf("Qwen3.6's rope_parameters read as %+v", r)
	}
}
