package families_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
)

// wantGGUFNames checks the dry-run name list of a family's fixture: every
// tensor the gguf target plans for its sidecar (bf16), as "name type",
// against the list the family's tables must give.
func wantGGUFNames(t *testing.T, fixture string, want ...string) {
	t.Helper()
	dir := fixtures.Ensure(t, fixture)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		dir = testmodel.WithTokenizer(t, fixture)
	}
	m := testmodel.LoadDir(t, dir)
	var got []string
	for n, dt := range testmodel.PlanNames(t, "gguf", m) {
		got = append(got, n+" "+dt)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: the sidecar's tensors are\n\t%s\nwant\n\t%s", fixture, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
