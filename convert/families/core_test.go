package families

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// familyMarks are what names a family in code: its name, model types,
// Hugging Face and llama.cpp architectures, the first word of its title
// (normalized: lower case, no "_", "-", "." or "/"), and the tensor names
// (suffixes under a layer or prefix) no more than two families use, by family.
// The unsupported families' architectures are marks too (as "unsupported").
func familyMarks(t *testing.T) (words map[string]string, tensors map[string]string) {
	t.Helper()
	words, tensors = map[string]string{}, map[string]string{}
	users := map[string]map[string]bool{}
	use := func(fam, suffix string) {
		if users[suffix] == nil {
			users[suffix] = map[string]bool{}
		}
		users[suffix][fam] = true
	}
	for _, name := range model.Families() {
		fam, _ := model.LookupFamily(name)
		title, _, _ := strings.Cut(fam.Title, "/")
		title, _, _ = strings.Cut(title, " ")
		for _, w := range append([]string{fam.Name, fam.Arch, fam.GGUF.Arch, title}, fam.ModelTypes...) {
			if n := normalized(w); len(n) >= 3 {
				words[n] = fam.Name
			}
		}
		for suffix := range fam.GGUF.Layer {
			use(fam.Name, suffix)
		}
	}
	for _, u := range unsupportedFamilies {
		for _, a := range u.Architectures {
			words[normalized(a)] = "unsupported " + u.Name
		}
	}
	for _, fx := range fixtures.Catalog {
		c, err := model.ParseConfig(fixtureConfig(t, fx.Name))
		if err != nil {
			continue // a fixture of a config the families refuse
		}
		fam, _ := c.Family()
		spec := fam.Spec(c)
		wants := slices.Concat(spec.TrunkTop, spec.HeadTop, spec.HeadLayer)
		for i := range c.NumHiddenLayers {
			wants = append(wants, spec.TrunkLayer(i)...)
		}
		for _, w := range wants {
			use(fam.Name, w.Suffix)
		}
	}
	for suffix, fams := range users {
		if len(fams) <= 2 {
			tensors[suffix] = strings.Join(slices.Sorted(func(yield func(string) bool) {
				for f := range fams {
					if !yield(f) {
						return
					}
				}
			}), ", ")
		}
	}
	return words, tensors
}

// normalized is s in lower case without "_", "-", "." or "/".
func normalized(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune("_-./", r) {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// familiesNamed are the families the non-test Go files of dir name in
// code (an identifier or a string literal holding one of its words, a
// string literal equal to one of its tensor names), each with one place.
// Comments may cite a family as the reason a field exists.
func familiesNamed(t *testing.T, dir string, words, tensors map[string]string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		mark := func(pos token.Pos, text string, literal bool) {
			if fam, ok := tensors[text]; ok && literal {
				named[fam] = fset.Position(pos).String() + ": " + strconv.Quote(text)
			}
			n := normalized(text)
			for w, fam := range words {
				if strings.Contains(n, w) {
					named[fam] = fset.Position(pos).String() + ": " + text
				}
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				mark(n.Pos(), n.Name, false)
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
					mark(n.Pos(), s, true)
				}
			}
			return true
		})
	}
	return named
}

// The core, convert/model, names no family: every family's identity and
// its own tensor names live in this package. The same check finds every
// family in this package's files, so it is able to fail.
func TestCoreNamesNoFamily(t *testing.T) {
	t.Parallel()
	words, tensors := familyMarks(t)
	if len(words) < len(model.Families()) || len(tensors) == 0 {
		t.Fatalf("%d words, %d tensor names for %d families", len(words), len(tensors), len(model.Families()))
	}
	for fam, where := range familiesNamed(t, filepath.Join("..", "model"), words, tensors) {
		t.Errorf("convert/model names family %s: %s", fam, where)
	}
	here := familiesNamed(t, ".", words, tensors)
	for _, name := range model.Families() {
		if here[name] == "" {
			t.Errorf("the check finds no mention of family %s in its own package", name)
		}
	}
}
