package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
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
	code, stdout, stderr := runCLI(t, "card", out)
	if code != 0 {
		t.Fatal(stderr)
	}
	if want := "wrote " + cardPath + " ("; !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, "from the manifest and the saved verify report") {
		t.Errorf("card says %q, want %q... from the manifest and the saved verify report", stdout, want)
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
	code, _, stderr = runCLI(t, "verify", "--save", out)
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

// A drafter no released mlx-vlm runs says so, from the family's MLX table
// alone: the card names no load_drafter snippet, the export prints the
// note, and the family's docs page quotes the same sentence (the README's
// matrix says "nothing runs it yet" and links there); a drafter mlx-vlm
// runs keeps its snippet.
func TestUnrunnableDrafterSaysSo(t *testing.T) {
	t.Parallel()
	for _, name := range model.FamiliesWhere(func(f *model.Family) bool { return f.MLX.DrafterUnrunnable != "" }) {
		f, _ := model.LookupFamily(name)
		page, err := os.ReadFile(filepath.Join(fixtures.Root(), f.Docs))
		if err != nil {
			t.Fatal(err)
		}
		if why := f.MLX.DrafterUnrunnable; !strings.Contains(string(page), why) {
			t.Errorf("%s: %s does not say %q", name, f.Docs, why)
		}
	}
	for _, c := range []struct {
		fixture string
		why     string // the family's DrafterUnrunnable, "" when mlx-vlm runs it
	}{
		{fixtures.GLM47Flash, "mlx-vlm 0.7.10's `load_drafter` has no `glm4_moe_lite_mtp` model"},
		{fixtures.Qwen36, ""},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "o")
			code, stdout, stderr := runCLI(t, "export", "--src", fixtures.Ensure(t, c.fixture), "--target", "mlx", "--out", out)
			if code != 0 {
				t.Fatal(stderr)
			}
			card, err := os.ReadFile(filepath.Join(out, manifests.CardFile))
			if err != nil {
				t.Fatal(err)
			}
			printed := stdout + stderr
			if c.why == "" {
				if !strings.Contains(string(card), "load_drafter(") || strings.Contains(string(card), "Nothing runs") || strings.Contains(printed, "nothing runs") {
					t.Errorf("a drafter mlx-vlm runs: card\n%s\nprinted %q", card, printed)
				}
				return
			}
			if !strings.Contains(string(card), "Nothing runs this drafter yet: "+c.why) || strings.Contains(string(card), "load_drafter(") || strings.Contains(string(card), "tested") {
				t.Errorf("the card does not say nothing runs it (%q):\n%s", c.why, card)
			}
			if !strings.Contains(printed, "nothing runs this drafter yet: "+c.why) {
				t.Errorf("the export does not print %q: %q", c.why, printed)
			}
		})
	}
}

// A combined export offers mlx_lm.generate only when the folder holds a
// tokenizer; of a source without one it says what to add, on the card and
// when it runs.
func TestCombinedCardWithoutTokenizer(t *testing.T) {
	t.Parallel()
	withTok := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(withTok, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36), withTok)
	testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), withTok)
	for _, c := range []struct {
		src       string
		tokenizer bool
	}{{fixtures.Ensure(t, fixtures.Qwen36), false}, {withTok, true}} {
		out := filepath.Join(t.TempDir(), "o")
		code, stdout, stderr := runCLI(t, "export", "--src", c.src, "--target", "combined", "--out", out)
		if code != 0 {
			t.Fatal(stderr)
		}
		card, err := os.ReadFile(filepath.Join(out, manifests.CardFile))
		if err != nil {
			t.Fatal(err)
		}
		offers := strings.Contains(string(card), "mlx_lm.generate")
		says := strings.Contains(string(card), targets.NoTokenizer) && strings.Contains(stdout+stderr, targets.NoTokenizer)
		if offers != c.tokenizer || says == c.tokenizer {
			t.Errorf("tokenizer %v: the card offers mlx_lm.generate %v, says none is there %v:\n%s", c.tokenizer, offers, says, card)
		}
	}
}
