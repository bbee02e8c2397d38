package mtpconv_test

// The layer order of docs/development.md ("Layers"), checked against the
// imports of every package's non-test files.

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layerRow is one row of the table: its number and package patterns.
type layerRow struct {
	n        int
	patterns []string
}

// readLayers parses the table under "## Layers" of docs/development.md.
func readLayers(t *testing.T) []layerRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Layers\n")
	if !ok {
		t.Fatal(`docs/development.md has no "## Layers" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("^\\| (\\d+) \\| ([^|]+) \\|")
	name := regexp.MustCompile("`([^`]+)`")
	var rows []layerRow
	for _, line := range strings.Split(sec, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n != len(rows)+1 {
			t.Fatalf("docs/development.md, Layers: row %d follows row %d", n, len(rows))
		}
		r := layerRow{n: n}
		for _, p := range name.FindAllStringSubmatch(m[2], -1) {
			r.patterns = append(r.patterns, p[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 2 {
		t.Fatalf("docs/development.md, Layers: %d rows", len(rows))
	}
	return rows
}

// matches reports whether a package (its path in the module) is one a
// pattern names: the path itself, or for "x/*" any package below x.
func matches(pattern, pkg string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/*"); ok {
		return strings.HasPrefix(pkg, dir+"/")
	}
	return pkg == pattern
}

// allowed reports whether pkg may import imp: imp's row is below pkg's.
func allowed(rows []layerRow, pkg, imp string) bool {
	r, ir := rowOf(rows, pkg), rowOf(rows, imp)
	return r != 0 && ir != 0 && ir < r
}

// rowOf is the row naming pkg, 0 for none.
func rowOf(rows []layerRow, pkg string) int {
	for _, r := range rows {
		for _, p := range r.patterns {
			if matches(p, pkg) {
				return r.n
			}
		}
	}
	return 0
}

// moduleImports maps every package of the module with non-test Go files
// (its path relative to the module) to the module's packages its non-test
// files import, whatever their build constraints.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	mod, ok := strings.CutPrefix(line, "module ")
	if !ok {
		t.Fatalf("go.mod starts with %q, not its module line", line)
	}
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(p))
		if _, ok := pkgs[pkg]; !ok {
			pkgs[pkg] = nil
		}
		for _, spec := range f.Imports {
			ip, _ := strconv.Unquote(spec.Path.Value)
			if rel, ok := strings.CutPrefix(ip, mod+"/"); ok && !slices.Contains(pkgs[pkg], rel) {
				pkgs[pkg] = append(pkgs[pkg], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// Every package sits in one row of the layer table and imports only
// packages of lower rows; every row names a package.
func TestLayers(t *testing.T) {
	t.Parallel()
	rows := readLayers(t)
	pkgs := moduleImports(t)
	used := map[string]bool{}
	for pkg, imports := range pkgs {
		if pkg == "." {
			t.Errorf("the module root holds non-test Go files; give them a package of their own and a row")
			continue
		}
		r := rowOf(rows, pkg)
		if r == 0 {
			t.Errorf("%s is in no row of docs/development.md's Layers table", pkg)
			continue
		}
		for _, row := range rows {
			for _, p := range row.patterns {
				if matches(p, pkg) {
					used[p] = true
				}
			}
		}
		for _, ip := range imports {
			if !allowed(rows, pkg, ip) {
				t.Errorf("%s (row %d) imports %s (row %d): a package imports only lower rows", pkg, r, ip, rowOf(rows, ip))
			}
		}
	}
	for _, row := range rows {
		for _, p := range row.patterns {
			if !used[p] {
				t.Errorf("row %d names %s, which is no package of the module", row.n, p)
			}
		}
	}
}

// The checks above on a made-up module: an import of a higher row, of the
// same row, and of a package in no row are each caught.
func TestLayersRule(t *testing.T) {
	t.Parallel()
	rows := []layerRow{{1, []string{"a"}}, {2, []string{"b/*"}}, {3, []string{"c"}}}
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"c", "a", true},
		{"b/x", "a", true},
		{"a", "c", false},
		{"b/x", "b/y", false},
		{"b/x", "d", false},
	} {
		if ok := allowed(rows, c.pkg, c.imp); ok != c.ok {
			t.Errorf("%s importing %s: allowed %v, want %v", c.pkg, c.imp, ok, c.ok)
		}
	}
	if matches("b/*", "b") || !matches("b/*", "b/x/y") || matches("b/*", "bx/y") {
		t.Error("b/* must name the packages below b, not b")
	}
}
