// Package testmodel loads fixture checkpoints as described models for the
// tests of the packages above convert (targets, CLI).
package testmodel

import (
	"testing"

	"github.com/mtpconv/mtpconv/convert"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// Load describes the fixture (generated on first use), closed when the test ends.
func Load(t testing.TB, fixture string) *convert.Model {
	t.Helper()
	return LoadDir(t, fixtures.Ensure(t, fixture))
}

// LoadDir describes the checkpoint in dir, closed when the test ends.
func LoadDir(t testing.TB, dir string) *convert.Model {
	t.Helper()
	m, err := convert.Load(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	return m
}

// Target looks up a registered target.
func Target(t testing.TB, name string) convert.Target {
	t.Helper()
	tg, err := convert.LookupTarget(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
