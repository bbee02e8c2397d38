package ggufsplit_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	_ "github.com/mtpconv/mtpconv/convert/families" // the fixtures' families
	"github.com/mtpconv/mtpconv/convert/ggufsplit"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// trunk copies GLM-5.2's committed --no-mtp reference trunk into a folder of
// its own and returns its path.
func trunk(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixtures.GLM52+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "GLM-Tiny-BF16.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// bundled grafts GLM-5.2's head onto its reference trunk: a bundled file.
func bundled(t *testing.T) string {
	t.Helper()
	tr := trunk(t)
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.GLM52)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "bundled")
	o := targets.Options{Graft: tr, Set: map[string]bool{targets.OptGraft: true}}
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Dest: export.Out(out), NoCard: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(out, filepath.Base(tr))
}

// The split writes one folder: the sidecar and a manifest verify accepts,
// the outcome counting what it wrote and read; the source is untouched, and
// a second split into the same folder needs --force.
func TestSplitWritesAFolder(t *testing.T) {
	t.Parallel()
	src := bundled(t)
	before, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "side")
	oc, err := ggufsplit.Split(context.Background(), src, out, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(oc.Files) != 1 || oc.Tensors == 0 || oc.BytesOut != oc.Files[0].Size || oc.BytesRead == 0 || len(oc.Notes) != 1 {
		t.Errorf("outcome %+v", oc)
	}
	side := filepath.Join(out, oc.Files[0].Name)
	f, _, err := gg.Open(side)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != oc.Tensors {
		t.Errorf("the sidecar holds %d tensors, the outcome says %d", len(f.Tensors), oc.Tensors)
	}
	rep, err := manifests.Verify(context.Background(), out, nil)
	if err != nil || !rep.OK || rep.Files != 1 {
		t.Errorf("verify: %+v %v", rep, err)
	}
	if after, _ := os.ReadFile(src); !bytes.Equal(before, after) {
		t.Error("the source changed")
	}
	if _, err := ggufsplit.Split(context.Background(), src, out, false, "test"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("a second split without --force: %v", err)
	}
	if _, err := ggufsplit.Split(context.Background(), src, out, true, "test"); err != nil {
		t.Errorf("a second split with --force: %v", err)
	}
}

// What cannot be split is refused before anything is written: a file with
// no MTP head, and an output folder holding the source.
func TestSplitRefuses(t *testing.T) {
	t.Parallel()
	tr, bu := trunk(t), bundled(t)
	for _, c := range []struct {
		name, src, out, want string
	}{
		{"no head", tr, filepath.Join(t.TempDir(), "side"), "holds no MTP head"},
		{"out holds the source", bu, filepath.Dir(bu), "which the export reads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := os.ReadFile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			listed := list(t, filepath.Dir(c.out))
			_, err = ggufsplit.Split(context.Background(), c.src, c.out, true, "test")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if after, _ := os.ReadFile(c.src); !bytes.Equal(before, after) {
				t.Error("the source changed")
			}
			if now := list(t, filepath.Dir(c.out)); !slices.Equal(now, listed) {
				t.Errorf("the split changed %s: %v, was %v", filepath.Dir(c.out), now, listed)
			}
		})
	}
}

// list names every file and folder under dir.
func list(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		names = append(names, path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
