package testmodel

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// TrunkStorage is how a test HF repo stores the trunk's 2-D projection
// weights (zero bytes: the repos exercise configs, names and dtypes; they
// are not run).
type TrunkStorage int

const (
	TrunkFloat  TrunkStorage = iota // as the fixture (bf16)
	TrunkInt8                       // compressed-tensors W8A8: weight I8 + weight_scale
	TrunkPacked                     // GPTQ / AWQ: qweight, qzeros, scales
)

// HFRepo is a test Hugging Face repo: a fixture's trunk without its MTP head
// (as a quantizer that drops the head writes it), with a quantization_config.
type HFRepo struct {
	Fixture string
	Quant   string // quantization_config JSON, "" for none
	Storage TrunkStorage
	Single  bool                   // one model.safetensors and no index
	NoDepth bool                   // config.json without its MTP depth key
	Keep    func(name string) bool // head tensors kept in the repo's own files
	// HeadStorage stores the kept head's 2-D projections (mtp.fc included)
	// as Storage stores the trunk's; NoHeadScales then drops their
	// companions (weight_scale; qzeros and scales), as a broken quantizer
	// does (imp#1428).
	HeadStorage  TrunkStorage
	NoHeadScales bool
	// Depth, when not 0, is the MTP depth config.json declares.
	Depth int
	// CutLayerLists cuts the family's HeadLayerLists to the trunk's layers,
	// as a quantizer that re-saves the config through transformers writes
	// them (Step-3.7-Flash-NVFP4: its lists stop at num_hidden_layers).
	CutLayerLists bool
	// TextOnly writes a vision-language fixture as the text-only causal LM
	// quantizers release (Qwen3_5MoeForCausalLM, model_type
	// qwen3_5_moe_text): text_config at the root, model.language_model.* as
	// model.*, no vision tower.
	TextOnly bool
}

// Write writes the repo into a temporary folder and returns it.
func (rs HFRepo) Write(t testing.TB) string {
	t.Helper()
	src := fixtures.Ensure(t, rs.Fixture)
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	cfgRaw, err := os.ReadFile(filepath.Join(src, model.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig(cfgRaw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Describe(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	type tensor struct {
		e    st.Entry
		data []byte
	}
	var ts []tensor
	for _, name := range ck.Names {
		if m.IsHead(name) && (rs.Keep == nil || !rs.Keep(name)) {
			continue
		}
		n := name
		if rs.TextOnly {
			if m.Group(name) == model.GroupVision {
				continue
			}
			if rest, ok := strings.CutPrefix(name, "model.language_model."); ok {
				n = "model." + rest
			}
		}
		src := ck.Tensors[name]
		data, err := ck.ReadTensor(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		storage, scales := rs.Storage, true
		linear := len(src.Shape) == 2 && strings.HasSuffix(n, "proj.weight")
		if m.IsHead(name) {
			storage, scales = rs.HeadStorage, !rs.NoHeadScales
			linear = len(src.Shape) == 2 && (strings.HasSuffix(n, "proj.weight") || strings.HasSuffix(n, "fc.weight"))
		}
		switch {
		case linear && storage == TrunkInt8:
			ts = append(ts, tensor{st.Entry{Name: n, DType: "I8", Shape: src.Shape}, make([]byte, src.Elements())})
			if scales {
				ts = append(ts, tensor{st.Entry{Name: strings.TrimSuffix(n, "weight") + "weight_scale", DType: st.F32, Shape: []int64{src.Shape[0], 1}}, make([]byte, 4*src.Shape[0])})
			}
		case linear && storage == TrunkPacked && src.Shape[1]%32 == 0 && src.Shape[0]%8 == 0:
			// Packed 8 to an int32 along the input, in groups of 32 (a
			// projection of other dimensions is left float, as GPTQ/AWQ
			// tools leave what their kernels cannot take).
			mod := strings.TrimSuffix(n, ".weight")
			out, in := src.Shape[0], src.Shape[1]
			ts = append(ts, tensor{st.Entry{Name: mod + ".qweight", DType: "I32", Shape: []int64{in / 8, out}}, make([]byte, in/8*out*4)})
			if scales {
				ts = append(ts, tensor{st.Entry{Name: mod + ".qzeros", DType: "I32", Shape: []int64{in / 32, out / 8}}, make([]byte, in/32*out/8*4)},
					tensor{st.Entry{Name: mod + ".scales", DType: st.F16, Shape: []int64{in / 32, out}}, make([]byte, in/32*out*2)})
			}
		default:
			ts = append(ts, tensor{st.Entry{Name: n, DType: src.DType, Shape: src.Shape}, data})
		}
	}
	slices.SortFunc(ts, func(a, b tensor) int { return strings.Compare(a.e.Name, b.e.Name) })
	write := func(file string, part []tensor) {
		var es []st.Entry
		for _, x := range part {
			es = append(es, x.e)
		}
		var b bytes.Buffer
		w, err := st.NewWriter(&b, es, map[string]string{"format": "pt"})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range part {
			if _, err := w.Write(x.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rs.Single {
		write(st.SingleFile, ts)
	} else {
		half := len(ts) / 2
		files := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
		write(files[0], ts[:half])
		write(files[1], ts[half:])
		wm := map[string]string{}
		var total int64
		for i, x := range ts {
			wm[x.e.Name] = files[min(i/half, 1)]
			total += int64(len(x.data))
		}
		idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": wm}, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, st.IndexFile), append(idx, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var root map[string]any
	if err := json.Unmarshal(cfgRaw, &root); err != nil {
		t.Fatal(err)
	}
	if tc, ok := root["text_config"].(map[string]any); ok && rs.TextOnly {
		arch := strings.Replace(root["architectures"].([]any)[0].(string), "ForConditionalGeneration", "ForCausalLM", 1)
		root = tc
		root["architectures"] = []string{arch}
	}
	if rs.Quant != "" {
		var q any
		if err := json.Unmarshal([]byte(rs.Quant), &q); err != nil {
			t.Fatal(err)
		}
		root["quantization_config"] = q
	}
	if rs.Depth != 0 {
		for _, obj := range []map[string]any{root, asObject(root["text_config"])} {
			for _, k := range []string{"mtp_num_hidden_layers", "num_nextn_predict_layers"} {
				if _, ok := obj[k]; ok {
					obj[k] = rs.Depth
				}
			}
		}
	}
	if rs.CutLayerLists {
		for _, obj := range []map[string]any{root, asObject(root["text_config"])} {
			for _, k := range m.Family.HeadLayerLists {
				if l, ok := obj[k].([]any); ok && len(l) > cfg.NumHiddenLayers {
					obj[k] = l[:cfg.NumHiddenLayers]
				}
			}
		}
	}
	if rs.NoDepth {
		delete(root, "mtp_num_hidden_layers")
		delete(root, "num_nextn_predict_layers")
		if tc, ok := root["text_config"].(map[string]any); ok {
			delete(tc, "mtp_num_hidden_layers")
		}
	}
	out, _ := json.MarshalIndent(root, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, model.ConfigFile), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asObject is v as a JSON object (nil when it is not one).
func asObject(v any) map[string]any {
	o, _ := v.(map[string]any)
	return o
}

// WholeHeadRepo writes a repo of a family mtpconv does not read (judged by
// its MTP class's rule for the whole head): config.json cfg and a
// model.safetensors of the named tensors, 2 × 2 zeros of their dtypes.
func WholeHeadRepo(t testing.TB, cfg string, tensors map[string]st.DType) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, model.ConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var entries []st.Entry
	var body []byte
	for _, n := range slices.Sorted(maps.Keys(tensors)) {
		entries = append(entries, st.Entry{Name: n, DType: tensors[n], Shape: []int64{2, 2}})
		size := map[st.DType]int{st.F32: 4, st.BF16: 2, st.F8E4M3: 1, st.I8: 1, st.U8: 1}[tensors[n]]
		if size == 0 {
			t.Fatalf("WholeHeadRepo: no size for %s's dtype %s", n, tensors[n])
		}
		body = append(body, make([]byte, 4*size)...)
	}
	var out bytes.Buffer
	w, err := st.NewWriter(&out, entries, map[string]string{"format": "pt"})
	if err == nil {
		_, err = w.Write(body)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, st.SingleFile), out.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
