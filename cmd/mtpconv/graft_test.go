package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/gguftrunk"
	"github.com/mtpconv/mtpconv/manifests"
)

// ggufTensors reads a GGUF file's header and each tensor's bytes.
func ggufTensors(t *testing.T, path string) (*gg.File, map[string][]byte) {
	t.Helper()
	f, _, err := gg.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, ti := range f.Tensors {
		n, _ := ti.Bytes()
		out[ti.Name] = raw[f.DataOffset+ti.Offset : f.DataOffset+ti.Offset+n]
	}
	return f, out
}

// writeGGUF writes a GGUF file of kvs and tensors (offsets placed here).
func writeGGUF(t *testing.T, path string, kvs []gg.KV, infos []gg.TensorInfo, data map[string][]byte) {
	t.Helper()
	sizes := make([]int64, len(infos))
	for i, ti := range infos {
		sizes[i] = int64(len(data[ti.Name]))
	}
	offs, total := gg.Place(sizes, gg.DefaultAlignment)
	for i := range infos {
		infos[i].Offset = offs[i]
	}
	hdr, err := gg.EncodeHeader(kvs, infos)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, int64(len(hdr))+total)
	copy(buf, hdr)
	for i, ti := range infos {
		copy(buf[int64(len(hdr))+offs[i]:], data[ti.Name])
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A bundled GGUF as the source: the sidecar split from it is the same file
// without the trunk's blocks, byte for byte what the sidecar export writes
// when the bundled file is that sidecar plus trunk blocks; the source is
// untouched; what does not apply is refused.
func TestGGUFSplitBundled(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	side := q8Sidecar(t, src)
	f, data := ggufTensors(t, side)
	// Trunk blocks 0..3 around the head: one tensor each, between and before the sidecar's.
	infos := []gg.TensorInfo{}
	for i, ti := range f.Tensors {
		if i%4 == 0 {
			name := "blk." + string(rune('0'+i/4%4)) + ".attn_norm.weight"
			if _, dup := data[name]; !dup {
				data[name] = bytes.Repeat([]byte{byte(i + 1)}, 4*128)
				infos = append(infos, gg.TensorInfo{Name: name, Dims: []int64{128}, Type: gg.F32})
			}
		}
		infos = append(infos, gg.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type})
	}
	bundled := filepath.Join(t.TempDir(), "Qwen-Tiny-Q8_0.gguf")
	writeGGUF(t, bundled, f.KV, infos, data)
	before, _ := os.ReadFile(bundled)

	split := filepath.Join(t.TempDir(), "split")
	code, stdout, stderr := runCLI(t, "export", "--src", bundled, "--target", "gguf", "--out", split)
	if code != 0 {
		t.Fatalf("split: %d %s", code, stderr)
	}
	if !strings.Contains(stdout, "exported") {
		t.Errorf("split summary: %s", stdout)
	}
	got, err := os.ReadFile(filepath.Join(split, "mtp-Qwen-Tiny-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(side)
	if !bytes.Equal(got, want) {
		t.Errorf("split sidecar (%d bytes) differs from the sidecar (%d bytes)", len(got), len(want))
	}
	if after, _ := os.ReadFile(bundled); !bytes.Equal(before, after) {
		t.Error("the source GGUF changed")
	}
	if code, stdout, _ := runCLI(t, "verify", split); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify: %d %s", code, stdout)
	}
	m, err := manifests.Load(split)
	if err != nil || m.Options["split_from"] != "Qwen-Tiny-Q8_0.gguf" || len(m.Files) != 1 {
		t.Errorf("manifest %+v, %v", m, err)
	}

	// Refusals: nothing written.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--src", side, "--target", "gguf"}, 1, "already an MTP-only sidecar"},
		{[]string{"--src", bundled, "--target", "mlx"}, 2, "only --target gguf"},
		{[]string{"--src", bundled, "--target", "gguf", "--head-precision", "int4"}, 2, "--head-precision does not apply to a GGUF source"},
	} {
		o := filepath.Join(t.TempDir(), "o")
		code, _, stderr := runCLI(t, append(append([]string{"export"}, c.args...), "--out", o)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
		if _, err := os.Stat(o); err == nil {
			t.Errorf("%v: %s written", c.args, o)
		}
	}
	// A trunk without a head has no sidecar to give.
	trunk := filepath.Join(t.TempDir(), "trunk.gguf")
	var trunkInfos []gg.TensorInfo
	for _, ti := range infos {
		if strings.HasPrefix(ti.Name, "blk.4.") {
			continue
		}
		trunkInfos = append(trunkInfos, ti)
	}
	var trunkKV []gg.KV
	for _, kv := range f.KV {
		switch kv.Key {
		case "qwen35moe.nextn_predict_layers":
			continue
		case "qwen35moe.block_count":
			kv.Value = gg.U32(4)
		}
		trunkKV = append(trunkKV, kv)
	}
	writeGGUF(t, trunk, trunkKV, trunkInfos, data)
	if code, _, stderr := runCLI(t, "export", "--src", trunk, "--target", "gguf", "--out", filepath.Join(t.TempDir(), "o")); code != 1 || !strings.Contains(stderr, "holds no MTP head") {
		t.Errorf("trunk without head: exit %d: %s", code, stderr)
	}
	// An output folder holding the source is refused, the source kept.
	dir := filepath.Join(t.TempDir(), "out")
	fakeOutput(t, dir)
	inside := filepath.Join(dir, "b.gguf")
	os.WriteFile(inside, before, 0o644)
	if code, _, stderr := runCLI(t, "export", "--src", inside, "--target", "gguf", "--out", dir, "--force"); code == 0 || !strings.Contains(stderr, "holds") {
		t.Errorf("--out holding the source: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(inside); !bytes.Equal(b, before) {
		t.Error("the source inside --out was lost")
	}
}

// graftTrunk writes the bf16 test trunk of src (the layout of the reference
// converter's --no-mtp file) and returns its path.
func graftTrunk(t *testing.T, src string) string {
	t.Helper()
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	trunk := filepath.Join(t.TempDir(), "Tiny-BF16.gguf")
	if err := gguftrunk.WriteTrunk(m, trunk); err != nil {
		t.Fatal(err)
	}
	return trunk
}

// trunkKept reports each trunk tensor whose bytes or type the graft changed
// and returns the graft's tensor types.
func trunkKept(t *testing.T, what string, tf *gg.File, tdata map[string][]byte, of *gg.File, odata map[string][]byte) map[string]gg.GGMLType {
	t.Helper()
	types := map[string]gg.GGMLType{}
	for _, ti := range of.Tensors {
		types[ti.Name] = ti.Type
	}
	for _, ti := range tf.Tensors {
		if !bytes.Equal(odata[ti.Name], tdata[ti.Name]) || types[ti.Name] != ti.Type {
			t.Errorf("%strunk tensor %s changed", what, ti.Name)
		}
	}
	return types
}

func graft(t *testing.T, src, trunk string, extra ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "g")
	args := append([]string{"export", "--src", src, "--target", "gguf", "--graft", trunk, "--out", out}, extra...)
	code, _, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("graft %v: %d %s", extra, code, stderr)
	}
	return filepath.Join(out, filepath.Base(trunk)), stderr
}

// --graft writes one GGUF named as the trunk: every trunk tensor with its
// bytes and type, the head's tensors those of the sidecar, the trunk's
// metadata but for block_count, nextn_predict_layers and recurrent_layers;
// the sidecar split from it is the sidecar's tensors; verify passes and
// catches a trunk tensor changed; --force replaces the head (the same
// bytes again); the trunk file is never written.
func TestGGUFGraft(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	before, _ := os.ReadFile(trunk)
	out, stderr := graft(t, src, trunk)
	if !strings.Contains(stderr, "the head is BF16") {
		t.Errorf("no precision note: %s", stderr)
	}
	tf, tdata := ggufTensors(t, trunk)
	of, odata := ggufTensors(t, out)
	types := trunkKept(t, "", tf, tdata, of, odata)
	side := filepath.Join(t.TempDir(), "side")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--out", side, "--quiet"); code != 0 {
		t.Fatal(stderr)
	}
	sf, sdata := ggufTensors(t, filepath.Join(side, "mtp-src-BF16.gguf"))
	head := 0
	for _, ti := range sf.Tensors {
		if strings.HasPrefix(ti.Name, "blk.4.") {
			head++
			if !bytes.Equal(odata[ti.Name], sdata[ti.Name]) || types[ti.Name] != ti.Type {
				t.Errorf("head tensor %s differs from the sidecar's", ti.Name)
			}
		}
	}
	if len(of.Tensors) != len(tf.Tensors)+head || head != 20 {
		t.Errorf("%d tensors: trunk %d + head %d", len(of.Tensors), len(tf.Tensors), head)
	}
	// Metadata: the trunk's, but the three keys, which are the sidecar's.
	changed := map[string]bool{"qwen35moe.block_count": true, "qwen35moe.nextn_predict_layers": true, "qwen35moe.attention.recurrent_layers": true}
	var want []gg.KV
	for _, kv := range tf.KV {
		if kv.Key == "qwen35moe.ssm.conv_kernel" {
			v, _ := sf.Lookup("qwen35moe.nextn_predict_layers")
			want = append(want, gg.Pair("qwen35moe.nextn_predict_layers", v))
		}
		if changed[kv.Key] {
			kv.Value, _ = sf.Lookup(kv.Key)
		}
		want = append(want, kv)
	}
	if fmt.Sprint(of.KV) != fmt.Sprint(want) {
		t.Errorf("metadata:\n got %v\nwant %v", of.KV, want)
	}
	if after, _ := os.ReadFile(trunk); !bytes.Equal(before, after) {
		t.Error("the trunk changed")
	}
	// The sidecar split from the graft holds the sidecar's tensors.
	split := filepath.Join(t.TempDir(), "split")
	if code, _, stderr := runCLI(t, "export", "--src", out, "--target", "gguf", "--out", split, "--quiet"); code != 0 {
		t.Fatal(stderr)
	}
	pf, pdata := ggufTensors(t, filepath.Join(split, "mtp-Tiny-BF16.gguf"))
	if len(pf.Tensors) != len(sf.Tensors) {
		t.Errorf("split: %d tensors, the sidecar %d", len(pf.Tensors), len(sf.Tensors))
	}
	for n, b := range sdata {
		if !bytes.Equal(pdata[n], b) {
			t.Errorf("split: %s differs", n)
		}
	}
	dir := filepath.Dir(out)
	if code, stdout, _ := runCLI(t, "verify", dir); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify: %d %s", code, stdout)
	}
	if code, stdout, _ := runCLI(t, "verify", dir, "--src", src); code != 0 || !strings.Contains(stdout, "20 recomputed from the source: OK") {
		t.Errorf("verify --src: %d %s", code, stdout)
	}
	// --force replaces the head a trunk holds: grafting onto the graft gives it again.
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", out, "--out", filepath.Join(t.TempDir(), "o")); code != 1 || !strings.Contains(stderr, "already holds an MTP head") {
		t.Errorf("graft onto a bundled file: exit %d: %s", code, stderr)
	}
	again, _ := graft(t, src, out, "--force")
	a, _ := os.ReadFile(again)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Error("--force onto the graft does not give the graft again")
	}
	// A trunk tensor changed in the output: verify fails, naming the file.
	raw, _ := os.ReadFile(out)
	ti := of.Tensors[len(of.Tensors)/2]
	for ti.Name[:6] == "blk.4." {
		ti = of.Tensors[1]
	}
	raw[of.DataOffset+ti.Offset] ^= 0x40
	os.WriteFile(out, raw, 0o644)
	if code, stdout, _ := runCLI(t, "verify", dir); code != 1 || !strings.Contains(stdout, "Tiny-BF16.gguf") {
		t.Errorf("verify after %s was changed: %d %s", ti.Name, code, stdout)
	}
}

// A trunk of another model is refused naming the key that differs; the
// flag belongs to --target gguf; --out may not hold the trunk.
func TestGGUFGraftRefusals(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	f, data := ggufTensors(t, trunk)
	edited := func(key string, v gg.Value) string {
		var kvs []gg.KV
		found := false
		for _, kv := range f.KV {
			if kv.Key == key {
				kv.Value, found = v, true
			}
			kvs = append(kvs, kv)
		}
		if !found {
			kvs = append(kvs, gg.Pair(key, v))
		}
		infos := append([]gg.TensorInfo{}, f.Tensors...)
		p := filepath.Join(t.TempDir(), "edited.gguf")
		writeGGUF(t, p, kvs, infos, data)
		return p
	}
	tokens, _ := f.Lookup("tokenizer.ggml.tokens")
	toks := append([]string{}, tokens.V.([]string)...)
	toks[17] = "other"
	for _, c := range []struct {
		trunk string
		want  string
	}{
		{edited("general.architecture", gg.Str("qwen3next")), "general.architecture"},
		{edited("qwen35moe.attention.head_count", gg.U32(8)), "qwen35moe.attention.head_count is 8"},
		{edited("qwen35moe.expert_count", gg.U32(8)), "qwen35moe.expert_count"},
		{edited("qwen35moe.block_count", gg.U32(3)), "qwen35moe.block_count"},
		{edited("tokenizer.ggml.tokens", gg.Strings(toks)), "tokenizer.ggml.tokens differs from the source's tokenizer at token 17"},
		{edited("split.count", gg.U32(3)), "edited.gguf: split.no is 0 of split.count 3"},
	} {
		o := filepath.Join(t.TempDir(), "o")
		code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", c.trunk, "--out", o)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d: %s", c.want, code, stderr)
		}
		if _, err := os.Stat(o); err == nil {
			t.Errorf("%s: output written", c.want)
		}
	}
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--graft", trunk, "--out", filepath.Join(t.TempDir(), "o")); code != 2 || !strings.Contains(stderr, "does not take --graft") {
		t.Errorf("mlx --graft: exit %d: %s", code, stderr)
	}
	dir := filepath.Join(t.TempDir(), "out")
	fakeOutput(t, dir)
	inside := filepath.Join(dir, "t.gguf")
	raw, _ := os.ReadFile(trunk)
	os.WriteFile(inside, raw, 0o644)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", inside, "--out", dir, "--force"); code != 1 || !strings.Contains(stderr, "which the export reads") {
		t.Errorf("--out holding the trunk: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(inside); !bytes.Equal(b, raw) {
		t.Error("the trunk inside --out was lost")
	}
}

// The head's precision follows the trunk's file type: what llama-quantize
// gives it in a file of that type, Q8_0 for a type mtpconv does not write;
// the summary says which; --gguf-type chooses.
func TestGGUFGraftHeadPrecision(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	f, data := ggufTensors(t, trunk)
	withType := func(ft uint32) string {
		var kvs []gg.KV
		for _, kv := range f.KV {
			if kv.Key == "general.file_type" {
				kv.Value = gg.U32(ft)
			}
			kvs = append(kvs, kv)
		}
		p := filepath.Join(t.TempDir(), "Tiny.gguf")
		writeGGUF(t, p, kvs, append([]gg.TensorInfo{}, f.Tensors...), data)
		return p
	}
	headTypes := func(path string) map[string]string {
		g, _, err := gg.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, ti := range g.Tensors {
			if strings.HasPrefix(ti.Name, "blk.4.") {
				out[strings.TrimPrefix(ti.Name, "blk.4.")] = ti.Type.String()
			}
		}
		return out
	}
	// Rows of 128 values are not whole 256-blocks: Q4_K falls back to Q5_0, Q6_K to Q8_0, as llama-quantize does.
	for _, c := range []struct {
		ft    uint32
		extra []string
		note  string
		want  map[string]string
	}{
		{15, nil, "what llama-quantize gives it in a file of the trunk's type Q4_K_M", map[string]string{"attn_q.weight": "Q5_0", "attn_v.weight": "Q8_0", "ffn_down_exps.weight": "Q8_0", "ffn_gate_inp.weight": "F32", "attn_norm.weight": "F32"}},
		{7, nil, "trunk's type Q8_0", map[string]string{"attn_q.weight": "Q8_0", "ffn_up_exps.weight": "Q8_0", "ffn_down_shexp.weight": "Q8_0", "ffn_gate_inp_shexp.weight": "F32"}},
		{30, nil, "the head is Q8_0: mtpconv does not write the trunk's type IQ4_XS", map[string]string{"attn_q.weight": "Q8_0", "nextn.eh_proj.weight": "Q8_0"}},
		// A low-bit trunk gives the head a safe type, and says why.
		{26, nil, "the head is Q8_0: the trunk's type IQ3_S is below 4 bits", map[string]string{"attn_q.weight": "Q8_0", "nextn.eh_proj.weight": "Q8_0", "ffn_down_exps.weight": "Q8_0"}},
		{10, nil, "the head is Q8_0: the trunk's type Q2_K is below 4 bits", map[string]string{"nextn.eh_proj.weight": "Q8_0", "attn_norm.weight": "F32"}},
		{15, []string{"--gguf-type", "BF16"}, "", map[string]string{"attn_q.weight": "BF16", "attn_norm.weight": "F32"}},
		{30, []string{"--head-precision", "f16"}, "", map[string]string{"attn_q.weight": "F16", "ffn_gate_exps.weight": "F16"}},
	} {
		out, stderr := graft(t, src, withType(c.ft), c.extra...)
		if !strings.Contains(stderr, c.note) {
			t.Errorf("file type %d %v: no note %q: %s", c.ft, c.extra, c.note, stderr)
		}
		got := headTypes(out)
		for n, typ := range c.want {
			if got[n] != typ {
				t.Errorf("file type %d %v: %s is %s, want %s", c.ft, c.extra, n, got[n], typ)
			}
		}
		if len(got) != 20 {
			t.Errorf("%d head tensors", len(got))
		}
	}
}

// inspect of a GGUF without a head prints the one command that adds it
// (from the Hub repository the file names when it names one), and that
// command works; a file with a head gets none.
func TestInspectGGUFAddHead(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	code, text, _ := runCLI(t, "inspect", trunk)
	cmd := "mtpconv export --src CHECKPOINT --target gguf --graft " + trunk + " --out Tiny-BF16-mtp"
	if code != 0 || !strings.Contains(text, "mtp head:      no; to add one") || !strings.Contains(text, cmd) {
		t.Fatalf("inspect: %d %s", code, text)
	}
	args := strings.Fields(strings.Replace(cmd, "CHECKPOINT", src, 1))[1:]
	out := filepath.Join(t.TempDir(), "Tiny-BF16-mtp")
	args[len(args)-1] = out
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("%v: %d %s", args, code, stderr)
	}
	_, js, _ := runCLI(t, "inspect", "--json", filepath.Join(out, "Tiny-BF16.gguf"))
	var s gg.Summary
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if !s.MTPHead || s.MTPOnly || s.AddHead != "" || s.BlockCount != 5 || len(s.Problems) != 0 {
		t.Errorf("grafted: %+v", s)
	}
	f, data := ggufTensors(t, trunk)
	named := filepath.Join(t.TempDir(), "my model.gguf")
	writeGGUF(t, named, append(append([]gg.KV{}, f.KV...), gg.Pair("general.base_model.0.repo_url", gg.Str("https://huggingface.co/Qwen/Qwen3.6-35B-A3B"))),
		append([]gg.TensorInfo{}, f.Tensors...), data)
	_, js, _ = runCLI(t, "inspect", "--json", named)
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if want := "mtpconv export --src hf://Qwen/Qwen3.6-35B-A3B --target gguf --graft '" + named + "' --out 'my model-mtp'"; s.AddHead != want {
		t.Errorf("add_head_command %q, want %q", s.AddHead, want)
	}
}

// The graft and the split are table-driven: for both GLM families (glm4moe
// and deepseek2) and each head precision, the head grafted into the
// family's bf16 trunk keeps every trunk tensor's bytes and type, verify
// passes against the source, and the sidecar split back is byte for byte
// the sidecar the export writes directly.
func TestGLMGraftSplit(t *testing.T) {
	t.Parallel()
	for _, fx := range []string{fixtures.GLM45, fixtures.GLM47Flash} {
		src := fixtures.Ensure(t, fx)
		trunk := graftTrunk(t, src)
		tf, tdata := ggufTensors(t, trunk)
		for _, typ := range []string{"BF16", "Q8_0", "Q4_K_M"} {
			name := fx + " " + typ
			out, _ := graft(t, src, trunk, "--gguf-type", typ)
			of, odata := ggufTensors(t, out)
			trunkKept(t, name+": ", tf, tdata, of, odata)
			if len(of.Tensors) <= len(tf.Tensors) {
				t.Errorf("%s: no head grafted (%d tensors)", name, len(of.Tensors))
			}
			if code, stdout, stderr := runCLI(t, "verify", filepath.Dir(out), "--src", src); code != 0 || !strings.Contains(stdout, "recomputed from the source: OK") {
				t.Errorf("%s: verify graft: %d %s %s", name, code, stdout, stderr)
			}
			direct := filepath.Join(t.TempDir(), "direct")
			if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--gguf-type", typ, "--out", direct, "--quiet"); code != 0 {
				t.Fatalf("%s: export: %s", name, stderr)
			}
			split := filepath.Join(t.TempDir(), "split")
			if code, _, stderr := runCLI(t, "export", "--src", out, "--target", "gguf", "--out", split, "--quiet"); code != 0 {
				t.Fatalf("%s: split: %s", name, stderr)
			}
			want, _ := filepath.Glob(filepath.Join(direct, "*.gguf"))
			got, _ := filepath.Glob(filepath.Join(split, "*.gguf"))
			if len(want) != 1 || len(got) != 1 {
				t.Fatalf("%s: sidecars %v %v", name, want, got)
			}
			// The split holds the graft's metadata (the trunk's, as grafted) and
			// the direct sidecar's tensors in the graft's order, those outside
			// blocks being the trunk's (a graft keeps every trunk tensor).
			wf, wdata := ggufTensors(t, want[0])
			var infos []gg.TensorInfo
			data := map[string][]byte{}
			for _, ti := range of.Tensors {
				if _, kept := wdata[ti.Name]; !kept {
					continue
				}
				b := wdata[ti.Name]
				if !strings.HasPrefix(ti.Name, "blk.") {
					b = tdata[ti.Name]
				}
				infos, data[ti.Name] = append(infos, gg.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}), b
			}
			if len(infos) != len(wf.Tensors) {
				t.Errorf("%s: the graft holds %d of the sidecar's %d tensors", name, len(infos), len(wf.Tensors))
			}
			expected := filepath.Join(t.TempDir(), "expected.gguf")
			writeGGUF(t, expected, of.KV, infos, data)
			wb, _ := os.ReadFile(expected)
			gb, _ := os.ReadFile(got[0])
			if !bytes.Equal(gb, wb) {
				t.Errorf("%s: split sidecar (%d bytes) differs from the sidecar with the trunk's metadata and top tensors (%d bytes)", name, len(gb), len(wb))
			}
			// At bf16 the trunk's top tensors are the sidecar's: every tensor the same bytes.
			if _, gdata := ggufTensors(t, got[0]); typ == "BF16" {
				for n, b := range wdata {
					if !bytes.Equal(gdata[n], b) {
						t.Errorf("%s: split tensor %s differs from the direct sidecar's", name, n)
					}
				}
			}
			if code, stdout, stderr := runCLI(t, "verify", split); code != 0 || !strings.Contains(stdout, "OK") {
				t.Errorf("%s: verify split: %d %s %s", name, code, stdout, stderr)
			}
		}
	}
}

// A bf16 graft onto a trunk in the reference converter's order (its bundled
// file without the NextN block) is that bundled file tensor for tensor, in
// its order: GLM's head comes from model.layers.{n}, which the converter
// visits before model.norm (output_norm), unlike Qwen's mtp.* after
// every trunk name.
func TestGLMGraftOrderLikeReference(t *testing.T) {
	t.Parallel()
	for _, fx := range []string{fixtures.GLM45, fixtures.GLM47Flash} {
		src := fixtures.Ensure(t, fx)
		tf, tdata := ggufTensors(t, graftTrunk(t, src))
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "gguf_reference", fx+"-bundled-bf16.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Tensors []struct{ Name, Type, SHA256 string }
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		byName := map[string]gg.TensorInfo{}
		for _, ti := range tf.Tensors {
			byName[ti.Name] = gg.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}
		}
		var infos []gg.TensorInfo
		for _, r := range ref.Tensors {
			if ti, ok := byName[r.Name]; ok {
				infos = append(infos, ti)
			}
		}
		if len(infos) != len(tf.Tensors) {
			t.Fatalf("%s: the reference holds %d of the trunk's %d tensors", fx, len(infos), len(tf.Tensors))
		}
		trunk := filepath.Join(t.TempDir(), "Ref-BF16.gguf")
		writeGGUF(t, trunk, tf.KV, infos, tdata)
		out, _ := graft(t, src, trunk)
		of, odata := ggufTensors(t, out)
		var got, want []string
		for _, ti := range of.Tensors {
			sum := sha256.Sum256(odata[ti.Name])
			got = append(got, ti.Name+" "+ti.Type.String()+" "+hex.EncodeToString(sum[:]))
		}
		for _, r := range ref.Tensors {
			want = append(want, r.Name+" "+r.Type+" "+r.SHA256)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the graft's tensors\n%s\nthe reference bundled file's\n%s", fx, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
