//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// TestInspectGGUFFIFO: inspect of a FIFO named .gguf is refused at once (it
// blocked forever).
func TestInspectGGUFFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.gguf")
	testfs.Mkfifo(t, fifo)
	code, _, stderr := runWithin(t, 5*time.Second, "inspect", fifo)
	if code != exitFailure || !strings.Contains(stderr, "pipe.gguf is not a regular file: it is a named pipe (FIFO)") {
		t.Errorf("FIFO: exit %d, stderr %q", code, stderr)
	}
}

// TestInspectGGUFInterrupted: an interrupted inspect of a GGUF exits 130
// (the header parse ignored the signal).
func TestInspectGGUFInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hdr, err := gg.EncodeHeader([]gg.KV{gg.Pair("general.architecture", gg.Str("qwen35moe"))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.gguf")
	os.WriteFile(file, hdr, 0o644)
	if code, _, stderr := runCLI(t, "inspect", file); code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e strings.Builder
	if code := run(ctx, []string{"mtpconv", "inspect", file}, &o, &e); code != exitInterrupted || !strings.Contains(e.String(), "interrupted") {
		t.Errorf("interrupted inspect: exit %d, stderr %q", code, e.String())
	}
}

// TestSmallFilesOfUserFoldersAreBounded: the config.json of an --into
// folder and the manifest of an --out folder are read only if they are
// regular files under their size limit (a FIFO config.json hung the export,
// a 1 GiB one was read whole).
func TestSmallFilesOfUserFoldersAreBounded(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.Qwen36)
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	into := func(t *testing.T, dir string) (int, string) {
		code, _, stderr := runWithin(t, 10*time.Second, "export", "--src", src, "--target", "openvino", "--into", dir, "--quiet")
		return code, stderr
	}
	t.Run("FIFO config.json in --into", func(t *testing.T) {
		dir := fakeOptimumExport(t, cfg)
		os.Remove(filepath.Join(dir, "config.json"))
		testfs.Mkfifo(t, filepath.Join(dir, "config.json"))
		if code, stderr := into(t, dir); code != exitFailure || !strings.Contains(stderr, "config.json is not a regular file: it is a named pipe (FIFO)") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
	t.Run("config.json over 16 MiB in --into", func(t *testing.T) {
		// Valid JSON, padded with spaces past the limit sources have.
		big := append(append([]byte{}, cfg...), []byte(strings.Repeat(" ", 16<<20))...)
		dir := fakeOptimumExport(t, big)
		snap := tree(t, dir)
		if code, stderr := into(t, dir); code != exitFailure || !strings.Contains(stderr, "over the 16777216-byte limit") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if d := diffTrees(snap, tree(t, dir)); d != "" {
			t.Errorf("refused --into changed %s", d)
		}
	})
	t.Run("FIFO manifest in --out --force", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		os.Mkdir(out, 0o755)
		testfs.Mkfifo(t, filepath.Join(out, manifests.FileName))
		code, _, stderr := runWithin(t, 10*time.Second, "export", "--src", src, "--target", "mlx", "--out", out, "--force", "--quiet")
		if code == exitOK {
			t.Fatalf("exit 0: %s", stderr)
		}
		if fi, err := os.Lstat(filepath.Join(out, manifests.FileName)); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO is gone: %v", err)
		}
	})
	t.Run("manifest over 64 MiB", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		os.Mkdir(out, 0o755)
		m := filepath.Join(out, manifests.FileName)
		os.WriteFile(m, []byte(`{"tool":{"name":"mtpconv"}}`), 0o644)
		os.Truncate(m, manifests.MaxFileSize+1) // sparse
		for _, args := range [][]string{{"inspect", out}, {"verify", out}, {"card", out}} {
			code, _, stderr := runWithin(t, 10*time.Second, args...)
			if code != exitFailure || !strings.Contains(stderr, "over the 67108864-byte limit") {
				t.Errorf("%s: exit %d: %s", args[0], code, stderr)
			}
		}
	})
}
