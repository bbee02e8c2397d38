package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// withTensorValues copies a fixture into a temporary folder with the bf16
// tensor name's values changed by edit (row r, column c of rows of rowLen).
func withTensorValues(t *testing.T, fixture, name string, edit func(r, c int64, v float32) float32) string {
	t.Helper()
	return withEditedTensors(t, fixtures.Ensure(t, fixture), name, func(ti st.TensorInfo, b []byte) {
		if ti.DType != st.BF16 {
			t.Fatalf("%s is %s, not BF16", name, ti.DType)
		}
		rowLen := ti.Shape[len(ti.Shape)-1]
		for i := int64(0); i < ti.Elements(); i++ {
			at := ti.Begin + 2*i
			v := quant.BF16ToF32(binary.LittleEndian.Uint16(b[at:]))
			binary.LittleEndian.PutUint16(b[at:], quant.F32ToBF16(edit(i/rowLen, i%rowLen, v)))
		}
	})
}

// withEditedTensors copies the folder src into a temporary folder, edit
// changing the stored bytes of tensor name in its safetensors file (b the
// file's bytes, ti.Begin where the tensor's start).
func withEditedTensors(t *testing.T, src, name string, edit func(ti st.TensorInfo, b []byte)) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".safetensors") {
			f, fi, err := st.OpenRegular(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			h, err := st.ReadHeader(f, fi.Size(), e.Name())
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range h.Tensors {
				if ti.Name == name {
					edit(ti, b)
					found = true
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("%s holds no %s", src, name)
	}
	return dir
}

// scaledFC is the GenAI fixture with the embedding half of mtp.fc (its
// first hidden columns: Qwen concatenates [embedding, hidden]) ratio times
// smaller than the hidden half, as in the released heads.
func scaledFC(t *testing.T, ratio float32) string {
	return withTensorValues(t, fixtures.Qwen36GenAI, "mtp.fc.weight", func(r, c int64, v float32) float32 {
		if c < 64 { // hidden size 64: rows of 128
			return v / ratio
		}
		return v
	})
}

// A per-row int4 concat projection (group 128 over rows of 128) at the
// 25x column-scale ratio loses its embedding half: the export refuses it and
// writes nothing; --allow-lossy-head writes it, the manifest records the
// halves' errors, and verify --src fails on it. The default group keeps both
// halves, and OpenVINO's per-channel int8 is noted as degraded.
func TestHeadHealthExport(t *testing.T) {
	t.Parallel()
	src := scaledFC(t, 25)
	out := filepath.Join(t.TempDir(), "o")
	lossy := []string{"export", "--src", src, "--target", "mlx", "--head-precision", "int4", "--group-size", "128", "--out", out}
	code, stdout, stderr := runCLI(t, lossy...)
	if code != 1 || !strings.Contains(stderr, "fc.weight: its embedding half's quantization error is 1.00") || !strings.Contains(stderr, "--allow-lossy-head") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "wrote ") { // the file holding the head is refused before it is announced
		t.Errorf("a refused export announced files:\n%s", stdout)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused export left %s: %v", out, err)
	}
	code, stdout, stderr = runCLI(t, append(lossy, "--allow-lossy-head", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum exportSummary
	json.Unmarshal([]byte(stdout), &sum)
	if !strings.Contains(strings.Join(sum.Notes, "\n"), "written as asked (--allow-lossy-head)") {
		t.Errorf("notes %v", sum.Notes)
	}
	m, err := manifests.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	fc := tensorRecord(t, m, "fc.weight")
	if q := fc.QuantError; q == nil || len(q.Parts) != 2 || q.Parts[0].Name != "embedding" || q.Parts[0].RelRMS < 0.99 || q.Parts[0].ZeroRows != q.Parts[0].Rows || q.Parts[1].RelRMS > 0.2 {
		t.Errorf("manifest records %+v", fc.QuantError)
	}
	code, stdout, _ = runCLI(t, "verify", out, "--src", src)
	if code != 1 || !strings.Contains(stdout, "FAIL head_half_lost") || !strings.Contains(stdout, "embedding half 1.000") {
		t.Errorf("verify --src of a lost head: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr = runCLI(t, "inspect", out, "--strict")
	if code != 1 || !strings.Contains(stdout, "fc.weight: 64 of its 64 rows are all zeros in its embedding half") {
		t.Errorf("inspect --strict of a lost head, without its source: exit %d\n%s%s", code, stdout, stderr)
	}

	good := filepath.Join(t.TempDir(), "good")
	code, stdout, stderr = runCLI(t, "export", "--src", src, "--target", "mlx", "--head-precision", "int4", "--out", good)
	if code != 0 || !strings.Contains(stdout+stderr, "note: fc.weight: quantization error (relative RMS) embedding half 0.0") {
		t.Fatalf("int4 group 64: exit %d: %s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "verify", good, "--src", src)
	if code != 0 || !strings.Contains(stdout, "head fc.weight: quantization error (relative RMS) embedding half 0.0") {
		t.Errorf("verify --src: exit %d\n%s", code, stdout)
	}

	ov := filepath.Join(t.TempDir(), "ov")
	code, stdout, stderr = runCLI(t, "export", "--src", src, "--target", "openvino", "--head-precision", "int8", "--out", ov)
	if code != 0 || !strings.Contains(stdout+stderr, "drafts are accepted less often") {
		t.Errorf("openvino int8 per channel at 25x: exit %d: %s%s", code, stdout, stderr)
	}
}

func tensorRecord(t *testing.T, m *manifests.Manifest, name string) *manifests.Tensor {
	t.Helper()
	for i := range m.Tensors {
		if m.Tensors[i].Name == name {
			return &m.Tensors[i]
		}
	}
	t.Fatalf("the manifest records no %s", name)
	return nil
}

// withTokenizer adds the tiny test tokenizer to a source folder (the gguf
// target needs a vocabulary).
func withTokenizer(t *testing.T, dir string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny", "*"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(n)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// One case per failure kind, in a GGUF file and in an MLX folder, each
// found by inspect from the stored values alone and failed by --strict;
// our own exports of the fixture at every precision pass.
func TestHeadHealthInspect(t *testing.T) {
	t.Parallel()
	type edit struct {
		tensor string
		fn     func(r, c int64, v float32) float32
	}
	kinds := []struct {
		name string
		edit *edit
		want string // "" healthy
	}{
		{"healthy", nil, ""},
		{"embedding half zero", &edit{"mtp.fc.weight", func(r, c int64, v float32) float32 {
			if c < 64 {
				return 0
			}
			return v
		}}, "rows are all zeros in its embedding half"},
		{"zeroed head tensor", &edit{"mtp.layers.0.self_attn.q_proj.weight", func(r, c int64, v float32) float32 { return 0 }}, "every value is zero"},
		{"norm shifted twice", &edit{"mtp.pre_fc_norm_embedding.weight", func(r, c int64, v float32) float32 { return v + 1 }}, "the +1 of the zero-centred RMSNorm was applied twice"},
	}
	exports := []struct {
		name string
		args []string
		file string // inspected: a file of the output, or the folder ("")
	}{
		{"gguf bf16", []string{"--target", "gguf"}, "*.gguf"},
		{"gguf Q4_K_M", []string{"--target", "gguf", "--head-precision", "int4"}, "*.gguf"},
		{"mlx int4", []string{"--target", "mlx", "--head-precision", "int4"}, ""},
		{"combined mxfp4", []string{"--target", "combined", "--head-precision", "mxfp4", "--trunk-precision", "int4"}, ""},
	}
	for _, k := range kinds {
		src := fixtures.Ensure(t, fixtures.Qwen36GenAI)
		if k.edit != nil {
			src = withTensorValues(t, fixtures.Qwen36GenAI, k.edit.tensor, k.edit.fn)
		} else {
			src = withTensorValues(t, fixtures.Qwen36GenAI, "mtp.fc.weight", func(r, c int64, v float32) float32 { return v })
		}
		withTokenizer(t, src)
		// The checkpoint itself, whose zero-centred norms are stored raw (w).
		t.Run(k.name+"/checkpoint", func(t *testing.T) {
			want := strings.ReplaceAll(k.want, "was applied twice", "is already applied, and loaders add it again")
			code, stdout, stderr := runCLI(t, "inspect", src, "--strict")
			switch {
			case want == "" && (code != 0 || !strings.Contains(stdout, "from their stored values: OK")):
				t.Errorf("a healthy head: exit %d\n%s%s", code, stdout, stderr)
			case want != "" && (code != 1 || !strings.Contains(stdout, want)):
				t.Errorf("exit %d, want 1 and %q\n%s%s", code, want, stdout, stderr)
			}
		})
		for _, x := range exports {
			t.Run(k.name+"/"+x.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "o")
				if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out, "--quiet"}, x.args...)...); code != 0 {
					t.Fatalf("export: exit %d: %s", code, stderr)
				}
				target := out
				if x.file != "" {
					m, _ := filepath.Glob(filepath.Join(out, x.file))
					if len(m) != 1 {
						t.Fatalf("%s: %v", x.file, m)
					}
					target = m[0]
				}
				code, stdout, stderr := runCLI(t, "inspect", target, "--strict")
				switch {
				case k.want == "" && (code != 0 || !strings.Contains(stdout, "from their stored values: OK")):
					t.Errorf("a healthy head: exit %d\n%s%s", code, stdout, stderr)
				case k.want != "" && (code != 1 || !strings.Contains(stdout, k.want) || !strings.Contains(stderr, k.want)):
					t.Errorf("exit %d, want 1 and %q\n%s%s", code, k.want, stdout, stderr)
				}
				code, stdout, _ = runCLI(t, "inspect", target, "--json")
				var r struct {
					HeadHealth *struct {
						Checked  int      `json:"tensors_checked"`
						Problems []string `json:"problems"`
					} `json:"head_health"`
				}
				if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 0 || r.HeadHealth == nil || r.HeadHealth.Checked < 10 || (len(r.HeadHealth.Problems) > 0) != (k.want != "") {
					t.Errorf("inspect --json: exit %d, %v: %+v", code, err, r.HeadHealth)
				}
			})
		}
	}
}

// Our own exports at every precision of every target pass: no note of a
// lost or degraded half, verify --src finds nothing, and inspect --strict of
// the GGUF and MLX outputs exits 0.
func TestHeadHealthOwnExports(t *testing.T) {
	t.Parallel()
	src := withTokenizer(t, withTensorValues(t, fixtures.Qwen36GenAI, "mtp.fc.weight", func(r, c int64, v float32) float32 { return v }))
	var exports [][]string
	for _, p := range []string{"bf16", "f16", "int2", "int3", "int4", "int5", "int6", "int8", "mxfp4", "mxfp8", "nvfp4"} {
		exports = append(exports, []string{"--target", "mlx", "--head-precision", p})
	}
	for _, p := range []string{"f16", "int8", "int4"} {
		exports = append(exports, []string{"--target", "openvino", "--head-precision", p})
	}
	for _, p := range []string{"F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"} {
		exports = append(exports, []string{"--target", "gguf", "--gguf-type", p})
	}
	for _, args := range exports {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			code, stdout, stderr := runCLI(t, append([]string{"export", "--src", src, "--out", out}, args...)...)
			if code != 0 || strings.Contains(stdout+stderr, "drafts are accepted less often") || strings.Contains(stdout+stderr, "cannot draft") {
				t.Fatalf("export: exit %d: %s%s", code, stdout, stderr)
			}
			if code, stdout, _ := runCLI(t, "verify", out, "--src", src); code != 0 || strings.Contains(stdout, "head_half") {
				t.Errorf("verify --src: exit %d\n%s", code, stdout)
			}
			target := out
			if args[1] == "gguf" {
				m, _ := filepath.Glob(filepath.Join(out, "*.gguf"))
				target = m[0]
			}
			if args[1] != "openvino" {
				if code, stdout, stderr := runCLI(t, "inspect", target, "--strict"); code != 0 || !strings.Contains(stdout, "from their stored values: OK") {
					t.Errorf("inspect --strict: exit %d\n%s%s", code, stdout, stderr)
				}
			}
		})
	}
}

// An HF repo holding a head (a quantized trunk that --target hf --into gave
// a bf16 head): inspect judges the head from its stored values, and
// --strict fails a head whose embedding half is zero.
func TestHeadHealthHFRepo(t *testing.T) {
	t.Parallel()
	ct := `{"quant_method": "compressed-tensors", "format": "int-quantized",
		"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}}},
		"ignore": ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*linear_attn.*", "re:.*visual.*"]}`
	for _, c := range []struct {
		name string
		edit func(r, c int64, v float32) float32
		want string
	}{
		{"healthy", func(r, c int64, v float32) float32 { return v }, ""},
		{"embedding half zero", func(r, c int64, v float32) float32 {
			if c < 64 {
				return 0
			}
			return v
		}, "mtp.fc.weight: 64 of its 64 rows are all zeros in its embedding half"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := testmodel.HFRepo{Fixture: fixtures.Qwen36GenAI, Quant: ct, Storage: testmodel.TrunkInt8}.Write(t)
			src := withTensorValues(t, fixtures.Qwen36GenAI, "mtp.fc.weight", c.edit)
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "hf", "--into", repo, "--quiet"); code != 0 {
				t.Fatalf("export --into: exit %d, %s", code, stderr)
			}
			code, stdout, stderr := runCLI(t, "inspect", repo, "--strict")
			switch {
			case c.want == "" && (code != 0 || !strings.Contains(stdout, "from their stored values: OK")):
				t.Errorf("exit %d\n%s%s", code, stdout, stderr)
			case c.want != "" && (code != 1 || !strings.Contains(stdout, c.want)):
				t.Errorf("exit %d, want 1 and %q\n%s%s", code, c.want, stdout, stderr)
			}
		})
	}
}

// A 1-bit drafter (MLX's CPU kernel) is written only when asked with
// --allow-lossy-head (its concat projection's halves are lost); verify
// --src recomputes every tensor and inspect decodes every 1-bit matrix (it
// judged none: the decoder refused 1 bit for the Metal kernel's rounding,
// which decoding does not depend on).
func TestInt1DrafterVerifiedAndDecoded(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Gemma4Assistant)
	out := filepath.Join(t.TempDir(), "o")
	args := []string{"export", "--src", src, "--out", out, "--quiet", "--target", "mlx", "--head-precision", "int1"}
	if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, "add --mlx-rounding cpu") {
		t.Fatalf("int1 at the Metal kernel's rounding: exit %d: %s", code, stderr)
	}
	args = append(args, "--mlx-rounding", "cpu")
	if code, _, stderr := runCLI(t, args...); code != 1 || !strings.Contains(stderr, "draft at about 0 %") {
		t.Fatalf("int1 without --allow-lossy-head: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(args, "--allow-lossy-head")...); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	if _, stdout, _ := runCLI(t, "verify", "--src", src, out); !strings.Contains(stdout, "48 tensors (94 stored entries) checked, 48 recomputed from the source") {
		t.Errorf("verify --src:\n%s", stdout)
	}
	_, stdout, _ := runCLI(t, "inspect", out, "--json")
	var r struct {
		HeadHealth *struct {
			Checked   int      `json:"tensors_checked"`
			Unchecked []string `json:"unchecked"`
		} `json:"head_health"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.HeadHealth == nil || r.HeadHealth.Checked != 48 || len(r.HeadHealth.Unchecked) != 0 {
		t.Errorf("inspect --json: %v: %+v", err, r.HeadHealth)
	}
}
