package gguf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/manifests"

	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
)

func exportTo(t *testing.T, src, precision string) string {
	t.Helper()
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	o := targets.Options{HeadPrecision: precision, Set: map[string]bool{targets.OptHeadPrecision: precision != ""}}
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Options: o, Dest: export.Out(out), NoCard: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.gguf"))
	if len(files) != 1 {
		t.Fatalf("%d GGUF files in %s", len(files), out)
	}
	return files[0]
}

// verifiedTensors runs verify --src on the export at path of the fixture
// folder src, fails unless every tensor is recomputed and holds, and
// returns how many there are.
func verifiedTensors(t *testing.T, src, path string) int {
	t.Helper()
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	rep, err := manifests.Verify(context.Background(), filepath.Dir(path), m.Checkpoint)
	if err != nil || !rep.OK || rep.Recomputed != rep.Tensors {
		t.Fatalf("%s: verify --src: %v %+v", src, err, rep)
	}
	return rep.Tensors
}

// cardOf exports a fixture with its card and returns the card.
func cardOf(t *testing.T, fixture string) string {
	t.Helper()
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixture)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Dest: export.Out(out), Version: "test"}); err != nil {
		t.Fatal(err)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(card)
}

type refValue struct {
	Type   string          `json:"type"`
	Elem   string          `json:"elem"`
	Len    int             `json:"len"`
	SHA256 string          `json:"sha256"`
	Value  json.RawMessage `json:"value"`
}

type reference struct {
	Metadata map[string]refValue `json:"metadata"`
	Tensors  []struct {
		Name   string  `json:"name"`
		Type   string  `json:"type"`
		Dims   []int64 `json:"dims"`
		SHA256 string  `json:"sha256"`
	} `json:"tensors"`
}

// Keys the reference derives from the model card and folder name, which we do not reproduce.
var provenance = map[string]bool{"general.name": true, "general.size_label": true}

// pyJSON is Python's json.dumps(v, ensure_ascii=False) of a metadata array,
// which is what interop/reference_gguf.py hashes.
func pyJSON(v gg.Value) string {
	var b strings.Builder
	b.WriteByte('[')
	xs := reflect.ValueOf(v.V)
	for i := range xs.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		switch x := xs.Index(i).Interface().(type) {
		case string:
			b.WriteByte('"')
			for _, r := range x {
				switch {
				case r == '"' || r == '\\':
					b.WriteByte('\\')
					b.WriteRune(r)
				case r == '\n':
					b.WriteString(`\n`)
				case r == '\r':
					b.WriteString(`\r`)
				case r == '\t':
					b.WriteString(`\t`)
				case r < 0x20:
					fmt.Fprintf(&b, `\u%04x`, r)
				default:
					b.WriteRune(r)
				}
			}
			b.WriteByte('"')
		case bool:
			b.WriteString(strconv.FormatBool(x))
		case float32:
			b.WriteString(pyFloat(float64(x)))
		default:
			n, _ := gg.Value{V: x}.Int()
			b.WriteString(strconv.FormatInt(n, 10))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// pyFloat is Python's repr of a float: the shortest round-trip digits,
// positional from 1e-4 to 1e16 with at least one decimal, else an exponent.
func pyFloat(f float64) string {
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.FormatFloat(f, 'e', -1, 64) // 1e-05, as Python
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

var refTypes = map[gg.ValueType]string{gg.TypeUint32: "UINT32", gg.TypeInt32: "INT32", gg.TypeFloat32: "FLOAT32", gg.TypeBool: "BOOL", gg.TypeString: "STRING"}

// Our BF16 and F16 sidecars hold llama.cpp's reference converter's tensors
// (names, types, dims, sha256 of the bytes) and metadata, key for key but
// for the provenance keys, as recorded by interop/reference_gguf.py: the
// MoE fixtures and the dense one (arch qwen35).
func TestSidecarEqualsReference(t *testing.T) {
	for _, fx := range append(append([]string{}, fixtures.All...), fixtures.Qwen36Dense) {
		for _, prec := range []string{"bf16", "f16"} {
			t.Run(fx+"/"+prec, func(t *testing.T) {
				raw := referenceRecord(t, fx, prec)
				path := exportTo(t, testmodel.WithTokenizer(t, fx), prec)
				data, f := readGGUF(t, path)
				equalsReference(t, data, f, raw)
				if !strings.HasPrefix(filepath.Base(path), "mtp-") || !strings.HasSuffix(path, "-"+strings.ToUpper(prec)+".gguf") {
					t.Errorf("file name %s", filepath.Base(path))
				}
			})
		}
	}
}

// equalsReference compares a GGUF file (its bytes and parsed header) with a
// reference record: every tensor (name, type, dims, sha256 of its bytes),
// every metadata key and value but the provenance ones, and no key more.
func equalsReference(t *testing.T, data []byte, f *gg.File, raw []byte) {
	t.Helper()
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	got := map[string]gg.TensorInfo{}
	for _, ti := range f.Tensors {
		got[ti.Name] = ti
	}
	if len(got) != len(ref.Tensors) {
		t.Errorf("%d tensors, the reference has %d", len(got), len(ref.Tensors))
	}
	for _, rt := range ref.Tensors {
		ti, ok := got[rt.Name]
		if !ok {
			t.Errorf("tensor %s missing", rt.Name)
			continue
		}
		n, _ := ti.Bytes()
		sum := sha256.Sum256(data[f.DataOffset+ti.Offset : f.DataOffset+ti.Offset+n])
		if ti.Type.String() != rt.Type || fmt.Sprint(ti.Dims) != fmt.Sprint(rt.Dims) || hex.EncodeToString(sum[:]) != rt.SHA256 {
			t.Errorf("tensor %s: %s %v %x; the reference has %s %v %s", rt.Name, ti.Type, ti.Dims, sum[:6], rt.Type, rt.Dims, rt.SHA256[:12])
		}
	}
	metadataEqualsReference(t, f, ref, nil)
}

// metadataEqualsReference compares every metadata key and value of f but
// the provenance ones with a reference record's, and finds no key more.
// more says what a file holding more than the record adds: a number the key
// is larger by, and keys the record lacks (a NaN).
func metadataEqualsReference(t *testing.T, f *gg.File, ref reference, more map[string]float64) {
	t.Helper()
	for k, rv := range ref.Metadata {
		if provenance[k] {
			continue
		}
		v, ok := f.Lookup(k)
		if !ok {
			t.Errorf("metadata %s missing", k)
			continue
		}
		if v.Type == gg.TypeArray {
			s := sha256.Sum256([]byte(pyJSON(v)))
			if rv.Type != "arr" || hex.EncodeToString(s[:]) != rv.SHA256 || v.Len() != rv.Len {
				t.Errorf("metadata %s: %d elements hashing %x; the reference has %d hashing %s", k, v.Len(), s[:6], rv.Len, rv.SHA256[:12])
			}
			continue
		}
		var want any
		json.Unmarshal(rv.Value, &want)
		if d, ok := more[k]; ok {
			want = want.(float64) + d
		}
		var gotV any = v.V
		if n, ok := v.Int(); ok {
			gotV = float64(n)
		} else if x, ok := v.V.(float32); ok {
			gotV = float64(x)
		}
		if refTypes[v.Type] != rv.Type || gotV != want {
			t.Errorf("metadata %s: %s %v; the reference has %s %v", k, v.Type, v.V, rv.Type, want)
		}
	}
	for _, kv := range f.KV {
		if _, ok := ref.Metadata[kv.Key]; !ok && !provenance[kv.Key] {
			if d, ok := more[kv.Key]; !ok || !math.IsNaN(d) {
				t.Errorf("metadata %s is not in the reference", kv.Key)
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.Qwen36)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	tg, _ := targets.LookupTarget("gguf")
	if _, err := tg.Plan(m, targets.Options{}); err == nil || !strings.Contains(err.Error(), "tokenizer.json is missing") {
		t.Errorf("no tokenizer: %v", err)
	}
	for _, p := range []string{"int2", "fp8"} {
		if _, err := tg.Plan(m, targets.Options{HeadPrecision: p}); err == nil || !strings.Contains(err.Error(), "--head-precision") {
			t.Errorf("--head-precision %s: %v", p, err)
		}
	}
	if err := targets.CheckOptions(tg, targets.Options{Set: map[string]bool{targets.OptGroupSize: true}}); err == nil {
		t.Error("--group-size was accepted")
	}
}

// verify --src quantizes the source again and finds a changed block.
func TestVerifyRecomputesQ8_0(t *testing.T) {
	src := testmodel.WithTokenizer(t, fixtures.Qwen36)
	path := exportTo(t, src, "int8")
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	dir := filepath.Dir(path)
	rep, err := manifests.Verify(context.Background(), dir, m.Checkpoint)
	if err != nil || rep.Unsafe() || len(rep.Problems) != 0 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	man, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, tn := range man.Tensors {
		if tn.Name == "blk.4.ffn_up_exps.weight" {
			if q, ok := tn.Has(manifests.TQuantize); !ok || q.GGMLType != "Q8_0" {
				t.Fatalf("%s records no Q8_0 quantization", tn.Name)
			}
			off = tn.Entries[0].Offset + 1000
		}
	}
	data, _ := os.ReadFile(path)
	data[off] ^= 1
	os.WriteFile(path, data, 0o644)
	rep, err = manifests.Verify(context.Background(), dir, m.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, p := range rep.Problems {
		kinds[p.Kind] = true
	}
	if !kinds["values_differ"] || !kinds["tensor_hash"] {
		t.Errorf("a changed block: problems %+v", rep.Problems)
	}
}

// verify --src judges each written tensor's type by the kinds' rules, not
// by the manifest alone: a manifest saying the file is Q4_K_M while every
// tensor agrees with it as Q8_0 is caught, tensor by tensor.
func TestVerifyChecksTypesByKind(t *testing.T) {
	src := testmodel.WithTokenizer(t, fixtures.Qwen36)
	path := exportTo(t, src, "int8")
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	dir := filepath.Dir(path)
	mp := filepath.Join(dir, "mtpconv-manifest.json")
	raw, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, bytes.Replace(raw, []byte(`"precision": "int8"`), []byte(`"precision": "int4"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := manifests.Verify(context.Background(), dir, m.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]bool{}
	for _, p := range rep.Problems {
		if p.Kind == "tensor_type" {
			bad[p.Tensor] = true
		}
	}
	if !bad["token_embd.weight"] || !bad["blk.4.nextn.eh_proj.weight"] || !bad["blk.4.attn_q.weight"] || bad["blk.4.ffn_gate_inp.weight"] || bad["blk.4.attn_norm.weight"] {
		t.Errorf("types judged as Q4_K_M: %v (problems %+v)", bad, rep.Problems)
	}
}
