package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// A dense head beside a MoE trunk (Inkling's MTP depths): the manifest, the
// card and inspect speak of no experts (the card's "every MoE block" line
// would describe blocks the folder does not have), and verify, which
// checks stacked experts against the manifest's count, still passes.
func TestDenseHeadSaysNoExperts(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Inkling)
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--out", out, "--quiet", "--target", "mlx", "--head-precision", "int8"); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	var man struct {
		Model struct {
			NumExperts int `json:"num_experts"`
		} `json:"model"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "mtpconv-manifest.json"))
	if err != nil || json.Unmarshal(raw, &man) != nil || man.Model.NumExperts != 0 {
		t.Errorf("manifest num_experts %d: %v", man.Model.NumExperts, err)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || strings.Contains(string(card), "routed experts") {
		t.Errorf("the card speaks of experts: %v", err)
	}
	if code, stdout, stderr := runCLI(t, "inspect", out); code != 0 || !strings.Contains(stdout, "MTP depth 2, dense, hidden 128") {
		t.Errorf("inspect: exit %d: %s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, "verify", "--src", src, out); code != 0 || !strings.Contains(stdout, "recomputed from the source: OK") {
		t.Errorf("verify: exit %d: %s%s", code, stdout, stderr)
	}
}
