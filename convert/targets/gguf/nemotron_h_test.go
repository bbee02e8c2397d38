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
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/manifests"
)

// Nemotron-H MoE's sidecar is the reference converter's --mtp file tensor
// for tensor and key for key, in its key order (testdata/gguf_reference,
// recorded by interop/reference_gguf.py), at bf16 and f16: the two HF
// sub-layers in block 4, the gateless experts stacked in the latent width,
// the router in the output float type as the converter writes the head's.
func TestNemotronHSidecarEqualsReference(t *testing.T) {
	for _, fx := range []string{fixtures.NemotronHMoE, fixtures.NemotronHMoERigged} {
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
			})
		}
	}
}

// The head grafted into the reference converter's --no-mtp trunk of each
// fixture (committed as FIXTURE-nomtp-bf16.gguf: the Mamba-2 trunk llama.cpp
// runs) is the reference's bundled file byte for byte.
func TestNemotronHGraftEqualsReferenceBundled(t *testing.T) {
	ref := filepath.Join(fixtures.Root(), "testdata", "gguf_reference")
	for _, fx := range []string{fixtures.NemotronHMoE, fixtures.NemotronHMoERigged} {
		t.Run(fx, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(ref, fx+"-bundled-bf16.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				FileName   string `json:"file_name"`
				FileSHA256 string `json:"file_sha256"`
			}
			if err := json.Unmarshal(raw, &rec); err != nil || rec.FileSHA256 == "" {
				t.Fatalf("record: %v", err)
			}
			trunk := filepath.Join(t.TempDir(), rec.FileName)
			b, err := os.ReadFile(filepath.Join(ref, fx+"-nomtp-bf16.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(trunk, b, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(source.Dir(fixtures.Ensure(t, fx)))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Checkpoint.Close()
			out := filepath.Join(t.TempDir(), "out")
			o := targets.Options{Graft: trunk, Set: map[string]bool{targets.OptGraft: true}}
			if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Out: out, NoCard: true, Version: "test"}); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(out, filepath.Base(trunk)))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != rec.FileSHA256 {
				t.Errorf("the grafted file's sha256 is %x, the reference bundled file's %s", sum, rec.FileSHA256)
			}
		})
	}
}

// A block-FP8 Nemotron-H checkpoint (every 2-D linear weight, the experts,
// eh_proj and the latent projections included) gives the sidecar of its
// dequantized twin byte for byte, at bf16 and Q8_0, and verify --src
// recomputes it from the FP8 source.
func TestNemotronHFP8Sidecar(t *testing.T) {
	for _, prec := range []string{"bf16", "int8"} {
		var files [2][]byte
		for i, fx := range []string{fixtures.NemotronHMoEFP8, fixtures.NemotronHMoEFP8Dequant} {
			src := filepath.Join(t.TempDir(), "nemotron-h")
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
