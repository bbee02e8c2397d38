package manifests

import (
	"strings"
	"testing"
)

// RefreshVerification replaces exactly the verification section's body,
// wherever the section is, and refuses a card without one.
func TestRefreshVerification(t *testing.T) {
	ok := &Report{OK: true, Files: 2, Tensors: 1, Entries: 3, Recomputed: 1}
	want := verificationText(ok)
	cases := []struct {
		name, card, out string
		found           bool
	}{
		{"middle", "# t\n\n## Verification\n\nNot yet run.\n\n## Files\n\n| a |\n", "# t\n\n## Verification\n\n" + want + "\n\n## Files\n\n| a |\n", true},
		{"last", "# t\n\n## Verification\n\nold\nlines\n", "# t\n\n## Verification\n\n" + want + "\n", true},
		{"edited elsewhere", "# t\nmine\n\n## Verification\n\nold\n\n## Files\nmine too\n", "# t\nmine\n\n## Verification\n\n" + want + "\n\n## Files\nmine too\n", true},
		{"none", "# someone's card\n", "# someone's card\n", false},
	}
	for _, c := range cases {
		out, found := RefreshVerification([]byte(c.card), ok)
		if found != c.found || string(out) != c.out {
			t.Errorf("%s: found %v, card %q; want %v, %q", c.name, found, out, c.found, c.out)
		}
	}
	if !strings.Contains(want, "1 file") && !strings.Contains(want, "2 files and 1 tensor (3 stored entries)") {
		t.Errorf("verification text %q", want)
	}
}

// The title names the model without its org, what the output is, the
// runtime and the precision.
func TestTitle(t *testing.T) {
	m := &Manifest{Target: "mlx", Model: Model{BaseModel: "Qwen/Qwen3.6-35B-A3B", Name: "Qwen/Qwen3.6-35B-A3B"}}
	cases := []struct {
		tc   TargetCard
		want string
	}{
		{TargetCard{Consumer: "MLX", TitlePrecision: "int4"}, "Qwen3.6-35B-A3B MTP head for MLX (int4)"},
		{TargetCard{Consumer: "llama.cpp", Whole: true, TitlePrecision: "GGUF Q4_K_M"}, "Qwen3.6-35B-A3B with its MTP head for llama.cpp (GGUF Q4_K_M)"},
		{TargetCard{}, "Qwen3.6-35B-A3B MTP head for mlx"},
	}
	for _, c := range cases {
		if got := Title(m, c.tc); got != c.want {
			t.Errorf("Title = %q, want %q", got, c.want)
		}
	}
}
