package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fakehub"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

func ggufSource(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36), dir)
	testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), dir)
	return dir
}

// q8Sidecar exports the Q8_0 sidecar of src (a folder named "src") and
// returns its path.
func q8Sidecar(t *testing.T, src string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--head-precision", "int8", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	return filepath.Join(out, "mtp-src-Q8_0.gguf")
}

// inspect reads GGUF files: our sidecar is an MTP-only file with its head in
// block 4; a trunk without head has none.
func TestInspectGGUF(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	side := q8Sidecar(t, src)
	code, stdout, stderr := runCLI(t, "inspect", "--json", side)
	if code != 0 {
		t.Fatalf("inspect: %d %s", code, stderr)
	}
	var s gg.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Architecture != "qwen35moe" || s.BlockCount != 5 || s.NextnLayers != 1 || !s.MTPHead || !s.MTPOnly ||
		s.FileType != "Q8_0" || s.TensorTypes["Q8_0"] != 13 || s.TensorTypes["F32"] != 10 || len(s.Problems) != 0 {
		t.Errorf("sidecar summary %+v", s)
	}
	code, text, _ := runCLI(t, "inspect", side)
	if code != 0 || !strings.Contains(text, "MTP-only sidecar (blocks [4]") {
		t.Errorf("inspect text: %d %s", code, text)
	}

	s = trunkSummary(t, src)
	if s.BlockCount != 4 || s.NextnLayers != 0 || s.MTPHead || s.MTPOnly || s.Tensors != 76 {
		t.Errorf("trunk summary %+v", s)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644)
	if code, _, stderr := runCLI(t, "inspect", bad); code != 1 || !strings.Contains(stderr, "bad.gguf") {
		t.Errorf("truncated GGUF: exit %d, %s", code, stderr)
	}
}

// From the Hub by range, the sidecar is the local one, byte for byte, and
// only its tensors (head, embedding, final norm, lm_head), the shard headers
// and the small files are fetched.
func TestGGUFFromHub(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Qwen3.6-35B-A3B") // the name the sidecar is called after
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The fake Hub lists real files: hard links (or copies), not symlinks.
	for _, from := range []string{fixtures.Ensure(t, fixtures.Qwen36), filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny")} {
		ents, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			src, dst := filepath.Join(from, e.Name()), filepath.Join(dir, e.Name())
			if os.Link(src, dst) != nil {
				b, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(dst, b, 0o644)
			}
		}
	}
	run := func(src string) (map[string][]byte, exportSummary) {
		return exportWith(t, src, "--target", "gguf", "--head-precision", "int8")
	}
	local, _ := run(dir)
	if _, ok := local["mtp-Qwen3.6-35B-A3B-Q8_0.gguf"]; !ok {
		t.Fatalf("files %v", local)
	}
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	hubEnv(t, hub.URL)
	remote, sum := run("hf://" + hubRepo)
	sameFiles(t, local, remote)
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var need int64
	for _, name := range ck.Names {
		if strings.HasPrefix(name, "mtp.") || name == "lm_head.weight" || name == "model.language_model.embed_tokens.weight" || name == "model.language_model.norm.weight" {
			need += ck.Tensors[name].Bytes()
		}
	}
	for _, s := range ck.Shards {
		need += s.Header.DataStart
	}
	const slack = 256 << 10 // config, index, tokenizer files, coalescing gaps
	if got := hub.Sent(); got > need+slack || got < need {
		t.Errorf("server sent %d bytes; the sidecar needs %d (+%d slack)", got, need, slack)
	}
	t.Logf("fetched %d of %d bytes (sidecar tensors and headers %d)", hub.Sent(), sum.SourceTotal, need)
}

// --gguf-type belongs to the gguf target; the card names ggml types.
func TestGGUFFlags(t *testing.T) {
	t.Parallel()
	src := ggufSource(t)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--gguf-type", "Q8_0", "--out", filepath.Join(t.TempDir(), "o")); code != 2 || !strings.Contains(stderr, "does not take --gguf-type") {
		t.Errorf("mlx --gguf-type: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--gguf-type", "Q8_0", "--head-precision", "int8", "--out", filepath.Join(t.TempDir(), "o")); code != 2 || !strings.Contains(stderr, "both set") {
		t.Errorf("--gguf-type with --head-precision: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--gguf-type", "IQ2_XS", "--out", filepath.Join(t.TempDir(), "o")); code != 2 || !strings.Contains(stderr, "Q4_K_M") {
		t.Errorf("--gguf-type IQ2_XS: exit %d: %s", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "o")
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "gguf", "--head-precision", "int4", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("int4: exit %d: %s", code, stderr)
	}
	card, _ := os.ReadFile(filepath.Join(out, "README.md"))
	for _, w := range []string{"Q4_K (ggml blocks of 256)", "Q5_0 (ggml blocks of 32)", "Q8_0 (ggml blocks of 32)", "mtp-src-Q4_K_M.gguf --spec-type draft-mtp"} {
		if !strings.Contains(string(card), w) {
			t.Errorf("card lacks %q", w)
		}
	}
}

// The dense family writes llama.cpp's qwen35 sidecar (dense ffn_{gate,up,down}
// in the MTP block, no expert tensors) and, for the interop tests, its trunk.
func TestGGUFDense(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36Dense), src)
	testfs.LinkDir(t, filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny"), src)
	side := q8Sidecar(t, src)
	f, _, err := gg.Open(side)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ti := range f.Tensors {
		names[ti.Name] = true
	}
	for _, n := range []string{"blk.4.ffn_gate.weight", "blk.4.ffn_up.weight", "blk.4.ffn_down.weight"} {
		if !names[n] {
			t.Errorf("%s missing", n)
		}
	}
	for n := range names {
		if strings.Contains(n, "exps") || strings.Contains(n, "shexp") || strings.Contains(n, "gate_inp") {
			t.Errorf("expert tensor %s in a dense sidecar", n)
		}
	}
	if v, ok := f.Lookup("qwen35.feed_forward_length"); !ok || v.V != uint32(384) {
		t.Errorf("qwen35.feed_forward_length: %v", v)
	}
	if _, ok := f.Lookup("qwen35.expert_count"); ok {
		t.Error("qwen35.expert_count in a dense sidecar")
	}
	_, stdout, _ := runCLI(t, "inspect", "--json", side)
	var s gg.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Architecture != "qwen35" || s.BlockCount != 5 || s.NextnLayers != 1 || !s.MTPHead || !s.MTPOnly || len(s.Problems) != 0 {
		t.Errorf("sidecar summary %+v", s)
	}
	s = trunkSummary(t, src)
	if s.Architecture != "qwen35" || s.BlockCount != 4 || s.NextnLayers != 0 || s.MTPHead || s.MTPOnly || s.Tensors != 56 || len(s.Problems) != 0 {
		t.Errorf("trunk summary %+v", s)
	}
}

// trunkSummary writes the test trunk GGUF of src and returns what inspect --json says of it.
func trunkSummary(t *testing.T, src string) gg.Summary {
	t.Helper()
	_, stdout, _ := runCLI(t, "inspect", "--json", graftTrunk(t, src))
	var s gg.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// inspect of a GGUF caps its list of problems as every list is capped (the
// first 20, then how many more); --json gives the whole count.
func TestInspectGGUFCapsProblems(t *testing.T) {
	t.Parallel()
	const n = 100
	kvs := []gg.KV{gg.Pair("general.architecture", gg.Str("qwen35moe")), gg.Pair("qwen35moe.block_count", gg.U32(1)),
		gg.Pair("qwen35moe.nextn_predict_layers", gg.U32(1))}
	sizes := make([]int64, n)
	for i := range sizes {
		sizes[i] = 4
	}
	offs, total := gg.Place(sizes, gg.DefaultAlignment)
	var ts []gg.TensorInfo
	for i := range n { // nextn tensors in blocks 10.., outside the only block
		ts = append(ts, gg.TensorInfo{Name: fmt.Sprintf("blk.%d.nextn.eh_proj.weight", 10+i), Dims: []int64{1}, Type: gg.F32, Offset: offs[i]})
	}
	hdr, err := gg.EncodeHeader(kvs, ts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "many.gguf")
	os.WriteFile(path, append(hdr, make([]byte, total)...), 0o644)
	code, text, stderr := runCLI(t, "inspect", path)
	if got := strings.Count(text, "problem:"); code != 0 || got != 21 || !strings.Contains(text, fmt.Sprintf("and %d more problems", n-20)) {
		t.Errorf("exit %d, %d problem lines: %s%s", code, got, text, stderr)
	}
	code, out, _ := runCLI(t, "inspect", "--json", path)
	var s struct {
		Problems     []string `json:"problems"`
		ProblemCount int      `json:"problem_count"`
		Architecture string   `json:"architecture"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || len(s.Problems) != 21 || s.ProblemCount != n || s.Architecture != "qwen35moe" {
		t.Errorf("json: exit %d, %d problems, count %d, %v: %s", code, len(s.Problems), s.ProblemCount, err, out)
	}
}
