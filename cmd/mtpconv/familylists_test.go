package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
)

// The lists that name every family (the README's family × target matrix,
// development.md's per-family layout rows, the families refused by name)
// are generated from the family registry, as the flag reference is from the
// CLI's definitions: a family registered and not regenerated (go generate
// ./cmd/mtpconv) fails TestFamilyLists, and no merge keeps two hand-kept
// rows side by side.

// generatedRegion is one block of a docs file between two marker comments,
// rewritten whole by go generate.
type generatedRegion struct {
	file, name string
	render     func() string
}

// begin and end are the marker comments around a generated region.
func (g generatedRegion) begin() string {
	return "<!-- " + g.name + ": generated from the registry by `go generate ./cmd/mtpconv`; do not edit -->\n"
}
func (g generatedRegion) end() string { return "<!-- end of " + g.name + " -->\n" }

// familyRegions are the family lists the docs hold.
var familyRegions = []generatedRegion{
	{"../../README.md", "the family matrix", familyMatrix},
	{"../../docs/development.md", "the family layout rows", familyLayoutRows},
	{"../../docs/sources.md", "the families refused by name", refusedByName},
}

// checkRegion compares the region of doc between begin and end with text;
// with -update-docs it rewrites the file instead.
func checkRegion(t *testing.T, file, begin, end, text string) {
	t.Helper()
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s has no generated region between %q and %q", file, begin, end)
	}
	want := append(append(append([]byte{}, doc[:i+len(begin)]...), text...), doc[j:]...)
	if *updateDocs {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("%s: %s is stale; run go generate ./cmd/mtpconv", file, strings.TrimSpace(begin))
	}
}

// mark is a matrix cell: the consumer's name for the family's head, or a
// dash where the target refuses the family (the export says why).
func mark(ok bool, what string) string {
	if !ok {
		return "—"
	}
	return what
}

// familyMatrix is the README's table (links from the repository root): one row a family, linked to its docs
// page, one column a target, each cell read from the family's tables.
func familyMatrix() string {
	var b strings.Builder
	b.WriteString("| family | `gguf` (llama.cpp arch) | `mlx` (mlx-vlm drafter) | `combined` | `openvino` | `hf` (vLLM/SGLang) |\n|---|---|---|---|---|---|\n")
	for _, f := range model.Registered() {
		mlx := mark(f.MLX.DrafterModelType != "", "`"+f.MLX.DrafterModelType+"`")
		if f.MLX.DrafterModelType != "" && f.MLX.DrafterUnrunnable != "" {
			mlx += " (nothing runs it yet)"
		}
		hf := mark(f.HF.Refusal == "", "yes")
		if f.HF.Refusal == "" && f.HF.Unported != "" {
			hf = "not ported"
		}
		if f.HF.OwnRepo != "" {
			hf = "its own repo, served as released"
		}
		fmt.Fprintf(&b, "| [%s](%s) `%s` | %s | %s | %s | %s | %s |\n",
			f.Title, f.Docs, f.Name,
			mark(f.GGUF.Refusal == "" && f.GGUF.Arch != "", "`"+f.GGUF.Arch+"`"), mlx,
			mark(f.MLX.CombinedRefusal == "", "yes"), mark(f.OpenVINO.Refusal == "", "yes"), hf)
	}
	var refused []string
	for _, u := range model.UnsupportedFamilies() {
		refused = append(refused, u.Name)
	}
	fmt.Fprintf(&b, "\nRefused by the name their users know, saying what is missing ([why](docs/sources.md#families-refused-by-name)): %s.\n",
		strings.Join(refused, ", "))
	return b.String()
}

// familyLayoutRows are development.md's layout rows of the family files
// (links from docs/).
func familyLayoutRows() string {
	var b strings.Builder
	b.WriteString("| family file | holds |\n|---|---|\n")
	for _, f := range model.Registered() {
		fmt.Fprintf(&b, "| `convert/families/%s` | %s (`%s`, [its page](%s)): %s |\n",
			f.File(), f.Title, f.Name, strings.TrimPrefix(f.Docs, "docs/"), f.Layout)
	}
	return b.String()
}

// refusedByName lists the known families mtpconv refuses by name, with why.
func refusedByName() string {
	var b strings.Builder
	for _, u := range model.UnsupportedFamilies() {
		fmt.Fprintf(&b, "- **%s**: %s.\n", u.Name, u.Why)
	}
	return b.String()
}

func TestFamilyLists(t *testing.T) {
	t.Parallel()
	for _, g := range familyRegions {
		text := g.render()
		checkRegion(t, g.file, g.begin(), g.end(), text)
		// The generator itself: every registered family is in the family lists.
		if g.name == "the families refused by name" {
			continue
		}
		for _, f := range model.Registered() {
			if !strings.Contains(text, "`"+f.Name+"`") || !strings.Contains(text, f.Title) {
				t.Errorf("%s: family %s (%s) is missing from %s", g.file, f.Name, f.Title, g.name)
			}
		}
	}
	if n := len(model.Registered()); n < 14 {
		t.Errorf("%d families registered, want the 14 at least", n)
	}
	for _, u := range model.UnsupportedFamilies() {
		if !strings.Contains(refusedByName(), u.Name) {
			t.Errorf("the families refused by name miss %s", u.Name)
		}
	}
}
