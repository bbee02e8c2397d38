package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// bf16 bit patterns written into fixtures.
const (
	bf16NaN    = 0x7fc0
	bf16SNaN   = 0x7f81 // a signalling NaN: copied through, it must keep its bits
	bf16Inf    = 0x7f80
	bf16NegInf = 0xff80
	bf16Big    = 0x47c3 // 99840: finite in bf16, beyond the f16 range (65504)
)

// poke is one bf16 element of a source tensor to overwrite.
type poke struct {
	tensor string
	elem   int64
	bits   uint16
}

// patched copies a fixture into a temporary folder (untouched files
// symlinked, the patched shards copied with their headers kept) with the
// given bf16 elements overwritten.
func patched(t *testing.T, fixture string, pokes ...poke) string {
	t.Helper()
	src := fixtures.Ensure(t, fixture)
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string][]byte{}
	for _, p := range pokes {
		tn, ok := ck.Tensors[p.tensor]
		if !ok || tn.DType != st.BF16 || p.elem >= tn.Elements() {
			t.Fatalf("cannot poke %s[%d]", p.tensor, p.elem)
		}
		b, ok := shards[tn.Shard.Name]
		if !ok {
			if b, err = os.ReadFile(filepath.Join(src, tn.Shard.Name)); err != nil {
				t.Fatal(err)
			}
			shards[tn.Shard.Name] = b
		}
		binary.LittleEndian.PutUint16(b[tn.Begin+2*p.elem:], p.bits)
	}
	ck.Close()
	dir := t.TempDir()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if b, ok := shards[e.Name()]; ok {
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A NaN or infinity in a tensor to be quantized, or (for OpenVINO, which
// compresses from f16) a finite value the f16 cast makes infinite, refuses
// the export with the shard, tensor, first element and count, and leaves
// nothing behind.
func TestNonFiniteQuantizedSourceIsRefused(t *testing.T) {
	t.Parallel()
	// Element 3*256*128 + 200*128 + 7 of gate_up_proj [256, 256, 128]: expert 3, row 200 (the up half).
	const upElem = 3*256*128 + 200*128 + 7
	cases := []struct {
		name    string
		fixture string
		pokes   []poke
		args    []string
		want    []string
	}{
		{"mlx int4 NaN", fixtures.Qwen36, []poke{{"mtp.fc.weight", 9, bf16NaN}, {"mtp.fc.weight", 5, bf16NaN}, {"mtp.fc.weight", 300, bf16Inf}},
			[]string{"--target", "mlx", "--head-precision", "int4"},
			[]string{"model-00002-of-00003.safetensors: tensor mtp.fc.weight holds 3 NaN or infinite values", "the first at element 5 [0 5]", "mlx_affine 4-bit"}},
		{"mlx int4 Inf in fused experts", fixtures.Qwen36, []poke{{"mtp.layers.0.mlp.experts.gate_up_proj", upElem, bf16NegInf}},
			[]string{"--target", "mlx", "--head-precision", "int4"},
			[]string{"model-00003-of-00003.safetensors: tensor mtp.layers.0.mlp.experts.gate_up_proj holds 1 NaN or infinite values", "[3 200 7]"}},
		{"mlx int8 router NaN", fixtures.Qwen36, []poke{{"mtp.layers.0.mlp.gate.weight", 0, bf16NaN}},
			[]string{"--target", "mlx", "--head-precision", "int8"},
			[]string{"tensor mtp.layers.0.mlp.gate.weight holds 1 NaN or infinite values", "element 0 [0 0]"}},
		{"combined int4 trunk NaN", fixtures.Qwen36, []poke{{"model.language_model.layers.1.mlp.shared_expert.up_proj.weight", 17, bf16NaN}},
			[]string{"--target", "combined", "--trunk-precision", "int4"},
			[]string{"tensor model.language_model.layers.1.mlp.shared_expert.up_proj.weight holds 1 NaN or infinite values", "element 17"}},
		{"mlx int4 finite values spanning more than float32", fixtures.Qwen36, []poke{{"mtp.fc.weight", 64, 0x7f7f}, {"mtp.fc.weight", 65, 0xff7f}},
			[]string{"--target", "mlx", "--head-precision", "int4"},
			[]string{"tensor fc.weight: its values (from mtp.fc.weight) span more than the float32 range", "mlx_affine 4-bit"}},
		{"openvino int8 above f16", fixtures.Qwen36, []poke{{"mtp.fc.weight", 5, bf16Big}, {"mtp.fc.weight", 6, bf16Big}},
			[]string{"--target", "openvino", "--head-precision", "int8"},
			[]string{"model-00002-of-00003.safetensors: tensor mtp.fc.weight holds 2 values beyond the f16 range", "the first at element 5 [0 5] (99840)", "nncf 8-bit"}},
		{"openvino int4 above f16", fixtures.Qwen36, []poke{{"mtp.layers.0.self_attn.q_proj.weight", 130, bf16Big}},
			[]string{"--target", "openvino", "--head-precision", "int4"},
			[]string{"tensor mtp.layers.0.self_attn.q_proj.weight holds 1 values beyond the f16 range", "element 130 [1 2]", "nncf 4-bit"}},
		{"openvino int4 NaN", fixtures.Qwen36, []poke{{"mtp.layers.0.self_attn.o_proj.weight", 1000, bf16NaN}},
			[]string{"--target", "openvino", "--head-precision", "int4"},
			[]string{"tensor mtp.layers.0.self_attn.o_proj.weight holds 1 NaN or infinite values", "element 1000 [3 232]"}},
		{"openvino int8 lm_head Inf", fixtures.Qwen36, []poke{{"lm_head.weight", 64, bf16Inf}},
			[]string{"--target", "openvino"},
			[]string{"model-00003-of-00003.safetensors: tensor lm_head.weight holds 1 NaN or infinite values", "element 64 [0 64]"}},
		{"openvino int8 per-expert -Inf", fixtures.Qwen35, []poke{{"mtp.layers.0.mlp.experts.17.down_proj.weight", 129, bf16NegInf}},
			[]string{"--target", "openvino", "--head-precision", "int8"},
			[]string{"tensor mtp.layers.0.mlp.experts.17.down_proj.weight holds 1 NaN or infinite values", "element 129 [1 1]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := patched(t, c.fixture, c.pokes...)
			parent := t.TempDir()
			out := filepath.Join(parent, "o")
			code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--quiet"}, c.args...)...)
			if code != 1 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error does not say %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "json:") || len(stderr) > 2048 {
				t.Errorf("error is not a plain bounded message:\n%s", stderr)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("the refused export left %v", left)
			}
		})
	}
}

// NaN and infinities in float outputs are kept, counted per tensor in the
// manifest, noted in the summary and reported (not failed) by verify.
func TestNonFiniteFloatOutputsAreCounted(t *testing.T) {
	t.Parallel()
	// mtp.layers.0.mlp.experts.gate_up_proj: expert 2, row 5 (the gate half) and row 130 (the up half).
	const gate, up = 2*256*128 + 5*128, 2*256*128 + 130*128 + 1
	cases := []struct {
		name      string
		fixture   string
		pokes     []poke
		args      []string
		nonfinite map[string]int64 // output tensor -> NaN/Inf it stores
		overflows map[string]int64
		notes     []string
	}{
		{"mlx bf16 copy", fixtures.Qwen36,
			[]poke{{"mtp.fc.weight", 0, bf16NaN}, {"mtp.fc.weight", 1, bf16SNaN}, {"mtp.fc.weight", 2, bf16Inf}, {"mtp.fc.weight", 3, bf16NegInf},
				{"mtp.layers.0.mlp.experts.gate_up_proj", gate, bf16NaN}, {"mtp.layers.0.mlp.experts.gate_up_proj", up, bf16Inf}, {"mtp.norm.weight", 4, bf16SNaN}},
			[]string{"--target", "mlx"},
			map[string]int64{"fc.weight": 4, "layers.0.mlp.switch_mlp.gate_proj.weight": 1, "layers.0.mlp.switch_mlp.up_proj.weight": 1, "norm.weight": 1},
			nil, []string{"fc.weight: 4 NaN or infinite source values are kept as they are", "norm.weight: 1 NaN or infinite"}},
		{"mlx f16 cast with an overflow", fixtures.Qwen36,
			[]poke{{"mtp.fc.weight", 0, bf16NaN}, {"mtp.fc.weight", 1, bf16Big}},
			[]string{"--target", "mlx", "--head-precision", "f16"},
			map[string]int64{"fc.weight": 2}, map[string]int64{"fc.weight": 1},
			[]string{"fc.weight: 1 NaN or infinite source values", "fc.weight: 1 values above the f16 range became infinite"}},
		{"mlx int4 head, NaN in a float norm", fixtures.Qwen36,
			[]poke{{"mtp.pre_fc_norm_hidden.weight", 7, bf16NaN}},
			[]string{"--target", "mlx", "--head-precision", "int4"},
			map[string]int64{"pre_fc_norm_hidden.weight": 1}, nil, []string{"pre_fc_norm_hidden.weight: 1 NaN"}},
		{"openvino f16", fixtures.Qwen36,
			[]poke{{"mtp.fc.weight", 0, bf16NaN}, {"mtp.fc.weight", 1, bf16NegInf}, {"mtp.norm.weight", 4, bf16Inf}, {"lm_head.weight", 9, bf16NaN}},
			[]string{"--target", "openvino", "--lm-head-precision", "f16"},
			map[string]int64{"mtp.fc.weight": 2, "mtp.norm.weight": 1, "lm_head.weight": 1}, nil, []string{"mtp.fc.weight: 2 NaN"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := patched(t, c.fixture, c.pokes...)
			out := filepath.Join(t.TempDir(), "o")
			code, stdout, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--json"}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var sum exportSummary
			json.Unmarshal([]byte(stdout), &sum)
			for _, w := range c.notes {
				found := false
				for _, n := range sum.Notes {
					found = found || strings.Contains(n, w)
				}
				if !found {
					t.Errorf("no note says %q: %v", w, sum.Notes)
				}
			}
			m, err := manifests.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range m.Tensors {
				if tn.NonFinite != c.nonfinite[tn.Name] || tn.F16Overflows != c.overflows[tn.Name] {
					t.Errorf("%s: nonfinite %d, f16 overflows %d; want %d, %d", tn.Name, tn.NonFinite, tn.F16Overflows, c.nonfinite[tn.Name], c.overflows[tn.Name])
				}
			}
			if card, _ := os.ReadFile(filepath.Join(out, "README.md")); !strings.Contains(string(card), "stored values are NaN or infinite") {
				t.Error("the model card does not warn of the NaN or infinite values")
			}
			for _, from := range []string{"", src} {
				code, r := verifyReport(t, out, from)
				if code != 0 || !r.OK {
					t.Fatalf("verify (src %q): exit %d, problems %v", from, code, r.Problems)
				}
				if len(r.Warnings) != len(c.nonfinite) {
					t.Errorf("verify warnings %v, want one per tensor of %v", r.Warnings, c.nonfinite)
				}
				for _, w := range r.Warnings {
					if w.Kind != "nonfinite_values" || c.nonfinite[w.Tensor] == 0 {
						t.Errorf("verify warning %+v", w)
					}
				}
			}
			// A manifest that understates the count is caught.
			raw, _ := os.ReadFile(filepath.Join(out, manifests.FileName))
			var doc map[string]any
			json.Unmarshal(raw, &doc)
			for _, x := range doc["tensors"].([]any) {
				delete(x.(map[string]any), "nonfinite")
			}
			raw, _ = json.Marshal(doc)
			os.WriteFile(filepath.Join(out, manifests.FileName), raw, 0o644)
			if code, r := verifyReport(t, out, ""); code != 1 || !strings.Contains(kinds(r), "nonfinite_count") {
				t.Errorf("verify after the count was removed: exit %d, %s", code, kinds(r))
			}
		})
	}
}
