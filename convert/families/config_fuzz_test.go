package families

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The config parsers are fuzzed one family at a time (go test -fuzz
// FuzzConfigStep35 ./convert/model), each seeded with the config.json of
// every fixture of its family; the crashers found are committed under
// testdata/fuzz/<FuzzName>/ and run as seeds by every go test.

func FuzzConfigQwen35MoE(f *testing.F)       { fuzzFamily(f, "qwen3_5_moe") }
func FuzzConfigQwen35(f *testing.F)          { fuzzFamily(f, "qwen3_5") }
func FuzzConfigQwen3Next(f *testing.F)       { fuzzFamily(f, "qwen3_next") }
func FuzzConfigGlm4Moe(f *testing.F)         { fuzzFamily(f, "glm4_moe") }
func FuzzConfigGlm4MoeLite(f *testing.F)     { fuzzFamily(f, "glm4_moe_lite") }
func FuzzConfigGlm5Next(f *testing.F)        { fuzzFamily(f, "glm5_next") }
func FuzzConfigGlmMoeDsa(f *testing.F)       { fuzzFamily(f, "glm_moe_dsa") }
func FuzzConfigDeepseekV3(f *testing.F)      { fuzzFamily(f, "deepseek_v3") }
func FuzzConfigDeepseekV32(f *testing.F)     { fuzzFamily(f, "deepseek_v32") }
func FuzzConfigStep35(f *testing.F)          { fuzzFamily(f, "step3p5") }
func FuzzConfigHyV3(f *testing.F)            { fuzzFamily(f, "hy_v3") }
func FuzzConfigBailingMoeV3(f *testing.F)    { fuzzFamily(f, "bailing_moe_v3") }
func FuzzConfigMimoV2(f *testing.F)          { fuzzFamily(f, "mimo_v2") }
func FuzzConfigNemotronH(f *testing.F)       { fuzzFamily(f, "nemotron_h") }
func FuzzConfigQwen4Exp(f *testing.F)        { fuzzFamily(f, "qwen4_exp") }
func FuzzConfigGemma4Assistant(f *testing.F) { fuzzFamily(f, "gemma4_assistant") }
func FuzzConfigDeepseekV41(f *testing.F)     { fuzzFamily(f, "deepseek_v41") }
func FuzzConfigDeepseekV4(f *testing.F)      { fuzzFamily(f, "deepseek_v4") }
func FuzzConfigHyV4(f *testing.F)            { fuzzFamily(f, "hy_v4") }

// Every registered family has its fuzz function: above, or in its own
// test file (a family added later; package families, to call fuzzFamily).
func TestEveryFamilyConfigIsFuzzed(t *testing.T) {
	files, err := filepath.Glob("*_test.go") // this file's, or the family's own test file
	if err != nil || len(files) == 0 {
		t.Fatalf("the package's test files: %v", err)
	}
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, name := range model.Families() {
		if !strings.Contains(string(src), `fuzzFamily(f, "`+name+`")`) {
			t.Errorf("family %s has no FuzzConfig function calling fuzzFamily", name)
		}
	}
}

// fuzzFamily seeds f with the config.json of every fixture the family
// reads, each with one of its text keys to set (to its own value: the
// fuzzer mutates key, value and bytes), and checks that the parser, and
// describing a checkpoint of the config (every layer's wants, the head's,
// the limits), never panics: a config is either read, or refused with an
// error naming a key.
func fuzzFamily(f *testing.F, name string) {
	fam, ok := model.LookupFamily(name)
	if !ok {
		f.Fatalf("no family %s", name)
	}
	seeds := 0
	for _, fx := range fixtures.Catalog {
		if fx.Name == fixtures.Qwen36Full {
			continue // fixture a's config at other dimensions
		}
		spec, err := fixtures.Build(fx.Name)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := spec.ConfigJSON()
		if err != nil {
			f.Fatal(err)
		}
		id, err := model.ReadIdentity(raw)
		if err != nil {
			f.Fatalf("fixture %s: %v", fx.Name, err)
		}
		if !fam.Matches(id) {
			continue
		}
		text, _ := textObject(raw)
		for _, k := range slices.Sorted(maps.Keys(text)) {
			f.Add(raw, k, []byte(text[k]))
		}
		seeds++
	}
	if seeds == 0 {
		f.Fatalf("no fixture of family %s to seed its fuzzing", fam.Name)
	}
	f.Fuzz(func(t *testing.T, raw []byte, key string, value []byte) {
		raw = withKey(raw, key, value)
		c, err := fam.Parse(raw)
		if err != nil {
			if !namesKey(err.Error(), raw) {
				t.Fatalf("error names no key of the config: %v", err)
			}
			return
		}
		// What export and inspect do with a config before reading a tensor.
		if _, err := model.Describe(c, &st.Checkpoint{Tensors: map[string]*st.Tensor{}}); err != nil && !namesKey(err.Error(), raw) {
			t.Fatalf("describing: error names no key of the config: %v", err)
		}
	})
}

// textObject is the text configuration's keys: text_config's when the
// config nests one, else the root's.
func textObject(raw []byte) (map[string]json.RawMessage, func(map[string]json.RawMessage) []byte) {
	var root map[string]json.RawMessage
	if json.Unmarshal(raw, &root) != nil || root == nil {
		return nil, nil
	}
	var text map[string]json.RawMessage
	if json.Unmarshal(root["text_config"], &text) == nil && text != nil {
		return text, func(m map[string]json.RawMessage) []byte {
			root["text_config"], _ = json.Marshal(m)
			b, _ := json.Marshal(root)
			return b
		}
	}
	return root, func(m map[string]json.RawMessage) []byte { b, _ := json.Marshal(m); return b }
}

// withKey is raw with the text configuration's key set to value (deleted
// when value is empty); raw as it is when either is not JSON.
func withKey(raw []byte, key string, value []byte) []byte {
	text, encode := textObject(raw)
	if text == nil || (len(value) > 0 && !json.Valid(value)) {
		return raw
	}
	if len(value) == 0 {
		delete(text, key)
	} else {
		text[key] = json.RawMessage(value)
	}
	return encode(text)
}

// snakeKey is a config key as config.json spells them (rope_scaling, num_hidden_layers).
var snakeKey = regexp.MustCompile(`[a-z][a-z0-9]*(_[a-z0-9]+)+`)

// namesKey reports whether msg names a config key: a snake_case name, or
// any key of the JSON object, or says the JSON itself is invalid.
func namesKey(msg string, raw []byte) bool {
	if strings.Contains(msg, "invalid JSON") || snakeKey.MatchString(msg) {
		return true
	}
	var keys []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys = append(keys, k)
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return strings.Contains(msg, "JSON") || strings.Contains(msg, "json")
	}
	walk(v)
	return slices.ContainsFunc(keys, func(k string) bool { return len(k) > 2 && strings.Contains(msg, k) })
}
