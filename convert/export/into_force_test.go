package export_test

import (
	"bytes"
	"context"
	"io/fs"
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

// --into --force on an export that carries its own MTP IR moves that IR,
// byte for byte, into mtpconv-original/ and records it; a stop at any step
// of the final phase leaves the old pair or the new one (never a mix) and
// loses nothing of the export's, and running again completes it. A later
// --force replaces only mtpconv's own files, and the documented undo gives
// back the folder exactly as it was.
func TestIntoForceKeepsTheExportsOwnIR(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	req := func(dir, precision string) export.Request {
		o := targets.Options{GroupSize: 64, RouterBits: 8, Set: map[string]bool{}}
		if precision != "" {
			o.HeadPrecision, o.Set[targets.OptHeadPrecision] = precision, true
		}
		return export.Request{Model: m, Target: "openvino", Into: dir, Force: true, NoCard: true, Version: "test", Options: o}
	}
	ref := filepath.Join(t.TempDir(), "ref")
	r := req("", "")
	r.Into, r.Out, r.Force = "", ref, false
	if _, err := export.Export(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	ours := readTree(t, ref)
	const xml, bin = "openvino_mtp_model.xml", "openvino_mtp_model.bin"
	stops := 0
	for k := 0; ; k++ {
		dir, own := optimumWithMTP(t)
		before := readTree(t, dir)
		export.FailIntoStep(t, k)
		_, err := export.Export(context.Background(), req(dir, ""))
		if err == nil {
			break
		}
		stops++
		if !strings.Contains(err.Error(), "run it again with --force") {
			t.Fatalf("stopped before step %d: %v", k, err)
		}
		now := readTree(t, dir)
		switch x, b := now[xml], now[bin]; {
		case x == "" && b == "", x == "" && b == string(own[bin]), x == "" && b == ours[bin]:
		case x == string(own[xml]) && b == string(own[bin]), x == ours[xml] && b == ours[bin]:
		default:
			t.Errorf("stopped before step %d: %s and %s are not one pair", k, xml, bin)
		}
		man, merr := manifests.Load(dir)
		for _, f := range []string{xml, bin} {
			if now[f] == string(own[f]) {
				continue
			}
			u, ok := man.Into.UpdatedFile(f)
			if merr != nil || !ok || now[u.Original.Name] != string(own[f]) || u.Original.SHA256 != manifests.SHA256(own[f]) {
				t.Errorf("stopped before step %d: the export's own %s is lost (manifest %v)", k, f, merr)
			}
		}
		// Running again completes it.
		export.FailIntoStep(t, -1)
		if _, err := export.Export(context.Background(), req(dir, "")); err != nil {
			t.Fatalf("stopped before step %d, then again: %v", k, err)
		}
		checkKept(t, dir, before, own, ours)
	}
	if stops != 6 {
		t.Fatalf("the final phase has %d steps; it moves a manifest, the originals' folder, two originals and two files", stops)
	}

	// A second --force replaces mtpconv's files only; the originals stay.
	dir, own := optimumWithMTP(t)
	before := readTree(t, dir)
	if _, err := export.Export(context.Background(), req(dir, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := export.Export(context.Background(), req(dir, "int4")); err != nil {
		t.Fatal(err)
	}
	now := readTree(t, dir)
	if now[xml] == ours[xml] || now[bin] == ours[bin] {
		t.Errorf("the int4 head did not replace the f16 one")
	}
	checkKept(t, dir, before, own, map[string]string{xml: now[xml], bin: now[bin]})

	// The originals copied back (the manifest left): the next --force finds
	// the export's own IR again and keeps it again, the same record.
	for f, b := range own {
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	if _, err := export.Export(context.Background(), req(dir, "int4")); err != nil {
		t.Fatal(err)
	}
	checkKept(t, dir, before, own, map[string]string{xml: now[xml], bin: now[bin]})

	// The undo the docs give: each recorded original moved back over its
	// file, then every file mtpconv owns removed (and mtpconv-original/).
	man, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range man.Into.Updated {
		if err := os.Rename(filepath.Join(dir, u.Original.Name), filepath.Join(dir, u.Name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range man.Into.OwnedFiles {
		os.Remove(filepath.Join(dir, f))
	}
	if err := os.Remove(filepath.Join(dir, export.IntoOriginals)); err != nil {
		t.Fatal(err)
	}
	if d := treeDiff(before, readTree(t, dir)); d != "" {
		t.Errorf("after the undo the folder differs from the export in %s", d)
	}
}

// checkKept checks a completed --into --force on an optimumWithMTP folder:
// the new pair in place, the export's own byte for byte in
// mtpconv-original/, recorded (verify passes), every other file as before.
func checkKept(t *testing.T, dir string, before map[string]string, own map[string][]byte, ours map[string]string) {
	t.Helper()
	now := readTree(t, dir)
	man, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, b := range before {
		want[name] = b
	}
	for f, b := range own {
		want[f] = ours[f]
		want[export.IntoOriginals+"/"+f] = string(b)
		u, ok := man.Into.UpdatedFile(f)
		if !ok || u.Original.Name != export.IntoOriginals+"/"+f || u.Original.SHA256 != manifests.SHA256(b) || u.Original.Size != int64(len(b)) {
			t.Errorf("%s's original is recorded as %+v", f, u)
		}
	}
	delete(now, manifests.FileName)
	if d := treeDiff(want, now); d != "" {
		t.Errorf("the folder differs in %s", d)
	}
	if got := strings.Join(man.Into.OwnedFiles, ","); got != "mtpconv-original/openvino_mtp_model.bin,mtpconv-original/openvino_mtp_model.xml,"+manifests.FileName {
		t.Errorf("owned files %s", got)
	}
	rep, err := manifests.Verify(context.Background(), dir, nil)
	if err != nil || !rep.OK {
		t.Errorf("verify: %v %+v", err, rep)
	}
}

func treeDiff(a, b map[string]string) string {
	var d []string
	for p, v := range a {
		if w, ok := b[p]; !ok || w != v {
			d = append(d, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p)
		}
	}
	return strings.Join(d, ", ")
}
