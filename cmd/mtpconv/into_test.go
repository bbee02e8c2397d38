package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fakehub"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// fakeOptimumExport lays out the files --into checks of an optimum-intel
// export (IR stand-ins: only their presence is checked) with the given config.
func fakeOptimumExport(t *testing.T, config []byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "optimum")
	os.MkdirAll(dir, 0o755)
	files := map[string]string{
		"config.json":                        string(config),
		"openvino_language_model.xml":        "<net/>",
		"openvino_language_model.bin":        "trunk",
		"openvino_text_embeddings_model.xml": "<net/>",
		"openvino_text_embeddings_model.bin": "embeddings",
		"openvino_tokenizer.xml":             "<net/>",
		"generation_config.json":             `{"eos_token_id": 7}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// optimumExportOfFixture is the Qwen3.6 fixture and a fake optimum export
// of it.
func optimumExportOfFixture(t *testing.T) (src, dir string) {
	t.Helper()
	src = fixtures.Ensure(t, fixtures.Qwen36)
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return src, fakeOptimumExport(t, cfg)
}

func TestIntoAddsOnlyTheMTPIR(t *testing.T) {
	t.Parallel()
	src, dir := optimumExportOfFixture(t)
	before := tree(t, dir)
	into := func(extra ...string) (int, string) {
		code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "openvino", "--into", dir, "--quiet"}, extra...)...)
		return code, stderr
	}
	if code, stderr := into(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	after := tree(t, dir)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	var added []string
	for p := range after {
		if _, ok := before[p]; !ok {
			added = append(added, filepath.Base(p))
		}
	}
	if got := strings.Join(sortedCopy(added), ","); got != "mtpconv-manifest.json,openvino_mtp_model.bin,openvino_mtp_model.xml" {
		t.Fatalf("added %s", got)
	}
	// The same bytes as a plain export's, recorded in the manifest.
	out := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, out, "--target", "openvino")
	for _, f := range []string{"openvino_mtp_model.xml", "openvino_mtp_model.bin"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(out, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the --out export's", f)
		}
	}
	var man manifests.Manifest
	raw, _ := os.ReadFile(filepath.Join(dir, manifests.FileName))
	if err := json.Unmarshal(raw, &man); err != nil {
		t.Fatal(err)
	}
	if len(man.Files) != 2 {
		t.Errorf("manifest lists %v", man.Files)
	}
	if code, _, stderr := runCLI(t, "verify", "--src", src, dir); code != 0 {
		t.Errorf("verify: %s", stderr)
	}

	// Already there: refused without --force, and nothing moves.
	snap := tree(t, dir)
	if code, stderr := into("--head-precision", "int4"); code == 0 || !strings.Contains(stderr, "--force") {
		t.Errorf("second --into: exit %d: %s", code, stderr)
	}
	if changed := diffTrees(snap, tree(t, dir)); changed != "" {
		t.Errorf("refused --into changed %s", changed)
	}
	// --force replaces the two files (and the manifest) only.
	if code, stderr := into("--force", "--head-precision", "int4"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, stderr)
	}
	now := tree(t, dir)
	for p, h := range now {
		base := filepath.Base(p)
		if base == "openvino_mtp_model.xml" || base == "openvino_mtp_model.bin" || base == manifests.FileName {
			if h == snap[p] {
				t.Errorf("%s not replaced", base)
			}
			continue
		}
		if snap[p] != h {
			t.Errorf("--force changed %s", p)
		}
	}
	if len(now) != len(snap) {
		t.Errorf("--force left %d entries, had %d", len(now), len(snap))
	}
}

func TestIntoRefusesAnotherModelOrFolder(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	run := func(dir string, extra ...string) (int, string) {
		code, _, stderr := runCLI(t, append([]string{"export", "--src", src, "--target", "openvino", "--into", dir, "--quiet"}, extra...)...)
		return code, stderr
	}
	// Every value the head depends on: each differing one is refused, named.
	for _, c := range []struct{ from, to, want string }{
		{`"hidden_size": 128`, `"hidden_size": 3`, "hidden_size"},
		{`"vocab_size": 512`, `"vocab_size": 3`, "vocab_size"},
		{`"mtp_num_hidden_layers": 1`, `"mtp_num_hidden_layers": 3`, "mtp_num_hidden_layers"},
		{`"num_experts": 256`, `"num_experts": 3`, "num_experts"},
		{`"num_experts_per_tok": 8`, `"num_experts_per_tok": 4`, "num_experts_per_tok"},
		{`"num_attention_heads": 4`, `"num_attention_heads": 8`, "num_attention_heads"},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 1`, "num_key_value_heads"},
		{`"head_dim": 64`, `"head_dim": 32`, "head_dim"},
		{`"moe_intermediate_size": 128`, `"moe_intermediate_size": 64`, "moe_intermediate_size"},
		{`"shared_expert_intermediate_size": 128`, `"shared_expert_intermediate_size": 64`, "shared_expert_intermediate_size"},
		{`"attn_output_gate": true`, `"attn_output_gate": false`, "attn_output_gate"},
		{`"rms_norm_eps": 0.000001`, `"rms_norm_eps": 0.00001`, "rms_norm_eps"},
		{`"partial_rotary_factor": 0.25`, `"partial_rotary_factor": 0.5`, "partial_rotary_factor"},
		{`"rope_theta": 10000000`, `"rope_theta": 1000000`, "rope_theta"},
		{`"model_type": "qwen3_5_moe_text"`, `"model_type": "qwen3_5_text"`, "model_type"},
	} {
		bad, want := strings.Replace(string(cfg), c.from, c.to, 1), c.want
		if bad == string(cfg) {
			t.Fatalf("%s not in the fixture config", c.from)
		}
		dir := fakeOptimumExport(t, []byte(bad))
		snap := tree(t, dir)
		if code, stderr := run(dir); code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("%s differs: exit %d: %s", want, code, stderr)
		}
		if d := diffTrees(snap, tree(t, dir)); d != "" {
			t.Errorf("refused --into changed %s", d)
		}
	}
	// Not an optimum export: says what is missing.
	dir := fakeOptimumExport(t, cfg)
	os.Remove(filepath.Join(dir, "openvino_text_embeddings_model.xml"))
	if code, stderr := run(dir); code == 0 || !strings.Contains(stderr, "openvino_text_embeddings_model.xml") {
		t.Errorf("no embeddings IR: exit %d: %s", code, stderr)
	}
	if code, stderr := run(dir, "--out", filepath.Join(t.TempDir(), "o")); code != 2 || !strings.Contains(stderr, "exclusive") {
		t.Errorf("--into with --out: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "mlx", "--into", dir, "--quiet"); code == 0 || !strings.Contains(stderr, "--into") {
		t.Errorf("--target mlx --into: exit %d: %s", code, stderr)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func diffTrees(a, b map[string]string) string {
	var d []string
	for p, h := range a {
		if b[p] != h {
			d = append(d, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, p)
		}
	}
	return strings.Join(d, ", ")
}

// intoFixture adds the Qwen3.6 head into a fake optimum export that has a
// README.md of its own, and returns the source and the folder.
func intoFixture(t *testing.T) (string, string) {
	t.Helper()
	src, dir := optimumExportOfFixture(t)
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\nlicense: apache-2.0\n---\nthe export's own card\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "openvino", "--into", dir, "--quiet"); code != 0 {
		t.Fatalf("--into: exit %d: %s", code, stderr)
	}
	return src, dir
}

// The manifest --into writes records the folder as added into and names
// exactly the files that are ours; --out (with or without --force or
// --resume, any target) refuses such a folder, naming --into, and nothing
// of it changes.
func TestIntoFolderIsNeverReplacedByOut(t *testing.T) {
	t.Parallel()
	src, dir := intoFixture(t)
	var m struct {
		Into *struct {
			OwnedFiles []string `json:"owned_files"`
		} `json:"into"`
	}
	raw, _ := os.ReadFile(filepath.Join(dir, manifests.FileName))
	if err := json.Unmarshal(raw, &m); err != nil || m.Into == nil || strings.Join(m.Into.OwnedFiles, ",") != "openvino_mtp_model.bin,openvino_mtp_model.xml,"+manifests.FileName {
		t.Errorf("manifest records %+v (%v)", m.Into, err)
	}
	snap := tree(t, dir)
	for _, target := range []string{"openvino", "mlx", "gguf"} {
		for _, extra := range [][]string{{"--force"}, nil, {"--resume"}, {"--force", "--resume"}} {
			args := append([]string{"export", "--src", src, "--target", target, "--out", dir, "--quiet"}, extra...)
			code, _, stderr := runCLI(t, args...)
			if code == 0 || !strings.Contains(stderr, "--into") || strings.Contains(stderr, "pass --force") {
				t.Errorf("--target %s %v: exit %d: %s", target, extra, code, stderr)
			}
			if d := diffTrees(snap, tree(t, dir)); d != "" {
				t.Fatalf("--target %s %v changed %s", target, extra, d)
			}
		}
	}
}

// card and verify --save write nothing into a folder the head was added
// into: its README.md is the export's own.
func TestIntoFolderGetsNoCard(t *testing.T) {
	t.Parallel()
	_, dir := intoFixture(t)
	snap := tree(t, dir)
	code, _, stderr := runCLI(t, "card", dir)
	if code != exitFailure || !strings.Contains(stderr, "--into") || !strings.Contains(stderr, "no card written") {
		t.Errorf("card: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "verify", "--save", dir); code != exitFailure || !strings.Contains(stderr, "without --save") {
		t.Errorf("verify --save: exit %d: %s", code, stderr)
	}
	if d := diffTrees(snap, tree(t, dir)); d != "" {
		t.Errorf("changed %s", d)
	}
	if code, _, stderr := runCLI(t, "verify", dir); code != 0 {
		t.Errorf("verify: exit %d: %s", code, stderr)
	}
}

// --into speaks of --into: its dry run lists no README.md (none is
// written), its messages name neither --out nor the staging folder, and a
// missing folder is refused before the Hub is asked anything.
func TestIntoWording(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.Qwen36)
	cfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	dir := fakeOptimumExport(t, cfg)
	snap := tree(t, dir)
	code, stdout, stderr := runCLI(t, "export", "--src", src, "--target", "openvino", "--into", dir, "--dry-run")
	if code != 0 || strings.Contains(stdout, "README.md") || !strings.Contains(stdout, "(plus "+manifests.FileName+")") {
		t.Errorf("dry run: exit %d: %s%s", code, stdout, stderr)
	}
	if d := diffTrees(snap, tree(t, dir)); d != "" {
		t.Errorf("dry run changed %s", d)
	}

	// The export says it wrote no card.
	fresh := fakeOptimumExport(t, cfg)
	if code, _, stderr := runCLI(t, "export", "--src", src, "--target", "openvino", "--into", fresh); code != 0 || !strings.Contains(stderr, "note: no model card written: README.md belongs to the export") {
		t.Errorf("--into: exit %d: %s", code, stderr)
	}

	// Interrupted: names neither the staging folder nor --out.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var o, e strings.Builder
	if code := run(ctx, []string{"mtpconv", "export", "--src", src, "--target", "openvino", "--into", dir, "--quiet"}, &o, &e); code != exitInterrupted ||
		strings.Contains(e.String(), ".mtpconv-into") || strings.Contains(e.String(), "--out") {
		t.Errorf("interrupted: exit %d: %s", code, e.String())
	}
	if d := diffTrees(snap, tree(t, dir)); d != "" {
		t.Errorf("interrupted run changed %s", d)
	}

	// An export kept inside the source folder takes the head (nothing of the
	// source is written); the source folder itself is refused, naming --into.
	root := t.TempDir()
	linked := filepath.Join(root, "src")
	linkFixture(t, fixtures.Qwen36, linked)
	inside := filepath.Join(linked, "ov")
	os.Rename(fakeOptimumExport(t, cfg), inside)
	if code, _, stderr := runCLI(t, "export", "--src", linked, "--target", "openvino", "--into", inside, "--quiet"); code != 0 {
		t.Errorf("--into inside the source: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"openvino_language_model.xml", "openvino_text_embeddings_model.xml"} {
		os.WriteFile(filepath.Join(linked, f), []byte("<net/>"), 0o644)
	}
	before := tree(t, linked)
	if code, _, stderr := runCLI(t, "export", "--src", linked, "--target", "openvino", "--into", linked, "--quiet"); code != exitFailure ||
		!strings.Contains(stderr, "--into "+linked+" is the source folder") {
		t.Errorf("--into the source: exit %d: %s", code, stderr)
	}
	if d := diffTrees(before, tree(t, linked)); d != "" {
		t.Errorf("--into the source changed %s", d)
	}

	// A missing folder: refused before any request to the Hub.
	hub := fakehub.New(hubRepo, src)
	defer hub.Close()
	hubEnv(t, hub.URL)
	missing := filepath.Join(t.TempDir(), "missing")
	if code, _, stderr := runCLI(t, "export", "--src", "hf://"+hubRepo, "--target", "openvino", "--into", missing); code != exitFailure || !strings.Contains(stderr, "no such folder") {
		t.Errorf("missing --into: exit %d: %s", code, stderr)
	}
	if n := len(hub.Requests()); n != 0 {
		t.Errorf("%d requests to the Hub before refusing a missing --into", n)
	}
}

// An optimum-intel export that carries its own MTP IR: --into refuses it,
// with --force too, leaving the folder as it was and saying how to go on (a
// file mtpconv did not write is never replaced, moved or deleted; --force
// used to delete optimum's IR). Moved away by the user, mtpconv's goes in.
func TestIntoNeverTouchesOptimumsMTPIR(t *testing.T) {
	t.Parallel()
	src, dir := optimumExportOfFixture(t)
	own := map[string]string{"openvino_mtp_model.xml": `<net name="optimum's own MTP"/>`, "openvino_mtp_model.bin": "optimum's MTP weights"}
	for f, b := range own {
		os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644)
	}
	args := []string{"export", "--src", src, "--target", "openvino", "--into", dir}
	const why = "already has openvino_mtp_model.bin and openvino_mtp_model.xml, which mtpconv did not write (they came with the export); mtpconv never replaces, moves or deletes a file it did not write, --force or not: move them out of the folder yourself"
	refusedUnchanged(t, dir, exitFailure, why, args...)
	refusedUnchanged(t, dir, exitFailure, why, append(args, "--force")...)
	refusedUnchanged(t, dir, exitFailure, why, append(args, "--force", "--dry-run")...)

	moved := t.TempDir()
	for f := range own {
		os.Rename(filepath.Join(dir, f), filepath.Join(moved, f))
	}
	before := tree(t, dir)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("after moving optimum's IR away: exit %d: %s", code, stderr)
	}
	after := tree(t, dir)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}
	if code, stdout, stderr := runCLI(t, "verify", "--src", src, dir); code != 0 {
		t.Errorf("verify: exit %d: %s%s", code, stdout, stderr)
	}
}
