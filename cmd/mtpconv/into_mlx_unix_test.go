//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// A FIFO in place of config.json or the index is refused at once, not read
// (a read would block forever), and nothing changes.
func TestIntoMLXRefusesFIFOs(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	for _, name := range []string{"config.json", st.IndexFile} {
		dir := headlessMLXFolder(t, "--trunk-precision", "int4")
		os.Remove(filepath.Join(dir, name))
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		snap := names(t, dir)
		code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir, "--quiet")
		if code != 1 || !strings.Contains(stderr, name) || !strings.Contains(stderr, "FIFO") {
			t.Errorf("%s a FIFO: exit %d: %s", name, code, stderr)
		}
		if now := names(t, dir); now != snap {
			t.Errorf("refused --into changed the folder: %s, was %s", now, snap)
		}
	}
}

// names lists a folder's entries with their sizes (tree would read the FIFO).
func names(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		fi, _ := e.Info()
		out = append(out, e.Name()+":"+strconv.FormatInt(fi.Size(), 10))
	}
	return strings.Join(out, ",")
}

// A FIFO in place of the MTP IR of an optimum-intel export is a file mtpconv
// did not write: --into --force refuses it before any work, naming it (and
// never opens it), and nothing changes.
func TestIntoForceRefusesAFIFOIR(t *testing.T) {
	t.Parallel()
	src, dir := optimumExportOfFixture(t)
	os.WriteFile(filepath.Join(dir, "openvino_mtp_model.bin"), []byte("optimum's"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "openvino_mtp_model.xml"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	snap := names(t, dir)
	code, _, stderr := runCLI(t, "export", "--src", src, "--target", "openvino", "--into", dir, "--force", "--quiet")
	if code != exitFailure || !strings.Contains(stderr, "already has openvino_mtp_model.bin and openvino_mtp_model.xml, which mtpconv did not write") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if now := names(t, dir); now != snap {
		t.Errorf("refused --into changed the folder: %s, was %s", now, snap)
	}
}
