// Package testmodel gives the tests of convert's callers (targets, CLI)
// described models: the fixtures, with the test tokenizer when a target
// needs a vocabulary, and a test-only GLM-like family (family.go).
package testmodel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// Load describes the fixture (generated on first use), closed when the test ends.
func Load(t testing.TB, fixture string) *model.Model {
	t.Helper()
	return LoadDir(t, fixtures.Ensure(t, fixture))
}

// LoadDir describes the checkpoint in dir, closed when the test ends.
func LoadDir(t testing.TB, dir string) *model.Model {
	t.Helper()
	m, err := model.Load(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	return m
}

// Target looks up a registered target.
func Target(t testing.TB, name string) targets.Target {
	t.Helper()
	tg, err := targets.LookupTarget(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// WithTokenizer links a fixture and the tiny test tokenizer into one folder.
func WithTokenizer(t testing.TB, fixture string) string {
	dir := filepath.Join(t.TempDir(), fixture)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixture), dir)
	testfs.LinkDir(t, tokenizerDir(), dir)
	return dir
}

func tokenizerDir() string { return filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny") }

// TokenizerFiles are the tiny test tokenizer's files, for a synthesised checkpoint.
func TokenizerFiles(t testing.TB) map[string][]byte {
	names, _ := filepath.Glob(filepath.Join(tokenizerDir(), "*"))
	out := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	return out
}

// Plan plans an export of m through the target registry.
func Plan(t testing.TB, m *model.Model, target string, o targets.Options) (*plan.Plan, error) {
	t.Helper()
	return Target(t, target).Plan(m, o)
}

// PlanNames plans m for target name with default options and returns the planned tensors' names and dtypes.
func PlanNames(t testing.TB, name string, m *model.Model) map[string]string {
	t.Helper()
	p, err := Plan(t, m, name, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range p.Tensors {
		out[o.Name] = string(o.DType)
	}
	return out
}
