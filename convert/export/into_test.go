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
// not its own, and never a file of ours that no manifest records.
func TestIntoStepsNeverMix(t *testing.T) {
	files := []string{"m.bin", "m.xml"} // the Intoer's order: data first
	const oursManifest = `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"new"}`
	for _, c := range []struct {
		name     string
		old      string // what the folder holds of files before: "" none, "ours" an earlier --into's
		manifest string // the staged manifest
	}{
		{"fresh", "", oursManifest},
		{"replacing ours", "ours", oursManifest},
	} {
		var ch intoChanges
		ch.files = files
		if c.old == "ours" {
			ch.ours = files
		}
		setup := func() (dir, staging string) {
			dir = t.TempDir()
			staging = filepath.Join(dir, intoStaging)
			os.MkdirAll(filepath.Join(staging, manifests.IntoOriginals), 0o755)
			write := func(d, name, body string) {
				if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(staging, "m.bin", "new")
			write(staging, "m.xml", "new")
			write(staging, manifests.FileName, c.manifest)
			if c.old == "ours" {
				write(dir, manifests.FileName, `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"old"}`)
				write(dir, "m.bin", "old")
				write(dir, "m.xml", "old")
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
			kind, rec := manifests.FolderOwner(dir)
			recorded := func(f string) bool {
				if kind != manifests.OwnerInto {
					return false
				}
				_, updated := rec.UpdatedFile(f)
				return slices.Contains(rec.OwnedFiles, f) || updated
			}
			for _, f := range files {
				if v := read(f); v != "absent" && (v == "new" || c.old == "ours") && !recorded(f) {
					t.Errorf("%s, stopped after %d of %d steps: %s is in the folder and no manifest records it", c.name, k, n, f)
				}
			}
			if k == n && (xml != "new" || bin != "new") {
				t.Errorf("%s: after every step the folder holds xml %s, bin %s", c.name, xml, bin)
			}
		}
	}
}
