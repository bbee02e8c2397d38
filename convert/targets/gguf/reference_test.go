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
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/ggufsplit"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// referenceFamilies are the NextN families whose GGUF files are checked
// against the records interop/reference_gguf.py made of llama.cpp's
// reference converter (testdata/gguf_reference/FIXTURE-*.json).
var referenceFamilies = []struct {
	fixture string
	// heads is the sidecar's nextn_predict_layers (0: the key is absent,
	// as in a dflash draft).
	heads int64
	// graft: FIXTURE-nomtp-bf16.gguf, the converter's --no-mtp trunk, is
	// committed, with the record of its bundled --mtp file.
	graft bool
	// sidecar holds the family's own assertions on its bf16 / f16 sidecar.
	sidecar func(t *testing.T, prec string, f *gg.File)
}{
	{fixture: fixtures.DeepSeekV32, heads: 1, graft: true, sidecar: deepSeekV32Sidecar},
	// DeepSeek-V4: the FP4 experts moved into MXFP4 blocks byte for byte,
	// e_proj ∥ h_proj joined by columns and Q8_0, every other tensor in its
	// stored type: the same file at bf16 and f16. No graft (the
	// converter's bundled file drops the head).
	{fixture: fixtures.DeepSeekV4, heads: 1, sidecar: deepSeekV4Sidecar},
	{fixture: fixtures.DeepSeekV4Rigged, heads: 1, sidecar: deepSeekV4Sidecar},
	// The release's block FP8 (e4m3, ue8m0 X.scale): dequantized exactly
	// and Q8_0 as the converter forces, e_proj ∥ h_proj each part with its
	// own scales.
	{fixture: fixtures.DeepSeekV4FP8, heads: 1, sidecar: deepSeekV4FP8Sidecar},
	{fixture: fixtures.DeepSeekV4FP8Rigged, heads: 1, sidecar: deepSeekV4FP8Sidecar},
	{fixture: fixtures.GLM52, heads: 1, graft: true, sidecar: glm52Sidecar},
	// GLM-5.3's block-FP8 release (float32 scales, the NextN layer's indexer
	// FP8 too): the converter dequantizes it as we do.
	{fixture: fixtures.GLM53, heads: 1, graft: true, sidecar: glm52Sidecar},
	{fixture: fixtures.Hy3, heads: 3, graft: true, sidecar: hy3Sidecar},
	{fixture: fixtures.Ling3, heads: 1, graft: true, sidecar: ling3Sidecar},
	{fixture: fixtures.Ling3Rigged, heads: 1, graft: true},
	// MiMo-V2.5: 3 chained heads as blocks 2, 3, 4; grafted, head_count_kv
	// and sliding_window_pattern hold the trunk's entries, then the heads'.
	{fixture: fixtures.MiMoV25, heads: 3, graft: true},
	// The FP8 release's qkv_proj the reference dequantizes as 4
	// tensor-parallel shards with per-shard scales (_tp_aware_qkv_dequant):
	// the same bytes.
	{fixture: fixtures.MiMoV25FP8, heads: 3},
	// Nemotron-H MoE: the two HF sub-layers in block 4, the gateless experts
	// stacked in the latent width, the router in the output float type as
	// the converter writes the head's; the trunk is the Mamba-2 one
	// llama.cpp runs.
	{fixture: fixtures.NemotronHMoE, heads: 1, graft: true},
	{fixture: fixtures.NemotronHMoERigged, heads: 1, graft: true},
	{fixture: fixtures.Step35, heads: 3, graft: true, sidecar: step35Sidecar(false)},
	{fixture: fixtures.Step37, heads: 3, graft: true, sidecar: step35Sidecar(true)},
	// The Gemma-4 assistant: the converter's whole gemma4-assistant file (a
	// separate drafter, 4 blocks, no --mtp), the centroid head dropped.
	{fixture: fixtures.Gemma4Assistant, heads: 4, sidecar: gemma4AssistantFile},
	{fixture: fixtures.Gemma4AssistantCentroid, heads: 4, sidecar: gemma4AssistantFile},
	{fixture: fixtures.Gemma4AssistantRigged, heads: 4},
	// DeepSeek-V4-Flash-0731's DSpark stages: the converter's --dspark
	// draft (dflash, no nextn layers), stage s as block s, DeepSeek-V4's
	// stored types: the same file at bf16 and f16.
	{fixture: fixtures.DSparkV4Flash, sidecar: dsparkDraft},
	{fixture: fixtures.DSparkV4FlashRigged, sidecar: dsparkDraft},
}

// Each family's sidecar is the reference converter's --mtp file tensor for
// tensor and key for key, in its key order, at bf16 and f16. Its tensors come
// in the target's order (as for every family: the shared ones, then block by
// block, the stacked experts last), not the converter's: that order is the
// split's, checked below.
func TestFamilySidecarEqualsReference(t *testing.T) {
	for _, fam := range referenceFamilies {
		for _, prec := range []string{"bf16", "f16"} {
			t.Run(fam.fixture+"/"+prec, func(t *testing.T) {
				f := sameAsRecord(t, exportTo(t, fixtures.Ensure(t, fam.fixture), prec), referenceRecord(t, fam.fixture, prec), false)
				key := f.String("general.architecture") + ".nextn_predict_layers"
				if n, ok := f.Uint(key); ok != (fam.heads > 0) || n != fam.heads {
					t.Errorf("%s %d (set %v), want %d", key, n, ok, fam.heads)
				}
				if fam.sidecar != nil {
					fam.sidecar(t, prec, f)
				}
			})
		}
	}
}

// The heads grafted into the reference converter's --no-mtp trunk are the
// reference's bundled file byte for byte, and our split of that file is the
// reference's --mtp sidecar, its keys and tensors in the converter's order.
func TestFamilyGraftAndSplitEqualReference(t *testing.T) {
	for _, fam := range referenceFamilies {
		if !fam.graft {
			continue
		}
		t.Run(fam.fixture, func(t *testing.T) {
			var rec struct {
				FileName   string `json:"file_name"`
				FileSHA256 string `json:"file_sha256"`
			}
			if err := json.Unmarshal(referenceRecord(t, fam.fixture, "bundled-bf16"), &rec); err != nil || rec.FileName == "" || rec.FileSHA256 == "" {
				t.Fatalf("record: %v", err)
			}
			trunk := filepath.Join(t.TempDir(), rec.FileName)
			b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fam.fixture+"-nomtp-bf16.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(trunk, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(source.Dir(fixtures.Ensure(t, fam.fixture)))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Checkpoint.Close()
			out := filepath.Join(t.TempDir(), "out")
			o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
			if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Dest: export.Out(out), NoCard: true, Version: "test"}); err != nil {
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
			if _, err := ggufsplit.Split(context.Background(), bundled, side, false, "test"); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(side, "*.gguf"))
			if len(files) != 1 {
				t.Fatalf("split wrote %v", files)
			}
			sameAsRecord(t, files[0], referenceRecord(t, fam.fixture, "bf16"), true)
		})
	}
}

// fp8SidecarEqualsTwin checks a block-FP8 release fixture against its
// dequantized twin: its sidecar is the twin's byte for byte, at bf16 and
// Q8_0, and verify --src recomputes it from the FP8 source. The source is
// linked as dir (the folder name the sidecar's name derives from); loaded
// checks the loaded FP8 model.
func fp8SidecarEqualsTwin(t *testing.T, fp8, dequant, dir string, loaded func(t *testing.T, m *model.Model)) {
	for _, prec := range []string{"bf16", "int8"} {
		t.Run(prec, func(t *testing.T) {
			var files [2][]byte
			for i, fx := range []string{fp8, dequant} {
				src := filepath.Join(t.TempDir(), dir)
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
				if loaded != nil {
					loaded(t, m)
				}
				rep, err := manifests.Verify(context.Background(), filepath.Dir(path), m.Checkpoint)
				m.Checkpoint.Close()
				if err != nil || !rep.OK || rep.Recomputed != rep.Tensors {
					t.Errorf("verify --src: %v %+v", err, rep)
				}
			}
			if !bytes.Equal(files[0], files[1]) {
				t.Error("the FP8 source's sidecar differs from the dequantized twin's")
			}
		})
	}
}

// referenceRecord reads the record FIXTURE-NAME.json of interop/reference_gguf.py.
func referenceRecord(t *testing.T, fixture, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fixture+"-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// readGGUF reads a whole GGUF file.
func readGGUF(t *testing.T, path string) ([]byte, *gg.File) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gg.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return data, f
}

// sameAsRecord checks a GGUF file against a reference record: every tensor
// and key, the keys' order and, with order, the tensors'.
func sameAsRecord(t *testing.T, path string, raw []byte, order bool) *gg.File {
	t.Helper()
	data, f := readGGUF(t, path)
	equalsReference(t, data, f, raw)
	if got, want := fileKeys(f), refKeys(t, raw); !slices.Equal(got, want) {
		t.Errorf("key order\n got %v\nwant %v", got, want)
	}
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	if want := refTensorOrder(t, raw); order && !slices.Equal(names, want) {
		t.Errorf("tensor order\n got %v\nwant %v", names, want)
	}
	return f
}

// refTensorOrder is a reference record's tensor names in the file's order.
func refTensorOrder(t *testing.T, raw []byte) []string {
	t.Helper()
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rt := range ref.Tensors {
		names = append(names, rt.Name)
	}
	return names
}

// refKeys are a reference record's metadata keys in the order the
// converter wrote them (the record keeps it).
func refKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	var rec struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(rec.Metadata))
	d.Token() // {
	var keys []string
	for d.More() {
		k, _ := d.Token()
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if !provenance[k.(string)] {
			keys = append(keys, k.(string))
		}
	}
	return keys
}

// fileKeys are a GGUF file's metadata keys in order, but those in skip.
func fileKeys(f *gg.File, skip ...string) []string {
	var keys []string
	for _, kv := range f.KV {
		if !provenance[kv.Key] && !slices.Contains(skip, kv.Key) {
			keys = append(keys, kv.Key)
		}
	}
	return keys
}

// tensorTypes checks the named tensors' types in a sidecar of precision
// prec: a BF16 in want stands for the output float type (F16 at f16).
func tensorTypes(t *testing.T, f *gg.File, prec string, want map[string]gg.GGMLType) {
	t.Helper()
	for name, typ := range want {
		if prec == "f16" && typ == gg.BF16 {
			typ = gg.F16
		}
		if i := slices.IndexFunc(f.Tensors, func(ti gg.TensorInfo) bool { return ti.Name == name }); i < 0 || f.Tensors[i].Type != typ {
			t.Errorf("%s is not %s", name, typ)
		}
	}
}
