package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// verify --save brings the card's verification section up to date: the card
// is then what `mtpconv card` writes from the saved report, a user's edit
// elsewhere in the card is kept, and an output without a card gets none.
func TestVerifySaveRefreshesCard(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	out := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx", "--head-precision", "int4")
	cardPath := filepath.Join(out, manifests.CardFile)
	before, _ := os.ReadFile(cardPath)
	if !bytes.Contains(before, []byte("Not yet run on this folder")) {
		t.Fatalf("a fresh card claims a verification:\n%s", before)
	}
	if code, _, stderr := runCLI(t, "verify", "--save", "--src", src, out); code != 0 {
		t.Fatal(stderr)
	}
	after, _ := os.ReadFile(cardPath)
	if !bytes.Contains(after, []byte("`mtpconv verify` passed: ")) || bytes.Contains(after, []byte("Not yet run")) ||
		!bytes.Contains(after, []byte("recomputed from the source")) {
		t.Fatalf("verify --save left the card's verification section:\n%s", after)
	}
	if code, _, stderr := runCLI(t, "card", out); code != 0 {
		t.Fatal(stderr)
	}
	if whole, _ := os.ReadFile(cardPath); !bytes.Equal(whole, after) {
		t.Errorf("the refreshed card differs from mtpconv card's:\n%s\n---\n%s", after, whole)
	}

	// An edit outside the section survives; a second --save (no --src now) updates the section again.
	edited := bytes.Replace(after, []byte("## How to run\n"), []byte("## How to run\n\nOur own note.\n"), 1)
	os.WriteFile(cardPath, edited, 0o644)
	if code, _, stderr := runCLI(t, "verify", "--save", out); code != 0 {
		t.Fatal(stderr)
	}
	again, _ := os.ReadFile(cardPath)
	if !bytes.Contains(again, []byte("Our own note.")) || !bytes.Contains(again, []byte(", 0 tensors recomputed from the source.")) {
		t.Errorf("the second --save lost the edit or kept the old section:\n%s", again)
	}
	if n := strings.Count(string(again), "## Verification"); n != 1 {
		t.Errorf("%d verification sections", n)
	}

	// A README.md without mtpconv's section is left alone (with a warning).
	os.WriteFile(cardPath, []byte("# ours\n"), 0o644)
	code, _, stderr := runCLI(t, "verify", "--save", out)
	if b, _ := os.ReadFile(cardPath); code != 0 || string(b) != "# ours\n" || !strings.Contains(stderr, "left as it is") {
		t.Errorf("exit %d, stderr %q, card %q", code, stderr, b)
	}

	// --no-card: verify --save writes the report and no card.
	bare := filepath.Join(t.TempDir(), "bare")
	exportTo(t, fixtures.Qwen36, bare, "--target", "mlx", "--no-card")
	if code, _, stderr := runCLI(t, "verify", "--save", bare); code != 0 {
		t.Fatal(stderr)
	}
	if _, err := os.Stat(filepath.Join(bare, manifests.CardFile)); err == nil {
		t.Error("verify --save wrote a card into a --no-card output")
	}
}
