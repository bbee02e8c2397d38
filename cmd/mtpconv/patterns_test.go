package main

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// A config pattern outside the syntax Python's re and RE2 read alike is
// named as not judged, one Python rejects as invalid: inspect --strict
// exits 1 on both (the head stored bf16 in the repo's own files), and
// --into refuses to write a head the runtimes' reading of them would decide.
func TestConfigPatterns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ entry, want string }{
		{`re:^mtp[[:punct:]].*`, `cannot judge this pattern: "^mtp[[:punct:]].*"`},
		{`re:^mtp.{,3}`, `cannot judge this pattern: "^mtp.{,3}"`},
		{`re:^mtp\\..*\\z`, `"^mtp\\..*\\z" is invalid in Python's re (bad escape \z`},
	} {
		t.Run(c.entry, func(t *testing.T) {
			t.Parallel()
			ct := `{"quant_method": "compressed-tensors", "format": "int-quantized",
				"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}}},
				"ignore": ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*linear_attn.*", "re:.*visual.*", "` + c.entry + `"]}`
			repo := testmodel.HFRepo{Fixture: fixtures.Qwen36GenAI, Quant: ct, Storage: testmodel.TrunkInt8, Keep: func(string) bool { return true }}.Write(t)
			code, stdout, stderr := runCLI(t, "inspect", repo, "--strict")
			if code != 1 || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("inspect --strict: exit %d, want 1 and %q\n%s%s", code, c.want, stdout, stderr)
			}
			if n := strings.Count(stderr, c.want); strings.Contains(c.want, "cannot judge") && (n != 1 || strings.Contains(stderr, "mend")) {
				t.Errorf("said %d times, want once and no mending:\n%s", n, stderr)
			}
			headless := testmodel.HFRepo{Fixture: fixtures.Qwen36GenAI, Quant: ct, Storage: testmodel.TrunkInt8}.Write(t)
			code, _, stderr = runCLI(t, "export", "--src", fixtures.Ensure(t, fixtures.Qwen36GenAI), "--target", "hf", "--into", headless, "--quiet")
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("export --into: exit %d, want 1 and %q\n%s", code, c.want, stderr)
			}
		})
	}
}
