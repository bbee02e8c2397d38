package gguf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/gguf"
	"github.com/mtpconv/mtpconv/convert/targets/hf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
)

// MiMo-V2.5's sidecar (its 3 chained heads as blocks 2, 3, 4) is the
// reference converter's --mtp file tensor for tensor and key for key, in
// its key order (testdata/gguf_reference, recorded by
// interop/reference_gguf.py), at bf16 and f16; so is the FP8 release's,
// whose qkv_proj the reference dequantizes as 4 tensor-parallel shards
// with per-shard scales (_tp_aware_qkv_dequant): the same bytes.
func TestMiMoV2SidecarEqualsReference(t *testing.T) {
	for _, fx := range []string{fixtures.MiMoV25, fixtures.MiMoV25FP8} {
		for _, prec := range []string{"bf16", "f16"} {
			t.Run(fx+"/"+prec, func(t *testing.T) {
				raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-"+prec+".json"))
				if err != nil {
					t.Fatal(err)
				}
				path := exportTo(t, fixtures.Ensure(t, fx), prec)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				equalsReference(t, data, f, raw)
				if got, want := fileKeys(f), refKeys(t, raw); !slices.Equal(got, want) {
					t.Errorf("key order\n got %v\nwant %v", got, want)
				}
				if n, ok := f.Uint("mimo2.nextn_predict_layers"); !ok || n != 3 {
					t.Errorf("nextn_predict_layers %d", n)
				}
			})
		}
	}
}

// The FP8 release's sidecar is byte for byte that of its dequantized twin
// (qkv_proj stored unsharded there), at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source, the sharded qkv_proj included.
func TestMiMoV2FP8Sidecar(t *testing.T) {
	for _, prec := range []string{"bf16", "int8"} {
		var files [2][]byte
		for i, fx := range []string{fixtures.MiMoV25FP8, fixtures.MiMoV25FP8Dequant} {
			src := filepath.Join(t.TempDir(), "mimo-v2.5")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			testfs.LinkDir(t, fixtures.Ensure(t, fx), src)
			path := exportTo(t, src, prec)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			files[i] = b
			if i > 0 {
				continue
			}
			m, err := model.Load(source.Dir(src))
			if err != nil {
				t.Fatal(err)
			}
			if r := m.RowShards("model.mtp.layers.1.self_attn.qkv_proj.weight"); r == nil || r.Shards != 4 || !slices.Equal(r.Parts, []int64{128, 128, 64}) {
				t.Errorf("qkv_proj shards: %+v", r)
			}
			rep, err := manifests.Verify(context.Background(), filepath.Dir(path), m.Checkpoint)
			m.Checkpoint.Close()
			if err != nil || !rep.OK || rep.Recomputed != rep.Tensors {
				t.Errorf("%s: verify --src: %v %+v", prec, err, rep)
			}
		}
		if !bytes.Equal(files[0], files[1]) {
			t.Errorf("%s: the FP8 source's sidecar differs from the dequantized twin's", prec)
		}
	}
}

// The heads grafted into the reference converter's --no-mtp trunk
// (committed as mimo-v2.5-tiny-nomtp-bf16.gguf) are the reference's bundled
// file byte for byte (head_count_kv and sliding_window_pattern: the
// trunk's entries, then the heads'), and that file split back is the
// reference's --mtp sidecar, tensor for tensor in its order.
func TestMiMoV2GraftEqualsReferenceBundled(t *testing.T) {
	ref := filepath.Join(fixtures.Root(), "testdata", "gguf_reference")
	raw, err := os.ReadFile(filepath.Join(ref, fixtures.MiMoV25+"-bundled-bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		FileSHA256 string `json:"file_sha256"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.FileSHA256 == "" {
		t.Fatalf("record: %v", err)
	}
	trunk := filepath.Join(t.TempDir(), "Mimo-v2.5-Tiny-BF16.gguf")
	b, err := os.ReadFile(filepath.Join(ref, fixtures.MiMoV25+"-nomtp-bf16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trunk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.MiMoV25)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Out: out, NoCard: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	bundled := filepath.Join(out, filepath.Base(trunk))
	got, err := os.ReadFile(bundled)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != rec.FileSHA256 {
		t.Errorf("the grafted file's sha256 is %x, the reference bundled file's %s", sum, rec.FileSHA256)
	}
	side := filepath.Join(t.TempDir(), "side")
	if _, err := gguf.Split(context.Background(), bundled, side, false, "test"); err != nil {
		t.Fatal(err)
	}
	sides, _ := filepath.Glob(filepath.Join(side, "*.gguf"))
	if len(sides) != 1 {
		t.Fatalf("split wrote %v", sides)
	}
	data, err := os.ReadFile(sides[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := os.ReadFile(filepath.Join(ref, fixtures.MiMoV25+"-bf16.json"))
	if err != nil {
		t.Fatal(err)
	}
	equalsReference(t, data, f, sidecar)
	var want struct {
		Tensors []struct {
			Name string `json:"name"`
		} `json:"tensors"`
	}
	json.Unmarshal(sidecar, &want)
	for i, ti := range f.Tensors {
		if i >= len(want.Tensors) || ti.Name != want.Tensors[i].Name {
			t.Errorf("the split's tensor %d is %s, not in the reference's order", i, ti.Name)
			break
		}
	}
}

// --target hf refuses MiMo-V2 with its one sentence (vLLM builds one of the
// 3 layers), and inspect's serving report says it is not judged rather than
// failing the FP8 release's modules it cannot model.
func TestMiMoV2HFRefused(t *testing.T) {
	m := testmodel.Load(t, fixtures.MiMoV25)
	const why = "MiMoV2MTP runs the first of MiMo-V2's 3 MTP layers only"
	if _, err := testmodel.Plan(t, m, "hf", targets.Options{}); err == nil || !strings.Contains(err.Error(), why) {
		t.Errorf("--target hf: %v", err)
	}
	fp8 := testmodel.Load(t, fixtures.MiMoV25FP8)
	r, err := hf.Serving(fp8)
	if err != nil || !strings.Contains(r.NotJudged, why) || r.Err() != nil || r.TensorDepth != 3 {
		t.Errorf("serving report: %v %+v", err, r)
	}
}
