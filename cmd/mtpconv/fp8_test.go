package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// An FP8 release converts on every target, and where the paths are the same
// (bf16 outputs and MLX quantization, which both start from the bf16 cast)
// the files equal those made from the same weights dequantized and stored
// as bf16-rounded float32. OpenVINO starts from an f16 cast, where the exact
// dequantized value and its bf16 rounding may differ; those exports must
// verify against their own source. verify --src recomputes through the scales.
func TestFP8SourceExports(t *testing.T) {
	t.Parallel()
	fp8 := fixtures.Ensure(t, fixtures.Qwen36FP8)
	deq := fixtures.Ensure(t, fixtures.Qwen36FP8Dequant)
	cases := []struct {
		args   []string
		differ string // the one model file expected to differ
	}{
		{[]string{"--target", "mlx"}, ""},
		{[]string{"--target", "mlx", "--head-precision", "int4"}, ""},
		{[]string{"--target", "mlx", "--head-precision", "int8", "--mlx-rounding", "cpu"}, ""},
		{[]string{"--target", "combined", "--trunk-precision", "int4"}, ""},
		{[]string{"--target", "openvino", "--head-precision", "f16"}, "openvino_mtp_model.bin"}, // the lm_head stays bf16 in the release
		{[]string{"--target", "openvino", "--head-precision", "int4"}, "openvino_mtp_model.bin"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
			for _, run := range [][2]string{{fp8, a}, {deq, b}} {
				if code, _, stderr := runCLI(t, append([]string{"export", "--src", run[0], "--out", run[1], "--quiet"}, c.args...)...); code != 0 {
					t.Fatalf("%s: exit %d: %s", run[0], code, stderr)
				}
			}
			if code, out, stderr := runCLI(t, "verify", a, "--src", fp8); code != 0 {
				t.Errorf("verify --src of the FP8 export: %s %s", out, stderr)
			}
			fa, fb := readDir(t, a), readDir(t, b)
			for name, data := range fa {
				if !modelFile(name) || strings.HasSuffix(name, ".xml") { // an IR names its source
					continue
				}
				if equal := string(data) == string(fb[name]); equal != (name != c.differ) {
					t.Errorf("%s: equal to the dequantized export: %v, want %v", name, equal, name != c.differ)
				}
			}
			var man struct {
				Tensors []struct {
					Name       string   `json:"name"`
					Sources    []string `json:"sources"`
					Transforms []struct {
						Name string `json:"name"`
					} `json:"transforms"`
				} `json:"tensors"`
			}
			raw, _ := os.ReadFile(filepath.Join(a, "mtpconv-manifest.json"))
			if err := json.Unmarshal(raw, &man); err != nil {
				t.Fatal(err)
			}
			dequantized := 0
			for _, tn := range man.Tensors {
				if len(tn.Transforms) > 0 && tn.Transforms[0].Name == "dequantize_fp8" {
					dequantized++
					if !strings.HasSuffix(tn.Sources[len(tn.Sources)-1], ".weight_scale_inv") {
						t.Errorf("%s: dequantized from %v, no scale among its sources", tn.Name, tn.Sources)
					}
				}
			}
			if dequantized == 0 {
				t.Error("the manifest records no dequantize_fp8 transform")
			}
		})
	}
}

// A broken FP8 release is refused naming the tensor: a weight without its
// scale, a scale of the wrong shape, a block size other than the config's.
func TestFP8SourceRefusals(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36FP8)
	const w = "mtp.layers.0.self_attn.q_proj.weight"
	cases := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		want   string
	}{
		{"block size", func(t *testing.T, dir string) {
			editConfig(t, src, dir, func(c map[string]any) {
				c["quantization_config"].(map[string]any)["weight_block_size"] = []int{64, 64}
			})
		}, "in blocks of [64 64] it must be"},
		{"absurd block size", func(t *testing.T, dir string) {
			editConfig(t, src, dir, func(c map[string]any) {
				c["quantization_config"].(map[string]any)["weight_block_size"] = []int64{math.MaxInt64, math.MaxInt64}
			})
		}, "weight_block_size is [9223372036854775807 9223372036854775807]; it must be two sizes from 1 to 1048576"},
		{"no quantization_config", func(t *testing.T, dir string) {
			editConfig(t, src, dir, func(c map[string]any) { delete(c, "quantization_config") })
		}, "declares no fp8 quantization_config"},
		{"scale missing", func(t *testing.T, dir string) {
			// The scale renamed (same length) in its shard's header and the index.
			idxName := "model.safetensors.index.json"
			raw, _ := os.ReadFile(filepath.Join(src, idxName))
			var idx map[string]any
			json.Unmarshal(raw, &idx)
			shard := idx["weight_map"].(map[string]any)[w+"_scale_inv"].(string)
			testfs.LinkDir(t, src, dir, idxName, shard)
			os.WriteFile(filepath.Join(dir, idxName), []byte(strings.Replace(string(raw), w+"_scale_inv", w+"_scale_inX", 1)), 0o644)
			b, _ := os.ReadFile(filepath.Join(src, shard))
			os.WriteFile(filepath.Join(dir, shard), []byte(strings.Replace(string(b), w+"_scale_inv", w+"_scale_inX", 1)), 0o644)
		}, "its block scale " + w + "_scale_inv is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.mutate(t, dir)
			code, _, stderr := runCLI(t, "export", "--src", dir, "--target", "mlx", "--out", filepath.Join(t.TempDir(), "o"))
			if code != exitFailure || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want %q", code, stderr, c.want)
			}
		})
	}
}

// editConfig links src into dir with config.json rewritten by edit.
func editConfig(t *testing.T, src, dir string, edit func(map[string]any)) {
	t.Helper()
	testfs.LinkDir(t, src, dir, "config.json")
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	edit(c)
	b, _ := json.Marshal(c)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An FP8 release through the GGUF target: the bf16 and Q8_0 sidecars equal
// those made from its dequantized twin (both folders named alike, since the
// sidecar records the source's name), and verify --src recomputes them.
func TestFP8SourceToGGUF(t *testing.T) {
	t.Parallel()
	tok := filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny")
	for _, args := range [][]string{{"--head-precision", "bf16"}, {"--head-precision", "int8"}} {
		files := map[string]map[string][]byte{}
		for _, fx := range []string{fixtures.Qwen36FP8, fixtures.Qwen36FP8Dequant} {
			src := filepath.Join(t.TempDir(), "qwen")
			os.Mkdir(src, 0o755)
			testfs.LinkDir(t, fixtures.Ensure(t, fx), src)
			testfs.LinkDir(t, tok, src)
			out := filepath.Join(t.TempDir(), "o")
			if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "gguf", "--out", out, "--quiet"}, args...)...); code != 0 {
				t.Fatalf("%s %v: %s", fx, args, stderr)
			}
			if code, o, stderr := runCLI(t, "verify", out, "--src", src); code != 0 {
				t.Errorf("%s %v: verify: %s %s", fx, args, o, stderr)
			}
			files[fx] = readDir(t, out)
		}
		for name, b := range files[fixtures.Qwen36FP8] {
			if strings.HasSuffix(name, ".gguf") && string(b) != string(files[fixtures.Qwen36FP8Dequant][name]) {
				t.Errorf("%v: %s differs from the dequantized twin's", args, name)
			}
		}
	}
}

// Negative FP8 block scales are counted per tensor, recorded in the
// manifest, noted by export and warned on the card, as non-finite values are.
func TestFP8NegativeScalesReported(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36FP8)
	const w = "mtp.layers.0.self_attn.q_proj.weight"
	dir := t.TempDir()
	idxName := "model.safetensors.index.json"
	raw, _ := os.ReadFile(filepath.Join(src, idxName))
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	json.Unmarshal(raw, &idx)
	shard := idx.WeightMap[w+"_scale_inv"]
	testfs.LinkDir(t, src, dir, shard)
	b, err := os.ReadFile(filepath.Join(src, shard))
	if err != nil {
		t.Fatal(err)
	}
	// Flip the sign of the scale's first two values in a copy of its shard.
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var info struct {
		DType   string   `json:"dtype"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	json.Unmarshal(header[w+"_scale_inv"], &info)
	size := map[string]int64{"F32": 4, "BF16": 2}[info.DType]
	for i := range int64(2) {
		b[8+int64(n)+info.Offsets[0]+i*size+size-1] ^= 0x80
	}
	os.WriteFile(filepath.Join(dir, shard), b, 0o644)

	out := filepath.Join(t.TempDir(), "o")
	code, _, stderr := runCLI(t, "export", "--src", dir, "--target", "mlx", "--out", out)
	if code != 0 || !strings.Contains(stderr, "layers.0.self_attn.q_proj.weight: 2 of its FP8 block scales (weight_scale_inv) are negative") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m, err := manifests.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range m.Tensors {
		want := int64(0)
		if strings.HasSuffix(tn.Name, "layers.0.self_attn.q_proj.weight") {
			want = 2
		}
		if tn.NegativeScales != want {
			t.Errorf("%s: negative_scales %d, want %d", tn.Name, tn.NegativeScales, want)
		}
	}
	card, _ := os.ReadFile(filepath.Join(out, "README.md"))
	if !strings.Contains(string(card), "2 of its FP8 block scales") {
		t.Error("the card does not warn of the negative scales")
	}
}
