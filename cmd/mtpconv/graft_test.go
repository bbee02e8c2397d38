package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/manifests"
)

// ggufTensors reads a GGUF file's header and each tensor's bytes.
func ggufTensors(t *testing.T, path string) (*gg.File, map[string][]byte) {
	t.Helper()
	f, _, err := gg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, ti := range f.Tensors {
		n, _ := ti.Bytes()
		out[ti.Name] = raw[f.DataOffset+ti.Offset : f.DataOffset+ti.Offset+n]
	}
	return f, out
}

// writeGGUF writes a GGUF file of kvs and tensors (offsets placed here).
func writeGGUF(t *testing.T, path string, kvs []gg.KV, infos []gg.TensorInfo, data map[string][]byte) {
	t.Helper()
	sizes := make([]int64, len(infos))
	for i, ti := range infos {
		sizes[i] = int64(len(data[ti.Name]))
	}
	offs, total := gg.Place(sizes, gg.DefaultAlignment)
	for i := range infos {
		infos[i].Offset = offs[i]
	}
	hdr, err := gg.EncodeHeader(kvs, infos)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, int64(len(hdr))+total)
	copy(buf, hdr)
	for i, ti := range infos {
		copy(buf[int64(len(hdr))+offs[i]:], data[ti.Name])
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A bundled GGUF as the source: the sidecar split from it is the same file
// without the trunk's blocks, byte for byte what the sidecar export writes
// when the bundled file is that sidecar plus trunk blocks; the source is
// untouched; what does not apply is refused.
func TestGGUFSplitBundled(t *testing.T) {
	src := ggufSource(t)
	out := filepath.Join(t.TempDir(), "side")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--head-precision", "int8", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	side := filepath.Join(out, "mtp-src-Q8_0.gguf")
	f, data := ggufTensors(t, side)
	// Trunk blocks 0..3 around the head: one tensor each, between and before the sidecar's.
	infos := []gg.TensorInfo{}
	for i, ti := range f.Tensors {
		if i%4 == 0 {
			name := "blk." + string(rune('0'+i/4%4)) + ".attn_norm.weight"
			if _, dup := data[name]; !dup {
				data[name] = bytes.Repeat([]byte{byte(i + 1)}, 4*128)
				infos = append(infos, gg.TensorInfo{Name: name, Dims: []int64{128}, Type: gg.F32})
			}
		}
		infos = append(infos, gg.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type})
	}
	bundled := filepath.Join(t.TempDir(), "Qwen-Tiny-Q8_0.gguf")
	writeGGUF(t, bundled, f.KV, infos, data)
	before, _ := os.ReadFile(bundled)

	split := filepath.Join(t.TempDir(), "split")
	code, stdout, stderr := runCLI(t, "export", "--src", bundled, "--target", "gguf", "--out", split)
	if code != 0 {
		t.Fatalf("split: %d %s", code, stderr)
	}
	if !strings.Contains(stdout, "exported") {
		t.Errorf("split summary: %s", stdout)
	}
	got, err := os.ReadFile(filepath.Join(split, "mtp-Qwen-Tiny-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(side)
	if !bytes.Equal(got, want) {
		t.Errorf("split sidecar (%d bytes) differs from the sidecar (%d bytes)", len(got), len(want))
	}
	if after, _ := os.ReadFile(bundled); !bytes.Equal(before, after) {
		t.Error("the source GGUF changed")
	}
	if code, stdout, _ := runCLI(t, "verify", split); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify: %d %s", code, stdout)
	}
	m, err := manifests.Load(split)
	if err != nil || m.Options["split_from"] != "Qwen-Tiny-Q8_0.gguf" || len(m.Files) != 1 {
		t.Errorf("manifest %+v, %v", m, err)
	}

	// Refusals: nothing written.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--src", side, "--target", "gguf"}, 1, "already an MTP-only sidecar"},
		{[]string{"--src", bundled, "--target", "mlx"}, 2, "only --target gguf"},
		{[]string{"--src", bundled, "--target", "gguf", "--head-precision", "int4"}, 2, "--head-precision does not apply to a GGUF source"},
	} {
		o := filepath.Join(t.TempDir(), "o")
		code, _, stderr := runCLI(t, append(append([]string{"export"}, c.args...), "--out", o)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
		if _, err := os.Stat(o); err == nil {
			t.Errorf("%v: %s written", c.args, o)
		}
	}
	// A trunk without a head has no sidecar to give.
	trunk := filepath.Join(t.TempDir(), "trunk.gguf")
	var trunkInfos []gg.TensorInfo
	for _, ti := range infos {
		if strings.HasPrefix(ti.Name, "blk.4.") {
			continue
		}
		trunkInfos = append(trunkInfos, ti)
	}
	var trunkKV []gg.KV
	for _, kv := range f.KV {
		switch kv.Key {
		case "qwen35moe.nextn_predict_layers":
			continue
		case "qwen35moe.block_count":
			kv.Value = gg.U32(4)
		}
		trunkKV = append(trunkKV, kv)
	}
	writeGGUF(t, trunk, trunkKV, trunkInfos, data)
	if code, _, stderr := runCLI(t, "export", "--src", trunk, "--target", "gguf", "--out", filepath.Join(t.TempDir(), "o")); code != 1 || !strings.Contains(stderr, "holds no MTP head") {
		t.Errorf("trunk without head: exit %d: %s", code, stderr)
	}
	// An output folder holding the source is refused, the source kept.
	dir := filepath.Join(t.TempDir(), "out")
	fakeOutput(t, dir)
	inside := filepath.Join(dir, "b.gguf")
	os.WriteFile(inside, before, 0o644)
	if code, _, stderr := runCLI(t, "export", "--src", inside, "--target", "gguf", "--out", dir, "--force"); code == 0 || !strings.Contains(stderr, "holds") {
		t.Errorf("--out holding the source: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(inside); !bytes.Equal(b, before) {
		t.Error("the source inside --out was lost")
	}
}
