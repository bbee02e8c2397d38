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
	for _, replacing := range []bool{false, true} {
		probe := t.TempDir()
		n := len(intoSteps(probe, filepath.Join(probe, intoStaging), files, pick(replacing, files)))
		for k := 0; k <= n; k++ {
			dir := t.TempDir()
			staging := filepath.Join(dir, intoStaging)
			os.MkdirAll(staging, 0o755)
			write := func(d, name, body string) {
				if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(staging, "m.bin", "new")
			write(staging, "m.xml", "new")
			write(staging, manifests.FileName, `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"new"}`)
			if replacing {
				write(dir, "m.bin", "old")
				write(dir, "m.xml", "old")
				write(dir, manifests.FileName, `{"tool":{"name":"mtpconv"},"into":{"owned_files":["m.bin","m.xml","mtpconv-manifest.json"]},"v":"old"}`)
			}
			steps := intoSteps(dir, staging, files, pick(replacing, files))
			for _, s := range steps[:k] {
				if err := s.apply(); err != nil {
					t.Fatal(err)
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
				t.Errorf("replacing %v, stopped after %d of %d steps: the %s .xml is beside the %s .bin", replacing, k, n, xml, bin)
			}
			kind, rec := folderOwner(dir)
			for _, f := range files {
				if read(f) != "absent" && (kind != ownerInto || !slices.Contains(rec.OwnedFiles, f)) {
					t.Errorf("replacing %v, stopped after %d of %d steps: %s is in the folder and no manifest records it", replacing, k, n, f)
				}
			}
			if k == n && (xml != "new" || bin != "new") {
				t.Errorf("replacing %v: after every step the folder holds xml %s, bin %s", replacing, xml, bin)
			}
		}
	}
}

func pick(ok bool, files []string) []string {
	if ok {
		return files
	}
	return nil
}
