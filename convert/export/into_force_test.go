package export_test

import (
	"bytes"
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// optimumWithMTP lays out what --into checks of an optimum-intel export of
// the fixture, with an MTP IR of its own (optimum-intel 2.2 writes one).
func optimumWithMTP(t *testing.T) (dir string, own map[string][]byte) {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(fixtures.Ensure(t, fixtures.Qwen36), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "optimum")
	own = map[string][]byte{"openvino_mtp_model.xml": []byte("<net name=\"optimum's MTP\"/>"), "openvino_mtp_model.bin": bytes.Repeat([]byte{7, 1}, 999)}
	files := map[string][]byte{"config.json": cfg, "openvino_language_model.xml": []byte("<net/>"), "openvino_language_model.bin": []byte("trunk"),
		"openvino_text_embeddings_model.xml": []byte("<net/>"), "README.md": []byte("the export's own card\n")}
	for name, b := range own {
		files[name] = b
	}
	os.MkdirAll(dir, 0o755)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, own
}

// readTree maps every file under dir (by slash path) to its bytes.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// An export that carries its own MTP IR (optimum-intel 2.2 writes one) is
// never changed by --into, --force or not, dry run or not: mtpconv does not
// replace, move or delete a file it did not write, and says how to go on.
// Once the user has moved that IR away, --into adds mtpconv's; a stop at any
// step of the final phase leaves no pair mixed and running again with
// --force completes it; a later --force replaces only mtpconv's files.
func TestIntoNeverTouchesTheExportsOwnIR(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	req := func(dir, precision string, force bool) export.Request {
		o := targets.Options{GroupSize: 64, RouterBits: 8, Set: map[string]bool{}}
		if precision != "" {
			o.HeadPrecision, o.Set[targets.OptHeadPrecision] = precision, true
		}
		return export.Request{Model: m, Target: "openvino", Dest: export.Into(dir), Force: force, NoCard: true, Version: "test", Options: o}
	}
	const xml, bin = "openvino_mtp_model.xml", "openvino_mtp_model.bin"
	dir, _ := optimumWithMTP(t)
	before := readTree(t, dir)
	for _, c := range []struct {
		force, dry bool
	}{{false, false}, {true, false}, {true, true}} {
		r := req(dir, "", c.force)
		r.DryRun = c.dry
		_, err := export.Export(context.Background(), r)
		if err == nil || !strings.Contains(err.Error(), "already has "+bin+" and "+xml+", which mtpconv did not write") ||
			!strings.Contains(err.Error(), "mtpconv never replaces, moves or deletes a file it did not write, --force or not: move them out of the folder yourself") {
			t.Errorf("--force %v, dry run %v: %v", c.force, c.dry, err)
		}
		if now := readTree(t, dir); !maps.Equal(now, before) {
			t.Errorf("--force %v, dry run %v: the folder changed", c.force, c.dry)
		}
	}

	ref := filepath.Join(t.TempDir(), "ref")
	r := req("", "", false)
	r.Dest = export.Out(ref)
	if _, err := export.Export(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	ours := readTree(t, ref)
	stops := 0
	for k := 0; ; k++ {
		dir, own := optimumWithMTP(t)
		moved := t.TempDir() // where the user put optimum's IR
		for f := range own {
			if err := os.Rename(filepath.Join(dir, f), filepath.Join(moved, f)); err != nil {
				t.Fatal(err)
			}
		}
		before := readTree(t, dir)
		export.FailIntoStep(t, k)
		_, err := export.Export(context.Background(), req(dir, "", false))
		if err == nil {
			checkAdded(t, dir, before, ours)
			break
		}
		stops++
		if !strings.Contains(err.Error(), "run it again with --force") {
			t.Fatalf("stopped before step %d: %v", k, err)
		}
		now := readTree(t, dir)
		if x, b := now[xml], now[bin]; x != "" && (x != ours[xml] || b != ours[bin]) {
			t.Errorf("stopped before step %d: %s is beside a %s that is not its own", k, xml, bin)
		}
		export.FailIntoStep(t, -1)
		if _, err := export.Export(context.Background(), req(dir, "", true)); err != nil {
			t.Fatalf("stopped before step %d, then again: %v", k, err)
		}
		checkAdded(t, dir, before, ours)
	}
	if stops != 3 {
		t.Fatalf("the final phase has %d steps; it moves a manifest and two files", stops)
	}

	// A second --force, at int4, replaces only mtpconv's own files.
	export.FailIntoStep(t, -1)
	dir, own := optimumWithMTP(t)
	for f := range own {
		os.Remove(filepath.Join(dir, f))
	}
	before = readTree(t, dir)
	for _, p := range []string{"", "int4"} {
		if _, err := export.Export(context.Background(), req(dir, p, true)); err != nil {
			t.Fatalf("%q: %v", p, err)
		}
	}
	now := readTree(t, dir)
	for name, b := range before {
		if now[name] != b {
			t.Errorf("a second --force changed the export's %s", name)
		}
	}
	if now[bin] == ours[bin] {
		t.Errorf("the int4 run did not replace mtpconv's %s", bin)
	}
	man, err := manifests.Load(dir)
	if err != nil || strings.Join(man.Into.OwnedFiles, ",") != bin+","+xml+","+manifests.FileName || len(man.Into.Updated) != 0 {
		t.Errorf("manifest %+v (%v)", man.Into, err)
	}
}

// checkAdded: the folder is what it was plus mtpconv's IR and manifest, and
// the IR is the one --out writes.
func checkAdded(t *testing.T, dir string, before, ours map[string]string) {
	t.Helper()
	now := readTree(t, dir)
	for name, b := range before {
		if now[name] != b {
			t.Errorf("the export's %s changed", name)
		}
	}
	for _, f := range []string{"openvino_mtp_model.xml", "openvino_mtp_model.bin"} {
		if now[f] != ours[f] {
			t.Errorf("%s is not the IR --out writes", f)
		}
	}
	for name := range now {
		if _, ok := before[name]; !ok && name != "openvino_mtp_model.xml" && name != "openvino_mtp_model.bin" && name != manifests.FileName {
			t.Errorf("--into added %s", name)
		}
	}
}
