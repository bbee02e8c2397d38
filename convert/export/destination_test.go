package export

import (
	"strings"
	"testing"

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
