package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// Declared against present, judged per runtime (issue 38, item 1): a head
// quantized without its companions, fewer layers than declared where the
// runtime runs only the first (no problem) or refuses to load (a problem),
// a headless repo that declares a head; a complete int8 head with its
// scales is no problem for vLLM (SGLang builds mtp.fc and eh_proj as a
// plain nn.Linear, which an int8 weight fails).
func TestDeclaredVsPresent(t *testing.T) {
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name         string
		rs           repoSpec
		vllm, sglang string // a problem's words for each runtime, "" none
		mend         map[Runtime]string
	}{
		{"int8 head with its scales", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all}, "", "mtp.fc: sglang 0.5.23 builds it unquantized (built without the quantization config", nil},
		{"int8 head without its scales", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, NoHeadScales: true, Keep: all},
			"mtp.fc: stored int8 without its weight_scale", "mtp.fc: stored int8 without its weight_scale", nil},
		{"GPTQ head without qzeros and scales", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: gptq4, Storage: trunkPacked, HeadStorage: trunkPacked, NoHeadScales: true, Keep: all},
			"without its qzeros, scales", "without its qzeros, scales", nil},
		{"2 declared, 1 held, quantized", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all, Depth: 2}, "", "mtp.fc: sglang 0.5.23 builds it unquantized", nil},
		{"2 declared, 1 held, bf16", repoSpec{Fixture: fixtures.Qwen36Dense, Keep: all, Depth: 2}, "default_loader.py:562-567", "",
			map[Runtime]string{VLLM: "set config.json text_config.mtp_num_hidden_layers to 1"}},
		{"DeepSeek, 2 declared, 1 held, quantized", repoSpec{Fixture: fixtures.DeepSeekV3, Quant: ctW8A8, Storage: trunkInt8, HeadStorage: trunkInt8, Keep: all, Depth: 2}, "MTP layer 3 weights missing (deepseek_mtp.py:515-533", "model.layers.2.eh_proj: sglang 0.5.23 builds it unquantized", nil},
		{"DeepSeek, bf16, 2 declared, 1 held", repoSpec{Fixture: fixtures.DeepSeekV3, Keep: all, Depth: 2}, "MTP layer 3 weights missing", "",
			map[Runtime]string{VLLM: "set config.json num_nextn_predict_layers to 1 (the MTP layers the repo holds)"}},
		{"DeepSeek, 2 declared, 1 held, bf16 head in a quantized repo, for SGLang", repoSpec{Fixture: fixtures.DeepSeekV3, Quant: ctW8A8, Storage: trunkInt8, Keep: all, Depth: 2}, "MTP layer 3 weights missing", "model.layers.2.self_attn", nil},
		{"headless, a head declared", repoSpec{Fixture: fixtures.Qwen36Dense, Quant: ctW8A8, Storage: trunkInt8}, "holds no MTP head", "holds no MTP head", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := makeRepo(t, tc.rs)
			m := loadRepo(t, dir)
			for rt, want := range map[Runtime]string{VLLM: tc.vllm, SGLang: tc.sglang} {
				r, err := ServingFor(m, []Runtime{rt})
				if err != nil {
					t.Fatal(err)
				}
				err = r.Err()
				if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
					t.Errorf("%s: %v, want %q", rt, err, want)
				}
				if err != nil && r.Mend == "" && r.MendConfig == "" && !strings.Contains(err.Error(), "mtpconv export") {
					t.Errorf("%s: no mending command: %v", rt, err)
				}
				if mend := tc.mend[rt]; mend != "" && !strings.Contains(r.MendConfig+r.Mend, mend) {
					t.Errorf("%s: mend %q %q, want %q", rt, r.MendConfig, r.Mend, mend)
				}
			}
		})
	}
}
