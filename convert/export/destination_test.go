package export

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/manifests"
)

// An output file may take no name another file of the export takes: not
// another output's, not one its destination writes or keeps itself, in any
// case.
func TestCheckNames(t *testing.T) {
	out := &newFolder{out: "out", withCard: true}
	into := &addition{dir: "mlx"}
	for _, c := range []struct {
		name  string
		d     destination
		files []string
		clash string // "" when accepted
	}{
		{"distinct", out, []string{"a.gguf", "config.json"}, ""},
		{"the card", out, []string{"README.md"}, "README.md, the model card"},
		{"the card, another case", out, []string{"readme.MD"}, "README.md, the model card"},
		{"no card", &newFolder{out: "out"}, []string{"README.md"}, ""},
		{"the manifest", &newFolder{out: "out"}, []string{"mtpconv-manifest.json"}, "the manifest"},
		{"a resume marker", out, []string{planMarker}, "the marker of an interrupted run"},
		{"two outputs", out, []string{"x.gguf", "X.gguf"}, "x.gguf, another output file"},
		{"--into staging", into, []string{intoStaging}, "the staging folder of --into"},
		{"--into originals", into, []string{manifests.IntoOriginals}, "the folder of the originals"},
		{"--into takes a README.md", into, []string{"README.md"}, ""},
	} {
		err := checkNames(c.d, c.files)
		switch {
		case c.clash == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.clash != "" && (err == nil || !strings.Contains(err.Error(), c.clash)):
			t.Errorf("%s: %v (want a clash with %s)", c.name, err, c.clash)
		}
	}
}

// --out and --into name one destination: exclusive, and one of them
// required but for a dry run; each refusal a usage error.
func TestDestOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		out, into string
		dryRun    bool
		want      Dest
		err       string
	}{
		{"o", "", false, Out("o"), ""},
		{"", "i", false, Into("i"), ""},
		{"", "i", true, Into("i"), ""},
		{"", "", true, Dest{}, ""},
		{"", "", false, Dest{}, "--out (or --into) is required"},
		{"o", "i", false, Dest{}, "--into and --out are exclusive"},
		{"o", "i", true, Dest{}, "--into and --out are exclusive"},
	} {
		d, err := DestOf(c.out, c.into, c.dryRun)
		var ue targets.UsageError
		switch {
		case c.err == "" && (err != nil || d != c.want):
			t.Errorf("DestOf(%q, %q, %v) = %+v, %v; want %+v", c.out, c.into, c.dryRun, d, err, c.want)
		case c.err != "" && (!errors.As(err, &ue) || err.Error() != c.err):
			t.Errorf("DestOf(%q, %q, %v): %v, want the usage error %q", c.out, c.into, c.dryRun, err, c.err)
		}
	}
	// A request built without the flags is held to the same rule.
	if _, err := newDestination(Request{}, nil); err == nil || err.Error() != "--out (or --into) is required" {
		t.Errorf("no destination: %v", err)
	}
}
