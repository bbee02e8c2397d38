package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// headlessMLXFolder lays out an MLX model folder as mlx_lm.convert writes
// one (the interop suite runs mlx_lm.convert itself): our combined export's
// trunk, without the mtp.* tensors and their config entries, with mlx-lm's
// index (sorted weight_map, total_size) and its config layout (sorted keys,
// four-space indent, no final newline).
func headlessMLXFolder(t *testing.T, args ...string) string {
	t.Helper()
	return headlessMLXFolderOf(t, fixtures.Qwen36, args...)
}

func headlessMLXFolderOf(t *testing.T, fixture string, args ...string) string {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "c")
	exportTo(t, fixture, tmp, append([]string{"--target", "combined", "--no-card"}, args...)...)
	dir := filepath.Join(t.TempDir(), "mlx")
	os.MkdirAll(dir, 0o755)

	raw, _ := os.ReadFile(filepath.Join(tmp, "model.safetensors"))
	hdr, err := st.ReadHeader(bytes.NewReader(raw), int64(len(raw)), "model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	var entries []st.Entry
	var data [][]byte
	weightMap := map[string]string{}
	var total int64
	for _, ti := range hdr.Tensors {
		if strings.HasPrefix(ti.Name, "mtp.") {
			continue
		}
		entries = append(entries, st.Entry{Name: ti.Name, DType: ti.DType, Shape: ti.Shape})
		data = append(data, raw[ti.Begin:ti.End])
		weightMap[ti.Name] = "model.safetensors"
		total += ti.End - ti.Begin
	}
	var b bytes.Buffer
	w, err := st.NewWriter(&b, entries, map[string]string{"format": "mlx"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		w.Write(d)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(name string, body []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("model.safetensors", b.Bytes())
	idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "    ")
	write(st.IndexFile, idx)

	var cfg map[string]any
	c, _ := os.ReadFile(filepath.Join(tmp, "config.json"))
	if err := json.Unmarshal(c, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"quantization", "quantization_config"} {
		if q, ok := cfg[k].(map[string]any); ok {
			for m := range q {
				if strings.HasPrefix(m, "mtp.") {
					delete(q, m)
				}
			}
		}
	}
	c, _ = json.MarshalIndent(cfg, "", "    ")
	write("config.json", c)
	write("tokenizer_config.json", []byte(`{"tokenizer_class": "Qwen2Tokenizer"}`))
	return dir
}

// safetensorsEntries reads a safetensors file's tensors' bytes by name.
func safetensorsEntries(t *testing.T, path string, keep func(string) bool) map[string][]byte {
	t.Helper()
	raw, h := readSafetensors(t, path)
	out := map[string][]byte{}
	for _, ti := range h.Tensors {
		if keep(ti.Name) {
			out[ti.Name] = append([]byte(string(ti.DType)+"|"), raw[ti.Begin:ti.End]...)
		}
	}
	return out
}

// readSafetensors reads a safetensors file whole, with its parsed header.
func readSafetensors(t *testing.T, path string) ([]byte, *st.Header) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.ReadHeader(bytes.NewReader(raw), int64(len(raw)), filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return raw, h
}

// editSafetensors rewrites a safetensors file tensor by tensor, in order:
// edit gets each tensor's entry (to change) and bytes, and returns the bytes
// to write, or nil to drop the tensor. It fails unless some tensor was
// changed or dropped.
func editSafetensors(t *testing.T, path string, edit func(e *st.Entry, data []byte) []byte) {
	t.Helper()
	raw, h := readSafetensors(t, path)
	var entries []st.Entry
	var data bytes.Buffer
	changed := false
	for _, ti := range h.Tensors {
		e := st.Entry{Name: ti.Name, DType: ti.DType, Shape: ti.Shape}
		b := edit(&e, raw[ti.Begin:ti.End])
		changed = changed || b == nil || e.DType != ti.DType || !slices.Equal(e.Shape, ti.Shape) || len(b) != len(raw[ti.Begin:ti.End])
		if b != nil {
			entries = append(entries, e)
			data.Write(b)
		}
	}
	if !changed {
		t.Fatalf("%s: no tensor changed", path)
	}
	var out bytes.Buffer
	w, err := st.NewWriter(&out, entries, h.Metadata)
	if err == nil {
		_, err = w.Write(data.Bytes())
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = os.WriteFile(path, out.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func isHead(n string) bool { return strings.HasPrefix(n, "mtp.") }

// sameHeadAsCombined checks that the head file of a grafted folder holds
// exactly the head tensors of a --target combined export of fixture with
// args, and returns them (dtype-prefixed bytes by name).
func sameHeadAsCombined(t *testing.T, dir, fixture string, args ...string) map[string][]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixture, out, append([]string{"--target", "combined"}, args...)...)
	want := safetensorsEntries(t, filepath.Join(out, "model.safetensors"), isHead)
	got := safetensorsEntries(t, filepath.Join(dir, "model-mtp.safetensors"), func(string) bool { return true })
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("head file holds %d tensors, the combined file %d head tensors", len(got), len(want))
	}
	for n, b := range want {
		if !bytes.Equal(got[n], b) {
			t.Errorf("%s differs from the combined file's", n)
		}
	}
	return got
}

// refusedUnchanged runs a command that must fail with code, its stderr
// holding want, and leave dir as it was.
func refusedUnchanged(t *testing.T, dir string, code int, want string, args ...string) {
	t.Helper()
	snap := tree(t, dir)
	got, _, stderr := runCLI(t, args...)
	if got != code || !strings.Contains(stderr, want) {
		t.Errorf("exit %d (want %d): %s (want %q)", got, code, stderr, want)
	}
	if d := diffTrees(snap, tree(t, dir)); d != "" {
		t.Errorf("refused command changed %s", d)
	}
}

func TestIntoMLXAddsTheHead(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	before := tree(t, dir)
	origConfig, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	origIndex, _ := os.ReadFile(filepath.Join(dir, st.IndexFile))
	into := func(extra ...string) (int, string) {
		code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "combined", "--into", dir, "--quiet", "--mlx-rounding", "cpu"}, extra...)...)
		return code, stderr
	}
	if code, stderr := into(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	after := tree(t, dir)
	var changed, added []string
	for p, h := range before {
		if after[p] != h {
			changed = append(changed, filepath.Base(p))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			rel, _ := filepath.Rel(dir, p)
			added = append(added, rel)
		}
	}
	sort.Strings(changed)
	sort.Strings(added)
	if got := strings.Join(changed, ","); got != "config.json,model.safetensors.index.json" {
		t.Errorf("changed %s (the trunk must keep its bytes)", got)
	}
	if got := strings.Join(added, ","); got != "model-mtp.safetensors,mtpconv-manifest.json,mtpconv-original,mtpconv-original/config.json,mtpconv-original/model.safetensors.index.json" {
		t.Errorf("added %s", got)
	}
	for name, orig := range map[string][]byte{"config.json": origConfig, st.IndexFile: origIndex} {
		kept, _ := os.ReadFile(filepath.Join(dir, "mtpconv-original", name))
		if !bytes.Equal(kept, orig) {
			t.Errorf("mtpconv-original/%s is not the folder's original", name)
		}
	}

	// The head is what --target combined writes at the folder's precision (int4, group 64).
	got := sameHeadAsCombined(t, dir, fixtures.Qwen36, "--trunk-precision", "int4", "--head-precision", "int4", "--mlx-rounding", "cpu")

	// config.json: the original's members and values, plus one entry per quantized head module.
	var cfg, orig map[string]json.RawMessage
	c, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	json.Unmarshal(c, &cfg)
	json.Unmarshal(origConfig, &orig)
	for k, v := range orig {
		if k != "quantization" && k != "quantization_config" && !bytes.Equal(cfg[k], v) {
			t.Errorf("config.json: %s changed", k)
		}
	}
	var q map[string]json.RawMessage
	json.Unmarshal(cfg["quantization"], &q)
	if string(compactJSON(q["mtp.fc"])) != `{"group_size":64,"bits":4,"mode":"affine"}` || string(compactJSON(q["mtp.layers.0.mlp.gate"])) != `{"group_size":64,"bits":8,"mode":"affine"}` {
		t.Errorf("head entries: mtp.fc %s, router %s", q["mtp.fc"], q["mtp.layers.0.mlp.gate"])
	}
	if !bytes.Equal(compactJSON(cfg["quantization"]), compactJSON(cfg["quantization_config"])) {
		t.Error("quantization_config no longer mirrors quantization")
	}
	if bytes.HasSuffix(c, []byte("\n")) || !bytes.HasPrefix(c, []byte("{\n    \"")) {
		t.Error("config.json is not in mlx-lm's layout (four-space indent, no final newline)")
	}
	// The index maps every head entry to the head file; total_size grows by their bytes.
	var idx struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	var oidx = idx
	ib, _ := os.ReadFile(filepath.Join(dir, st.IndexFile))
	json.Unmarshal(ib, &idx)
	json.Unmarshal(origIndex, &oidx)
	var headBytes int64
	for n, b := range got {
		if idx.WeightMap[n] != "model-mtp.safetensors" {
			t.Errorf("index maps %s to %q", n, idx.WeightMap[n])
		}
		headBytes += int64(len(b) - len(strings.SplitN(string(b), "|", 2)[0]) - 1)
	}
	if idx.Metadata.TotalSize != oidx.Metadata.TotalSize+headBytes || len(idx.WeightMap) != len(oidx.WeightMap)+len(got) {
		t.Errorf("index total_size %d, was %d plus %d head bytes", idx.Metadata.TotalSize, oidx.Metadata.TotalSize, headBytes)
	}

	// The manifest owns the head, the copies and itself; records the replaced files and the trunk.
	man, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Into == nil || strings.Join(sortedCopy(man.Into.OwnedFiles), ",") != "model-mtp.safetensors,mtpconv-manifest.json,mtpconv-original/config.json,mtpconv-original/model.safetensors.index.json" ||
		len(man.Into.Updated) != 2 || len(man.Into.Kept) != 1 || man.Into.Kept[0].Name != "model.safetensors" {
		t.Fatalf("manifest into record %+v", man.Into)
	}
	if code, _, stderr := runCLI(t, "verify", "--src", src, dir); code != 0 {
		t.Errorf("verify: %s", stderr)
	}

	// Already there: refused without --force, nothing moves.
	refusedUnchanged(t, dir, 1, "--force", "export", "--src", src, "--target", "combined", "--into", dir, "--quiet", "--head-precision", "int8")
	snap := tree(t, dir)
	// --force at int8: built from the originals again (no stale int4 entries), copies untouched.
	if code, stderr := into("--force", "--head-precision", "int8"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	now := tree(t, dir)
	for p, h := range snap {
		switch rel, _ := filepath.Rel(dir, p); rel {
		case "model-mtp.safetensors", "config.json", st.IndexFile, manifests.FileName:
			if now[p] == h {
				t.Errorf("--force left %s as it was", rel)
			}
		default:
			if now[p] != h {
				t.Errorf("--force changed %s", rel)
			}
		}
	}
	c, _ = os.ReadFile(filepath.Join(dir, "config.json"))
	q = nil
	json.Unmarshal(c, &cfg)
	json.Unmarshal(cfg["quantization"], &q)
	if string(compactJSON(q["mtp.fc"])) != `{"group_size":64,"bits":8,"mode":"affine"}` || strings.Count(string(c), `"mtp.fc"`) != 2 {
		t.Errorf("after --force int8: mtp.fc %s", q["mtp.fc"])
	}
	if code, _, stderr := runCLI(t, "verify", dir); code != 0 {
		t.Errorf("verify after --force: %s", stderr)
	}

	// A changed trunk byte: verify names the trunk file.
	f, _ := os.OpenFile(filepath.Join(dir, "model.safetensors"), os.O_RDWR, 0)
	f.WriteAt([]byte{0x5a}, 4096)
	f.Close()
	if code, stdout, _ := runCLI(t, "verify", dir); code != 1 || !strings.Contains(stdout, "file_changed") || !strings.Contains(stdout, "model.safetensors") {
		t.Errorf("verify of a tampered trunk: exit %d: %s", code, stdout)
	}
}

func compactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

func TestIntoMLXRefusals(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	base := headlessMLXFolder(t, "--trunk-precision", "int4")
	clone := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "mlx")
		os.MkdirAll(dir, 0o755)
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(base, e.Name()))
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
		return dir
	}
	cfg, _ := os.ReadFile(filepath.Join(base, "config.json"))
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		args  []string
		code  int
		want  string
	}{
		{"other hidden_size", otherValue(cfg, `"hidden_size": 128`), nil, 1, "hidden_size"},
		{"other experts", otherValue(cfg, `"num_experts": 256`), nil, 1, "num_experts"},
		{"other expert size", otherValue(cfg, `"moe_intermediate_size": 128`), nil, 1, "moe_intermediate_size"},
		{"other depth", otherValue(cfg, `"mtp_num_hidden_layers": 1`), nil, 1, "mtp_num_hidden_layers"},
		{"other head_dim", otherValue(cfg, `"head_dim": 64`), nil, 1, "head_dim"},
		{"head in a trunk file", func(t *testing.T, dir string) {
			out := filepath.Join(t.TempDir(), "c")
			exportTo(t, fixtures.Qwen36, out, "--target", "combined", "--trunk-precision", "int4", "--no-card")
			m, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
			os.WriteFile(filepath.Join(dir, "model.safetensors"), m, 0o644)
		}, nil, 1, "already holds an MTP head in model.safetensors"},
		{"a head file not ours", func(t *testing.T, dir string) {
			m, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
			os.WriteFile(filepath.Join(dir, "model-mtp.safetensors"), m, 0o644)
		}, []string{"--force"}, 1, "model-mtp.safetensors"},
		{"not an MLX file", func(t *testing.T, dir string) {
			m, _ := os.ReadFile(filepath.Join(src, "model-00001-of-00003.safetensors"))
			os.WriteFile(filepath.Join(dir, "model-00001-of-00003.safetensors"), m, 0o644)
		}, nil, 1, "not an MLX file"},
		{"no weights", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, nil, 1, "model*.safetensors"},
		{"oversized config", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, "config.json"), 65<<20)
		}, nil, 1, "config.json is 68157440 bytes"},
		{"index oversized", func(t *testing.T, dir string) {
			// The index limit is the safetensors header's, as inspect reads it.
			os.Truncate(filepath.Join(dir, st.IndexFile), st.MaxHeaderSize+1)
		}, nil, 1, fmt.Sprintf("model.safetensors.index.json is %d bytes", st.MaxHeaderSize+1)},
		{"duplicate key", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), bytes.Replace(cfg, []byte("{"), []byte(`{"model_type": "qwen3_5_moe",`), 1), 0o644)
		}, nil, 1, `config.json: key "model_type" appears twice`},
		{"trunk flag", nil, []string{"--trunk-precision", "int8"}, 2, "--trunk-precision does not apply"},
		{"shard flag", nil, []string{"--max-shard-size", "5GB"}, 2, "--max-shard-size does not apply"},
		{"mlx-lm trunk flags", nil, []string{"--q-bits", "8", "--quant-predicate", "mixed_3_6"}, 2, "--q-bits, --quant-predicate does not apply"},
		{"openvino flag", nil, []string{"--lm-head-precision", "int8"}, 2, "--lm-head-precision"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := clone(t)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			refusedUnchanged(t, dir, tc.code, tc.want, append([]string{"export", "--src", src, "--target", "combined", "--into", dir, "--quiet"}, tc.args...)...)
		})
	}
	// Qwen3-Next: stock mlx-lm cannot load a head with its trunk; refused by name.
	next := fixtures.Ensure(t, fixtures.Next)
	if code, _, stderr := runCLI(t, "export", "--src", next, "--target", "combined", "--into", clone(t), "--quiet"); code == 0 || !strings.Contains(stderr, "--target combined supports") {
		t.Errorf("qwen3-next: exit %d: %s", code, stderr)
	}
	// --dry-run writes nothing.
	dir := clone(t)
	snap := tree(t, dir)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir, "--dry-run", "--quiet"); code != 0 {
		t.Errorf("dry run: exit %d: %s", code, stderr)
	}
	if d := diffTrees(snap, tree(t, dir)); d != "" {
		t.Errorf("dry run changed %s", d)
	}
}

// otherValue sets the value of one "key": value pair of config.json to 3.
func otherValue(cfg []byte, pair string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		bad := strings.Replace(string(cfg), pair, strings.Split(pair, ":")[0]+": 3", 1)
		if bad == string(cfg) {
			t.Fatalf("%s not in the config", pair)
		}
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(bad), 0o644)
	}
}

func TestInspectMLXFolder(t *testing.T) {
	t.Parallel()
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	code, stdout, stderr := runCLI(t, "inspect", dir)
	if code != 0 || !strings.Contains(stdout, "MTP head:      none") || !strings.Contains(stdout, "mtpconv export --src SRC --target combined --into "+dir) {
		t.Errorf("exit %d: %s%s", code, stdout, stderr)
	}
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\nlibrary_name: mlx\nbase_model:\n- Qwen/Qwen3.6-35B-A3B\n---\n# x\n"), 0o644)
	if _, stdout, _ := runCLI(t, "inspect", dir); !strings.Contains(stdout, "--src hf://Qwen/Qwen3.6-35B-A3B --target combined --into") {
		t.Errorf("base model from the card: %s", stdout)
	}
	var r struct {
		Kind    string `json:"kind"`
		MTPHead bool   `json:"mtp_head"`
		AddHead string `json:"add_head_command"`
	}
	_, stdout, _ = runCLI(t, "inspect", "--json", dir)
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Kind != "mlx_folder" || r.MTPHead || r.AddHead == "" {
		t.Errorf("--json: %v %s", err, stdout)
	}
	// A folder holding a head in its own file: yes, no command.
	out := filepath.Join(t.TempDir(), "c")
	exportTo(t, fixtures.Qwen36, out, "--target", "combined", "--no-card")
	os.Remove(filepath.Join(out, manifests.FileName))
	if _, stdout, _ := runCLI(t, "inspect", out); !strings.Contains(stdout, "MTP head:      yes, in model.safetensors") || strings.Contains(stdout, "add one with") {
		t.Errorf("head present: %s", stdout)
	}
	// An mlx-vlm drafter without mtpconv's manifest (as mlx-vlm or another
	// tool leaves it) is the head, not a trunk without one.
	dr := filepath.Join(t.TempDir(), "d")
	exportTo(t, fixtures.Qwen36, dr, "--target", "mlx", "--no-card")
	os.Remove(filepath.Join(dr, manifests.FileName))
	if code, stdout, _ := runCLI(t, "inspect", "--strict", dr); code != 0 || !strings.Contains(stdout, "MTP head:      an mlx-vlm drafter (model_type qwen3_5_mtp)") || strings.Contains(stdout, "add one with") {
		t.Errorf("a drafter without a manifest: exit %d: %s", code, stdout)
	}
	// After --into: the output summary says what mtpconv owns and builds on.
	src := fixtures.Ensure(t, fixtures.Qwen36)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir, "--quiet"); code != 0 {
		t.Fatalf("--into: %s", stderr)
	}
	if _, stdout, _ := runCLI(t, "inspect", dir); !strings.Contains(stdout, "added into:") || !strings.Contains(stdout, "builds on    model.safetensors") {
		t.Errorf("grafted folder: %s", stdout)
	}
}

// A graft stopped after its manifest landed (the first step) is completed by
// running it again: the folder ends as a graft run through, whichever of the
// later steps were done.
func TestIntoMLXCompletesAnInterruptedGraft(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	into := func(extra ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "combined", "--into", dir, "--quiet"}, extra...)...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	into()
	done := tree(t, dir)
	orig := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, "mtpconv-original", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, stop := range []string{"after the manifest", "before config.json"} {
		t.Run(stop, func(t *testing.T) {
			cfg := orig("config.json")
			if stop == "after the manifest" {
				idx := orig(st.IndexFile)
				os.WriteFile(filepath.Join(dir, st.IndexFile), idx, 0o644)
				os.Remove(filepath.Join(dir, "model-mtp.safetensors"))
				os.RemoveAll(filepath.Join(dir, "mtpconv-original"))
			}
			os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
			into("--force")
			if d := diffTrees(done, tree(t, dir)); d != "" {
				t.Errorf("completed graft differs in %s", d)
			}
			if code, stdout, _ := runCLI(t, "verify", dir); code != 0 {
				t.Errorf("verify: %s", stdout)
			}
		})
	}
	// config.json edited since the graft: --force does not drop the edit.
	f, _ := os.OpenFile(filepath.Join(dir, "config.json"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(" ")
	f.Close()
	refusedUnchanged(t, dir, 1, "config.json changed since mtpconv updated it", "export", "--src", src, "--target", "combined", "--into", dir, "--quiet", "--force")
}

// The dense heads (Qwen3.5/3.6-27B) graft as the MoE ones do.
func TestIntoMLXDense(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36Dense)
	dir := headlessMLXFolderOf(t, fixtures.Qwen36Dense, "--trunk-precision", "int8", "--group-size", "32")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir, "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sameHeadAsCombined(t, dir, fixtures.Qwen36Dense, "--head-precision", "int8", "--group-size", "32")
	if code, stdout, _ := runCLI(t, "verify", "--src", src, dir); code != 0 {
		t.Errorf("verify: %s", stdout)
	}
}

// A float folder takes a float head and keeps its config.json (nothing in it
// changes); an int4 head there adds mlx-lm's quantization blocks.
func TestIntoMLXFloatFolder(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := headlessMLXFolder(t)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if bytes.Contains(cfg, []byte(`"quantization"`)) {
		t.Fatal("the float folder's config declares a quantization")
	}
	into := func(extra ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "combined", "--into", dir, "--quiet"}, extra...)...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	into()
	now, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !bytes.Equal(now, cfg) {
		t.Error("config.json changed for a bf16 head")
	}
	if _, err := os.Stat(filepath.Join(dir, "mtpconv-original", "config.json")); err == nil {
		t.Error("a copy of an unchanged config.json was kept")
	}
	head := safetensorsEntries(t, filepath.Join(dir, "model-mtp.safetensors"), func(string) bool { return true })
	if !strings.HasPrefix(string(head["mtp.fc.weight"]), "BF16|") {
		t.Error("the head of a bf16 folder is not bf16")
	}
	into("--force", "--head-precision", "int4")
	var c map[string]json.RawMessage
	now, _ = os.ReadFile(filepath.Join(dir, "config.json"))
	json.Unmarshal(now, &c)
	if !bytes.Equal(compactJSON(c["quantization"]), compactJSON(c["quantization_config"])) || !strings.HasPrefix(string(compactJSON(c["quantization"])), `{"group_size":64,"bits":4,"mode":"affine","mtp.fc":`) {
		t.Errorf("quantization %s", c["quantization"])
	}
	if kept, _ := os.ReadFile(filepath.Join(dir, "mtpconv-original", "config.json")); !bytes.Equal(kept, cfg) {
		t.Error("the original config.json was not kept")
	}
	if code, stdout, _ := runCLI(t, "verify", dir); code != 0 {
		t.Errorf("verify: %s", stdout)
	}
	// Back to bf16, twice: config.json is the original again, and its kept
	// copy stays owned and recorded (never left behind unrecorded).
	into("--force")
	into("--force")
	now, _ = os.ReadFile(filepath.Join(dir, "config.json"))
	man, err := manifests.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := man.Into.UpdatedFile("config.json"); !ok || !bytes.Equal(now, cfg) || !man.Owns("mtpconv-original/config.json") {
		t.Errorf("bf16 again: config.json restored %v, record %+v", bytes.Equal(now, cfg), man.Into)
	}
	if code, stdout, _ := runCLI(t, "verify", dir); code != 0 {
		t.Errorf("verify: %s", stdout)
	}
}

// A folder whose config.json does not declare the MTP depth gets it, in
// text_config where the source has it, in key order.
func TestIntoMLXDeclaresTheDepth(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	path := filepath.Join(dir, "config.json")
	cfg, _ := os.ReadFile(path)
	without := bytes.Replace(cfg, []byte(`"mtp_num_hidden_layers": 1,`), nil, 1)
	if bytes.Equal(without, cfg) {
		t.Fatal("no mtp_num_hidden_layers in the folder's config")
	}
	os.WriteFile(path, without, 0o644)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", dir, "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	now, _ := os.ReadFile(path)
	var c struct {
		Text json.RawMessage `json:"text_config"`
	}
	json.Unmarshal(now, &c)
	text := string(c.Text)
	at := strings.Index(text, `"mtp_num_hidden_layers": 1`)
	if at < 0 || strings.Index(text, `"moe_intermediate_size"`) > at || strings.Index(text, `"num_attention_heads"`) < at {
		t.Errorf("text_config: %s", text)
	}
}
