package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/target/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

func ggufSource(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36), dir)
	testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), dir)
	return dir
}

// inspect reads GGUF files: our sidecar is an MTP-only file with its head in
// block 4; a trunk without head has none.
func TestInspectGGUF(t *testing.T) {
	src := ggufSource(t)
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--head-precision", "int8", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	side := filepath.Join(out, "mtp-src-Q8_0.gguf")
	code, stdout, stderr := runCLI(t, "inspect", "--json", side)
	if code != 0 {
		t.Fatalf("inspect: %d %s", code, stderr)
	}
	var s gg.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Architecture != "qwen35moe" || s.BlockCount != 5 || s.NextnLayers != 1 || !s.MTPHead || !s.MTPOnly ||
		s.FileType != "Q8_0" || s.TensorTypes["Q8_0"] != 13 || s.TensorTypes["F32"] != 10 || len(s.Problems) != 0 {
		t.Errorf("sidecar summary %+v", s)
	}
	code, text, _ := runCLI(t, "inspect", side)
	if code != 0 || !strings.Contains(text, "MTP-only sidecar (blocks [4]") {
		t.Errorf("inspect text: %d %s", code, text)
	}

	m, err := convert.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	trunk := filepath.Join(t.TempDir(), "trunk.gguf")
	if err := gguf.WriteTrunk(m, trunk); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = runCLI(t, "inspect", "--json", trunk)
	s = gg.Summary{}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.BlockCount != 4 || s.NextnLayers != 0 || s.MTPHead || s.MTPOnly || s.Tensors != 76 {
		t.Errorf("trunk summary %+v", s)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644)
	if code, _, stderr := runCLI(t, "inspect", bad); code != 1 || !strings.Contains(stderr, "bad.gguf") {
		t.Errorf("truncated GGUF: exit %d, %s", code, stderr)
	}
}
