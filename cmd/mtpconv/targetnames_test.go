package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The CLI reaches every target through the registry's interfaces (export,
// inspect's file, folder, head and repo inspectors): no file of it imports
// a target package but to register it (a blank import).
func TestCLINamesNoTarget(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/mtpconv/mtpconv/convert/targets/") && (imp.Name == nil || imp.Name.Name != "_") {
				t.Errorf("%s imports the target package %s by name; reach it through convert/targets", f, path)
			}
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("read %d files of the command", checked)
	}
}
