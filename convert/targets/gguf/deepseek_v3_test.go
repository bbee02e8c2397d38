package gguf_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The reference converter drops DeepSeek-V3's NextN layer and writes only
// the trunk (recorded by interop/reference_gguf.py as
// deepseek-v3-tiny-trunk-*.json): our sidecar has its every key and value
// but block_count, which counts the head, plus nextn_predict_layers 1, and
// the tensors both hold (token_embd, output_norm, output) byte for byte;
// everything else is block n_layer's. The keys come in the converter's order.
func TestDeepSeekV3SidecarEqualsReferenceTrunk(t *testing.T) {
	for _, prec := range []string{"bf16", "f16"} {
		t.Run(prec, func(t *testing.T) {
			raw := referenceRecord(t, fixtures.DeepSeekV3, "trunk-"+prec)
			var ref reference
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			data, f := readGGUF(t, exportTo(t, fixtures.Ensure(t, fixtures.DeepSeekV3), prec))
			refTensors := map[string]bool{}
			for _, rt := range ref.Tensors {
				refTensors[rt.Name] = true
			}
			shared := 0
			for _, ti := range f.Tensors {
				if !strings.HasPrefix(ti.Name, "blk.") {
					shared++
					if !refTensors[ti.Name] {
						t.Errorf("tensor %s is not the reference's", ti.Name)
					}
				} else if !strings.HasPrefix(ti.Name, "blk.2.") {
					t.Errorf("tensor %s outside the NextN block 2", ti.Name)
				}
			}
			for _, rt := range ref.Tensors {
				if strings.HasPrefix(rt.Name, "blk.") {
					continue
				}
				var ti *gg.TensorInfo
				for i := range f.Tensors {
					if f.Tensors[i].Name == rt.Name {
						ti = &f.Tensors[i]
					}
				}
				if ti == nil {
					t.Errorf("tensor %s missing", rt.Name)
					continue
				}
				n, _ := ti.Bytes()
				sum := sha256.Sum256(data[f.DataOffset+ti.Offset : f.DataOffset+ti.Offset+n])
				if ti.Type.String() != rt.Type || hex.EncodeToString(sum[:]) != rt.SHA256 {
					t.Errorf("tensor %s: %s %x; the reference has %s %s", rt.Name, ti.Type, sum[:6], rt.Type, rt.SHA256[:12])
				}
			}
			if shared != 3 {
				t.Errorf("%d tensors outside blocks", shared)
			}
			// The NextN layer: one block more, and the key that counts it.
			metadataEqualsReference(t, f, ref, map[string]float64{"deepseek2.block_count": 1, "deepseek2.nextn_predict_layers": math.NaN()})
			if n, ok := f.Uint("deepseek2.nextn_predict_layers"); !ok || n != 1 {
				t.Errorf("nextn_predict_layers %d", n)
			}
			if got, want := fileKeys(f, "deepseek2.nextn_predict_layers"), refKeys(t, raw); !slices.Equal(got, want) {
				t.Errorf("key order\n got %v\nwant %v", got, want)
			}
		})
	}
}

// DeepSeek-V3's official release stores block FP8 (kv_b_proj, which the
// target splits, included): its sidecar is byte for byte that of the
// dequantized twin, at bf16 and Q8_0, and verify --src recomputes it from
// the FP8 source.
func TestDeepSeekV3FP8Sidecar(t *testing.T) {
	fp8SidecarEqualsTwin(t, fixtures.DeepSeekV3FP8, fixtures.DeepSeekV3FP8Dequant, "deepseek-v3", nil)
}

// DeepSeek-V3.2's sidecar carries the DSA indexer's tensors (indexer.proj
// float32, k_norm's weight and bias).
func deepSeekV32Sidecar(t *testing.T, prec string, f *gg.File) {
	tensorTypes(t, f, prec, map[string]gg.GGMLType{"blk.2.indexer.proj.weight": gg.F32, "blk.2.indexer.k_norm.bias": gg.F32, "blk.2.indexer.attn_k.weight": gg.BF16})
}
