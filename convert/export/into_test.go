package export

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mtpconv/mtpconv/manifests"
)

// However many steps of the final phase of --into run before a kill or a
// failure, the folder never holds a descriptor (.xml) whose data (.bin) is
// not its own, never a file of ours that no manifest records, and never
// loses a file of its own: the export's own MTP IR (optimum-intel writes
// one) is at its place or, recorded, under IntoOriginals.
func TestIntoStepsNeverMix(t *testing.T) {
	files := []string{"m.bin", "m.xml"} // the Intoer's order: data first
	const (
		oursManifest   = `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"new"}`
		theirsManifest = `{"tool":{"name":"mtpconv"},"into":{"owned_files":["mtpconv-original/m.bin","mtpconv-original/m.xml","mtpconv-manifest.json"],` +
			`"updated":[{"name":"m.bin","original":{"name":"mtpconv-original/m.bin"}},{"name":"m.xml","original":{"name":"mtpconv-original/m.xml"}}]},"v":"new"}`
	)
	for _, c := range []struct {
		name     string
		old      string // what the folder holds of files before: "" none, "ours" an earlier --into's, "theirs" the export's own
		manifest string // the staged manifest
	}{
		{"fresh", "", oursManifest},
		{"replacing ours", "ours", oursManifest},
		{"the export's own", "theirs", theirsManifest},
		{"the export's own, originals folder there", "theirs+dir", theirsManifest},
	} {
		var ch intoChanges
		ch.files = files
		switch c.old {
		case "ours":
			ch.ours = files
		case "theirs", "theirs+dir":
			ch.theirs = files
		}
		setup := func() (dir, staging string) {
			dir = t.TempDir()
			staging = filepath.Join(dir, intoStaging)
			os.MkdirAll(filepath.Join(staging, IntoOriginals), 0o755)
			write := func(d, name, body string) {
				if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(staging, "m.bin", "new")
			write(staging, "m.xml", "new")
			write(staging, manifests.FileName, c.manifest)
			switch c.old {
			case "ours":
				write(dir, manifests.FileName, `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"old"}`)
				fallthrough
			case "theirs":
				write(dir, "m.bin", "old")
				write(dir, "m.xml", "old")
			case "theirs+dir":
				write(dir, "m.bin", "old")
				write(dir, "m.xml", "old")
				os.MkdirAll(filepath.Join(dir, IntoOriginals), 0o755)
			}
			return dir, staging
		}
		probe, probeStaging := setup()
		n := len(intoSteps(probe, probeStaging, ch))
		for k := 0; k <= n; k++ {
			dir, staging := setup()
			steps := intoSteps(dir, staging, ch)
			for _, s := range steps[:k] {
				if err := s.apply(); err != nil {
					t.Fatalf("%s: step %+v: %v", c.name, s, err)
				}
			}
			read := func(name string) string {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					return "absent"
				}
				return string(b)
			}
			xml, bin := read("m.xml"), read("m.bin")
			if xml != "absent" && xml != bin {
				t.Errorf("%s, stopped after %d of %d steps: the %s .xml is beside the %s .bin", c.name, k, n, xml, bin)
			}
			kind, rec := folderOwner(dir)
			recorded := func(f string) bool {
				if kind != ownerInto {
					return false
				}
				_, updated := rec.UpdatedFile(f)
				return slices.Contains(rec.OwnedFiles, f) || updated
			}
			for _, f := range files {
				if v := read(f); v != "absent" && (v == "new" || c.old == "ours") && !recorded(f) {
					t.Errorf("%s, stopped after %d of %d steps: %s is in the folder and no manifest records it", c.name, k, n, f)
				}
				if c.old != "theirs" && c.old != "theirs+dir" {
					continue
				}
				orig := IntoOriginals + "/" + f
				switch {
				case read(f) == "old":
				case read(orig) == "old" && isOriginal(rec, orig) && slices.Contains(rec.OwnedFiles, orig):
				default:
					t.Errorf("%s, stopped after %d of %d steps: the export's own %s is lost (at its place %s, under %s %s)", c.name, k, n, f, read(f), IntoOriginals, read(orig))
				}
			}
			if k == n && (xml != "new" || bin != "new") {
				t.Errorf("%s: after every step the folder holds xml %s, bin %s", c.name, xml, bin)
			}
		}
	}
}
