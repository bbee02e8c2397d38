package mlx_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	_ "github.com/mtpconv/mtpconv/convert/families"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// header reads a safetensors file's header.
func header(t *testing.T, path string) (*os.File, *st.Header) {
	t.Helper()
	f, fi, err := st.OpenRegular(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h, err := st.ReadHeader(f, fi.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	return f, h
}

// entryBytes is one entry's stored bytes.
func entryBytes(t *testing.T, f *os.File, e st.TensorInfo) []byte {
	t.Helper()
	b := make([]byte, e.Bytes())
	if _, err := f.ReadAt(b, e.Begin); err != nil {
		t.Fatal(err)
	}
	return b
}

// exportMLX loads src (closed when the test ends) and writes its --target
// mlx folder with o: the model and the folder.
func exportMLX(t *testing.T, src string, o targets.Options) (*model.Model, string) {
	t.Helper()
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	out := filepath.Join(t.TempDir(), "out")
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "mlx", Dest: export.Out(out), Options: o, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return m, out
}

// The Gemma-4 assistant's MLX folder is the checkpoint itself as
// mlx_vlm.convert writes it (interop/test_gemma4.py compares the bytes with
// mlx_vlm.convert's own): every source tensor under its name, float ones
// cast, token_ordering int64 -> int32 with the same values, every matrix
// whose rows divide into the groups quantized (the embedding and the
// centroids too, norms and layer_scalar float); config.json the source's
// whole configuration, top level sorted, indent 4, no final newline, the
// quantization block and an empty vision_config when quantized; the index
// naming every stored entry; the card says what the folder is and runs it
// next to a target; verify --src recomputes the int32 indices and finds one
// changed.
func TestWholeDrafter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fixture, prec string
		quantized     []string // linear weights that are quantized
		float         []string // tensors stored float
	}{
		{fixtures.Gemma4Assistant, "bf16", nil, []string{"model.embed_tokens.weight", "pre_projection.weight"}},
		{fixtures.Gemma4AssistantCentroid, "bf16", nil, []string{"masked_embedding.centroids.weight"}},
		{fixtures.Gemma4AssistantCentroid, "int4", []string{"model.embed_tokens.weight", "masked_embedding.centroids.weight", "pre_projection.weight",
			"post_projection.weight", "model.layers.3.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight"},
			[]string{"model.layers.0.layer_scalar", "model.norm.weight", "model.layers.3.self_attn.q_norm.weight"}},
	} {
		t.Run(c.fixture+"/"+c.prec, func(t *testing.T) {
			t.Parallel()
			src := fixtures.Ensure(t, c.fixture)
			m, out := exportMLX(t, src, targets.Options{HeadPrecision: c.prec})
			sf, sh := header(t, filepath.Join(src, "model.safetensors"))
			of, oh := header(t, filepath.Join(out, "model.safetensors"))
			var names, stored []string
			for _, e := range oh.Tensors {
				stored = append(stored, e.Name)
				if n, ok := strings.CutSuffix(e.Name, ".scales"); ok {
					if !slices.Contains(c.quantized, n+".weight") && c.prec != "int4" {
						t.Errorf("%s quantized at %s", n, c.prec)
					}
					continue
				}
				if !strings.HasSuffix(e.Name, ".biases") {
					names = append(names, e.Name)
				}
			}
			var want []string
			for _, e := range sh.Tensors {
				want = append(want, e.Name)
			}
			slices.Sort(names)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("tensors %v, the source's %v", names, want)
			}
			for _, n := range c.quantized {
				if e, _ := oh.Lookup(n); e.DType != st.U32 {
					t.Errorf("%s: %s, want quantized (U32 codes)", n, e.DType)
				}
			}
			for _, n := range c.float {
				if e, _ := oh.Lookup(n); e.DType != st.BF16 {
					t.Errorf("%s: %s, want BF16", n, e.DType)
				}
			}
			if e, ok := sh.Lookup("masked_embedding.token_ordering"); ok {
				o, _ := oh.Lookup(e.Name)
				if o.DType != st.I32 || !slices.Equal(o.Shape, e.Shape) {
					t.Fatalf("token_ordering %s %v", o.DType, o.Shape)
				}
				in, got := entryBytes(t, sf, e), entryBytes(t, of, o)
				for i := range e.Elements() {
					if int64(binary.LittleEndian.Uint64(in[8*i:])) != int64(int32(binary.LittleEndian.Uint32(got[4*i:]))) {
						t.Fatalf("token_ordering[%d] differs", i)
					}
				}
			}
			// config.json
			cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(cfg, []byte("{\n    \"architectures\": [\n        ")) || bytes.HasSuffix(cfg, []byte("\n")) {
				t.Errorf("config.json is not json.dump's indent 4:\n%s", cfg)
			}
			obj, err := jsonobj.Decode(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, kv := range obj {
				keys = append(keys, kv.Key)
			}
			if !slices.IsSorted(keys) || slices.Contains(keys, "torch_dtype") {
				t.Errorf("config.json keys %v", keys)
			}
			var got, source map[string]any
			srcCfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
			if json.Unmarshal(cfg, &got) != nil || json.Unmarshal(srcCfg, &source) != nil {
				t.Fatal("config.json does not decode")
			}
			if c.prec == "int4" {
				for _, k := range []string{"quantization", "quantization_config"} { // quantize_model's order
					if q := "\"" + k + "\": {\n        \"group_size\": 64,\n        \"bits\": 4,\n        \"mode\": \"affine\"\n    }"; !bytes.Contains(cfg, []byte(q)) {
						t.Errorf("config.json lacks %s", q)
					}
				}
				if v, ok := got["vision_config"].(map[string]any); !ok || len(v) != 0 {
					t.Errorf("vision_config %v", got["vision_config"])
				}
				delete(got, "quantization")
				delete(got, "quantization_config")
				delete(got, "vision_config")
			}
			delete(source, "torch_dtype")
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(source)
			if !bytes.Equal(a, b) {
				t.Errorf("config.json holds\n%s\nnot the source's\n%s", a, b)
			}
			// The index.
			var idx struct {
				Metadata struct {
					TotalSize int64 `json:"total_size"`
				} `json:"metadata"`
				WeightMap map[string]string `json:"weight_map"`
			}
			raw, err := os.ReadFile(filepath.Join(out, st.IndexFile))
			if err != nil || json.Unmarshal(raw, &idx) != nil {
				t.Fatalf("index: %v", err)
			}
			var total int64
			for _, e := range oh.Tensors {
				total += e.Bytes()
				if idx.WeightMap[e.Name] != "model.safetensors" {
					t.Errorf("index: %s in %q", e.Name, idx.WeightMap[e.Name])
				}
			}
			if len(idx.WeightMap) != len(stored) || idx.Metadata.TotalSize != total {
				t.Errorf("index: %d entries of %d, total_size %d of %d", len(idx.WeightMap), len(stored), idx.Metadata.TotalSize, total)
			}
			card, err := os.ReadFile(filepath.Join(out, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"the Gemma-4 assistant, a separate drafter model that shares its target's KV cache, as the MLX folder mlx-vlm drafts with",
				`model, processor = load("TARGET")`, "- MLP: dense, in every block of the drafter", "| head | I32 | 1 |"} {
				if strings.Contains(want, "I32") && c.fixture != fixtures.Gemma4AssistantCentroid {
					continue
				}
				if !strings.Contains(string(card), want) {
					t.Errorf("the card lacks %q:\n%s", want, card)
				}
			}
			verifyWhole(t, m, out, sh, oh)
		})
	}
}

// verifyWhole runs verify --src on the folder (every tensor recomputed),
// then on a copy whose last index value is changed (found).
func verifyWhole(t *testing.T, m *model.Model, out string, sh, oh *st.Header) {
	t.Helper()
	rep, err := manifests.Verify(context.Background(), out, m.Checkpoint)
	if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != len(sh.Tensors) {
		t.Fatalf("verify --src: %v %+v", err, rep)
	}
	e, ok := oh.Lookup("masked_embedding.token_ordering")
	if !ok {
		return
	}
	f, err := os.OpenFile(filepath.Join(out, "model.safetensors"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x7f}, e.End-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err = manifests.Verify(context.Background(), out, m.Checkpoint)
	if err != nil || rep.OK || !slices.ContainsFunc(rep.Problems, func(p manifests.Problem) bool {
		return p.Kind == "values_differ" && p.Tensor == e.Name
	}) {
		t.Errorf("verify --src of a changed index: %v %+v", err, rep.Problems)
	}
}

// A quantized assistant's scales and float tensors take the dtype
// mlx_vlm.convert casts to before it quantizes (config.json's torch_dtype,
// else text_config.dtype), as interop/test_gemma4.py checks byte for byte:
// float16 or float32 where the config says so (they were bf16 whatever it
// said), bf16 where it says bfloat16; a float precision stays the flag's.
func TestWholeDrafterQuantizedInConfigDType(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Gemma4Assistant)
	withDType := func(top, text string) string {
		dir := t.TempDir()
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if e.Name() == model.ConfigFile {
				var cfg map[string]any
				if err := json.Unmarshal(b, &cfg); err != nil {
					t.Fatal(err)
				}
				if top != "" {
					cfg["torch_dtype"] = top
				}
				cfg["text_config"].(map[string]any)["dtype"] = text
				b, _ = json.MarshalIndent(cfg, "", "  ")
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct {
		top, text, prec string
		scales, norm    st.DType
	}{
		{"", "float16", "int4", st.F16, st.F16},
		{"float32", "bfloat16", "int8", st.F32, st.F32}, // torch_dtype first
		{"", "float32", "mxfp4", st.U8, st.F32},
		{"", "bfloat16", "int4", st.BF16, st.BF16},
		{"", "float16", "bf16", "", st.BF16},
	} {
		_, out := exportMLX(t, withDType(c.top, c.text), targets.Options{HeadPrecision: c.prec, Set: map[string]bool{targets.OptHeadPrecision: true}})
		_, h := header(t, filepath.Join(out, "model.safetensors"))
		got := map[string]st.DType{}
		for _, e := range h.Tensors {
			got[e.Name] = e.DType
		}
		if got["pre_projection.scales"] != c.scales || got["model.norm.weight"] != c.norm {
			t.Errorf("torch_dtype %q text_config.dtype %q at %s: scales %s, norm %s; want %s, %s", c.top, c.text, c.prec, got["pre_projection.scales"], got["model.norm.weight"], c.scales, c.norm)
		}
	}
}
