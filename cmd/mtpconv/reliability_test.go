package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// A graft resumed after the trunk's tensor data changed under an unchanged
// header (a re-upload, a requant of the same recipe) does not reuse the
// bundled file built from the old bytes: it is written again, a note says
// why, and the output is the fresh graft of the trunk as it is now. An
// unchanged trunk is reused.
func TestGraftResumeProvesTrunkBytes(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	for _, change := range []bool{false, true} {
		name := map[bool]string{false: "unchanged trunk", true: "trunk data changed"}[change]
		t.Run(name, func(t *testing.T) {
			trunk := graftTrunk(t, src)
			file := filepath.Base(trunk)
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			args := []string{"--src", src, "--target", "gguf", "--graft", trunk}
			kill(startHeld(t, out, file, args...))
			if change {
				f, _ := ggufTensors(t, trunk)
				raw, err := os.ReadFile(trunk)
				if err != nil {
					t.Fatal(err)
				}
				ti := f.Tensors[len(f.Tensors)/2]
				raw[f.DataOffset+ti.Offset+3] ^= 0x40
				if err := os.WriteFile(trunk, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runCLI(t, append([]string{"export", "--out", out, "--resume", "--json"}, args...)...)
			if code != 0 {
				t.Fatalf("resume: exit %d: %s", code, stderr)
			}
			var sum exportSummary
			if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if reused := slices.Contains(sum.ReusedFiles, file); reused == change {
				t.Errorf("reused %v, notes %v", sum.ReusedFiles, sum.Notes)
			}
			if change && !slices.ContainsFunc(sum.Notes, func(n string) bool {
				return strings.Contains(n, file+": not reused") && strings.Contains(n, "trunk")
			}) {
				t.Errorf("no note says why %s was written again: %v", file, sum.Notes)
			}
			want := filepath.Join(t.TempDir(), "want")
			if code, _, stderr := runCLI(t, append([]string{"export", "--out", want, "--quiet"}, args...)...); code != 0 {
				t.Fatalf("fresh graft: exit %d: %s", code, stderr)
			}
			a, _ := os.ReadFile(filepath.Join(out, file))
			b, _ := os.ReadFile(filepath.Join(want, file))
			if !bytes.Equal(a, b) {
				t.Error("the resumed graft differs from a fresh graft of the trunk as it is now")
			}
		})
	}
}

// An output file named as a file the export itself writes (the card, the
// manifest, the resume markers) is refused before anything is written,
// naming both; with --no-card the card's name is free.
func TestOutputNameClashRefused(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	base := graftTrunk(t, src)
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		extra []string
		ok    bool
	}{
		{manifests.CardFile, nil, false},
		{strings.ToLower(manifests.CardFile), nil, false},
		{manifests.CardFile, []string{"--no-card"}, true},
		{manifests.FileName, []string{"--no-card"}, false},
		{".mtpconv-plan", nil, false},
		{".mtpconv-done", nil, false},
	} {
		t.Run(c.name+strings.Join(c.extra, ""), func(t *testing.T) {
			trunk := filepath.Join(t.TempDir(), c.name)
			if err := os.WriteFile(trunk, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "gguf", "--graft", trunk, "--out", out, "--quiet"}, c.extra...)...)
			if c.ok {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if b, _ := os.ReadFile(filepath.Join(out, c.name)); !bytes.HasPrefix(b, []byte("GGUF")) {
					t.Error("the bundled file is not there")
				}
				return
			}
			if code != 1 || !strings.Contains(stderr, c.name) || !strings.Contains(stderr, "clash") {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
		})
	}
}

// hfCacheSnapshot moves every file of dir into the blob store of a Hugging
// Face cache entry and links it from a snapshot folder, as the cache lays
// out a download; it returns the snapshot and the blob store.
func hfCacheSnapshot(t *testing.T, dir string) (snapshot, blobs string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "models--mlx-community--tiny")
	blobs = filepath.Join(repo, "blobs")
	snapshot = filepath.Join(repo, "snapshots", "0123456789abcdef")
	for _, d := range []string{blobs, snapshot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := manifests.SHA256(b)
		if err := os.WriteFile(filepath.Join(blobs, sum), b, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "..", "blobs", sum), filepath.Join(snapshot, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot, blobs
}

// One rule for links, followed by --into and verify alike: an MLX folder
// that is a Hugging Face cache snapshot (every file a link into the repo's
// blobs) takes the head, nothing is written through a link (the blobs are
// unchanged, the replaced config.json and index are regular files of the
// snapshot) and verify passes; a folder whose file links anywhere else is
// refused by --into, naming the file, and left as it was.
func TestIntoFollowsVerifysLinkRule(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	snapshot, blobs := hfCacheSnapshot(t, headlessMLXFolder(t, "--trunk-precision", "int4"))
	before := tree(t, blobs)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "combined", "--into", snapshot, "--quiet"); code != 0 {
		t.Fatalf("--into a cache snapshot: exit %d: %s", code, stderr)
	}
	if d := diffTrees(before, tree(t, blobs)); d != "" {
		t.Errorf("the blob store changed: %s", d)
	}
	for _, f := range []string{"config.json", st.IndexFile, "model-mtp.safetensors"} {
		if fi, err := os.Lstat(filepath.Join(snapshot, f)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file of the snapshot: %v", f, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(snapshot, "model.safetensors")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the trunk's link was replaced: %v", err)
	}
	if code, stdout, _ := runCLI(t, "verify", snapshot); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify of the snapshot: exit %d: %s", code, stdout)
	}

	// An export downloaded from the Hub into the cache verifies where it lies.
	out := filepath.Join(t.TempDir(), "out")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx", "--head-precision", "int4")
	downloaded, _ := hfCacheSnapshot(t, out)
	if code, stdout, _ := runCLI(t, "verify", downloaded); code != 0 || !strings.Contains(stdout, "OK") {
		t.Errorf("verify of a downloaded export: exit %d: %s", code, stdout)
	}

	// A link out of the folder and out of any blob store.
	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	elsewhere := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.Rename(filepath.Join(dir, "model.safetensors"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, dir, 1, "model.safetensors: file name", "export", "--src", src, "--target", "combined", "--into", dir)
}

// The graft's same-model check compares every hyperparameter the head's
// graph reads, not only the shapes: a trunk of another model that differs in
// a feed-forward width, a rope parameter, the norm epsilon or the layer
// pattern is refused naming the key, and nothing is written.
func TestGraftComparesEveryHyperparameter(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	trunk := graftTrunk(t, src)
	f, data := ggufTensors(t, trunk)
	edit := func(v gg.Value) gg.Value {
		switch x := v.V.(type) {
		case uint32:
			return gg.U32(x + 16)
		case float32:
			return gg.Float(x * 2)
		case []int32:
			y := slices.Clone(x)
			y[0]++
			return gg.Int32s(y)
		case []bool:
			y := slices.Clone(x)
			y[0] = !y[0]
			return gg.Bools(y)
		}
		t.Fatalf("no edit for %T", v.V)
		return v
	}
	for _, key := range []string{"qwen35moe.expert_feed_forward_length", "qwen35moe.expert_shared_feed_forward_length",
		"qwen35moe.rope.freq_base", "qwen35moe.rope.dimension_sections", "qwen35moe.attention.layer_norm_rms_epsilon",
		"qwen35moe.attention.key_length", "qwen35moe.ssm.conv_kernel", "qwen35moe.attention.recurrent_layers"} {
		t.Run(key, func(t *testing.T) {
			var kvs []gg.KV
			found := false
			for _, kv := range f.KV {
				if kv.Key == key {
					kv.Value, found = edit(kv.Value), true
				}
				kvs = append(kvs, kv)
			}
			if !found {
				t.Fatalf("the test trunk has no %s", key)
			}
			other := filepath.Join(t.TempDir(), "other.gguf")
			writeGGUF(t, other, kvs, append([]gg.TensorInfo{}, f.Tensors...), data)
			out := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--graft", other, "--out", out)
			if code != 1 || !strings.Contains(stderr, key+" is ") {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
		})
	}
}

// A bundled GGUF whose head count is not what its blocks hold is refused
// by the split, naming the key (never a trunk block carried as an MTP
// layer, never called an MTP-only sidecar); a --src that is a FIFO is
// named as one.
func TestSplitRefusesWrongHeadCounts(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	bundled, _ := graft(t, src, graftTrunk(t, src))
	f, data := ggufTensors(t, bundled)
	with := func(n uint32) string {
		var kvs []gg.KV
		for _, kv := range f.KV {
			if kv.Key == "qwen35moe.nextn_predict_layers" {
				kv.Value = gg.U32(n)
			}
			kvs = append(kvs, kv)
		}
		p := filepath.Join(t.TempDir(), "bundled.gguf")
		writeGGUF(t, p, kvs, append([]gg.TensorInfo{}, f.Tensors...), data)
		return p
	}
	fifo := filepath.Join(t.TempDir(), "x.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, src, want string
	}{
		{"more MTP layers than nextn blocks", with(2), "qwen35moe.nextn_predict_layers is 2 but only 1 blocks hold nextn tensors"},
		{"more MTP layers than blocks", with(9), "qwen35moe.nextn_predict_layers is 9, more than its 5 blocks"},
		{"a FIFO", fifo, "is a named pipe (FIFO)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, "export", "--src", c.src, "--target", "gguf", "--out", out)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
		})
	}
}

// What --into leaves alone and what it refuses by name: a .mtpconv-into
// folder of the user's (no staging marker) is not deleted; an mlx-vlm
// folder (vision_config, vision_tower.* weights) is refused by combined
// --into, which adds into mlx-lm folders only.
func TestIntoRefusesWhatIsNotItsOwn(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	into := func(dir string) []string {
		return []string{"export", "--src", src, "--target", "combined", "--into", dir, "--force"}
	}

	dir := headlessMLXFolder(t, "--trunk-precision", "int4")
	mine := filepath.Join(dir, ".mtpconv-into")
	if err := os.MkdirAll(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("the user's own"), 0o644)
	refusedUnchanged(t, dir, 1, ".mtpconv-into exists and mtpconv did not make it", into(dir)...)

	dir = headlessMLXFolder(t, "--trunk-precision", "int4")
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), bytes.Replace(cfg, []byte("{"), []byte(`{"vision_config": {"depth": 2},`), 1), 0o644)
	refusedUnchanged(t, dir, 1, "is an mlx-vlm folder (its config.json has vision_config)", into(dir)...)

	dir = headlessMLXFolder(t, "--trunk-precision", "int4")
	var b bytes.Buffer
	w, err := st.NewWriter(&b, []st.Entry{{Name: "vision_tower.patch_embed.proj.weight", DType: st.BF16, Shape: []int64{2, 2}}}, map[string]string{"format": "mlx"})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(make([]byte, 8))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model-vision.safetensors"), b.Bytes(), 0o644)
	refusedUnchanged(t, dir, 1, "model-vision.safetensors holds vision_tower.patch_embed.proj.weight", into(dir)...)
}

// Every value the drafter's config.json takes from the source keeps its
// JSON literal, as mlx-vlm's splitter (json.load, json.dump) keeps a float a
// float: a config written by transformers ("attention_dropout": 0.0) gives
// 0.0, not 0; the file ends as json.dump ends it, without a newline.
// (interop/test_glm.py compares it with the splitter's byte for byte.)
func TestDrafterConfigKeepsSourceLiterals(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	linkFixture(t, fixtures.GLM47Flash, src, "config.json")
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	for _, r := range [][2]string{{`"attention_dropout": 0,`, `"attention_dropout": 0.0,`}, {`"partial_rotary_factor": 1,`, `"partial_rotary_factor": 1.0,`}, {`"rms_norm_eps": 0.00001,`, `"rms_norm_eps": 1e-05,`}} {
		if !bytes.Contains(cfg, []byte(r[0])) {
			t.Fatalf("the fixture's config has no %s", r[0])
		}
		cfg = bytes.Replace(cfg, []byte(r[0]), []byte(r[1]), 1)
	}
	os.WriteFile(filepath.Join(src, "config.json"), cfg, 0o644)
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(out, "config.json"))
	for _, want := range []string{`"attention_dropout": 0.0,`, `"partial_rotary_factor": 1.0,`, `"rms_norm_eps": 1e-05,`} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the drafter's config.json lacks %s", want)
		}
	}
	if bytes.HasSuffix(got, []byte("\n")) {
		t.Error("the drafter's config.json ends with a newline; json.dump writes none")
	}
}
