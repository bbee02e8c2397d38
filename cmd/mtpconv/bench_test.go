package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/report"
	"github.com/mtpconv/mtpconv/internal/fakellama"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// benchFake runs mtpconv bench against internal/fakellama (this test binary
// acting as llama-server, see TestMain) with behaviour b, two prompts, 8
// tokens, one repeat, draft length 1; it returns the exit code, stdout,
// stderr and the --json report decoded.
func benchFake(t *testing.T, b fakellama.Behaviour, args ...string) (int, string, string, map[string]any) {
	t.Helper()
	t.Setenv(fakellama.Env, "1")
	dir := t.TempDir()
	model, err := fakellama.Model(dir, b)
	if err != nil {
		t.Fatal(err)
	}
	promptFile := filepath.Join(dir, "prompts.txt")
	os.WriteFile(promptFile, []byte("def fib(n):\nThe lighthouse keeper\n"), 0o644)
	self, _ := os.Executable()
	jsonPath := filepath.Join(dir, "report.json")
	all := []string{"bench", "--model", model, "--llama-server", self, "--prompts", promptFile, "--max-tokens", "8",
		"--repeats", "1", "--draft-tokens", "1", "--json", jsonPath}
	code, stdout, stderr := runCLI(t, append(all, args...)...)
	var rep map[string]any
	if raw, err := os.ReadFile(jsonPath); err == nil {
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatalf("--json: %v", err)
		}
	}
	return code, stdout, stderr, rep
}

func verdictOf(rep map[string]any) map[string]any {
	return rep["summary"].(map[string]any)["verdict"].(map[string]any)
}

func TestBenchVerdictsAndGate(t *testing.T) {
	cases := []struct {
		name              string
		b                 fakellama.Behaviour
		args              []string
		code              int
		draft, speed, out string
		stdout, stderr    string
	}{
		{"rigged", fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 15}, []string{"--min-acceptance", "0.95", "--require-same-output", "--min-speedup", "1.2"}, 0,
			"drafting", "pays", "identical", "verdict: draft  drafting: acceptance 100.0% (8 of 8 drafted)", ""},
		{"random head", fakellama.Behaviour{Accept: 0.01, PlainTPS: 10, MTPTPS: 8}, []string{"--min-acceptance", "0.5"}, 1,
			"near-zero", "slower", "identical", "mtpconv inspect --strict", "acceptance 0.0000 (0 of 8 drafted) is below --min-acceptance 0.5"},
		{"no verify loop", fakellama.Behaviour{NoDraft: true, PlainTPS: 10, MTPTPS: 10}, []string{"--min-speedup", "1.1"}, 1,
			"not-drafting", "no-gain", "identical", "the runtime drafted nothing", "reaches below --min-speedup 1.1"},
		{"plain not deterministic", fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 15, PlainNoise: true}, []string{"--require-same-output"}, 1,
			"drafting", "pays", "not-judged", "the plain arm is not deterministic", "--require-same-output: output not-judged"},
		{"sampling", fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 15}, []string{"--sample"}, 0,
			"drafting", "pays", "not-judged", "sampling", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr, rep := benchFake(t, c.b, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			if rep == nil {
				t.Fatal("no --json report (it is written also when a gate fails)")
			}
			v := verdictOf(rep)
			if v["draft"] != c.draft || v["speed"] != c.speed || v["output"] != c.out {
				t.Errorf("verdict %v, want %s %s %s\n%s", v, c.draft, c.speed, c.out, stdout)
			}
			if !strings.Contains(stdout, c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, stdout)
			}
			if c.stderr != "" && !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr lacks %q:\n%s", c.stderr, stderr)
			}
		})
	}
}

// The JSON report has issue 39's field names, exactly.
func TestBenchJSONFields(t *testing.T) {
	code, _, stderr, rep := benchFake(t, fakellama.Behaviour{Accept: 0.5, PlainTPS: 10, MTPTPS: 12})
	if code != 0 {
		t.Fatal(stderr)
	}
	has := func(m any, keys ...string) {
		t.Helper()
		obj, ok := m.(map[string]any)
		if !ok {
			t.Fatalf("%v is not an object", m)
		}
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Errorf("no %q in %v", k, obj)
			}
		}
	}
	has(rep, "runtime", "runtime_version", "model", "hardware", "prompts_sha256", "arms", "summary")
	if rep["runtime"] != "llama.cpp" || rep["runtime_version"] != "unknown" || rep["model"] != "fake.gguf" {
		t.Errorf("runtime %v %v, model %v", rep["runtime"], rep["runtime_version"], rep["model"])
	}
	arms := rep["arms"].([]any)
	if len(arms) != 2*3 { // two prompts × plain, mtp(1), plain
		t.Errorf("%d runs", len(arms))
	}
	has(arms[1], "arm", "draft_tokens", "prompt", "tokens", "tokens_per_second", "drafted", "accepted")
	s := rep["summary"]
	has(s, "drafted", "accepted", "acceptance", "acceptance_per_position", "mean_accepted_per_step", "speedup", "same_output", "best_draft_tokens", "verdict")
	sm := s.(map[string]any)
	has(sm["speedup"], "median", "low", "high")
	has(sm["same_output"], "identical", "prompts", "divergences")
	has(sm["verdict"], "draft", "speed", "output")
	// Each start records its discarded warm-up's own counts (8 tokens: 4 drafted, 2 accepted with MTP; none counted plain).
	starts := rep["starts"].([]any)
	if w := starts[1].(map[string]any)["warmup"].(map[string]any); w["counted"] != true || w["drafted"].(float64) != 4 || w["accepted"].(float64) != 2 {
		t.Errorf("MTP warm-up %v", w)
	}
	if w := starts[0].(map[string]any)["warmup"].(map[string]any); w["counted"] != false || w["tokens"].(float64) != 8 {
		t.Errorf("plain warm-up %v", w)
	}
	// 8 tokens at 1 drafted per step: 4 steps, 4 drafted, 2 accepted per prompt.
	if sm["drafted"].(float64) != 8 || sm["accepted"].(float64) != 4 || sm["acceptance"].(float64) != 0.5 || sm["mean_accepted_per_step"].(float64) != 0.5 {
		t.Errorf("summary %v", sm)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--repeats", "0"}, "--repeats is out of range"},
		{[]string{"--draft-tokens", "1,x"}, "give draft lengths"},
		{[]string{"--draft-tokens", "2,2"}, "names 2 twice"},
		{[]string{"--sample", "--require-same-output"}, "needs greedy decoding"},
		{[]string{"--runtime", "tensorrt"}, `--runtime "tensorrt": must be`},
		{[]string{"--python", "/bin/sh"}, "--python does not apply to --runtime llama.cpp"},
		{[]string{"--", "--port", "8080"}, "--port after -- is bench's to set"},
		{[]string{"--min-acceptance", "2"}, "--min-acceptance is out of range"},
	}
	for _, c := range cases {
		code, _, stderr, _ := benchFake(t, fakellama.Behaviour{Accept: 1, PlainTPS: 1, MTPTPS: 1}, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, _, stderr := runCLI(t, "bench"); code != exitUsage || !strings.Contains(stderr, "bench needs --model") {
		t.Errorf("no model: exit %d %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "--model", "/nonexistent/m.gguf"); code != exitFailure || !strings.Contains(stderr, "/nonexistent/m.gguf") {
		t.Errorf("missing model: exit %d %q", code, stderr)
	}
	// A --card folder bench could not record in is refused before anything starts.
	notOurs := t.TempDir()
	if code, _, stderr, _ := benchFake(t, fakellama.Behaviour{Accept: 1, FailStart: true}, "--card", notOurs); code != exitFailure || !strings.Contains(stderr, "not an mtpconv output folder") || strings.Contains(stderr, "bench: start") {
		t.Errorf("--card of a folder mtpconv did not write: exit %d %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "--endpoint", "http://127.0.0.1:1", "--plain-endpoint", "http://127.0.0.1:2", "--runtime", "llama.cpp", "--draft-tokens", "1,2"); code != exitUsage || !strings.Contains(stderr, "fixed when it starts") {
		t.Errorf("endpoint sweep: exit %d %q", code, stderr)
	}
}

// Arguments after -- reach every llama-server start unchanged; a server that
// cannot start fails the run with its last lines.
func TestBenchRuntimeArgsAndStartFailure(t *testing.T) {
	argsFile := filepath.Join(t.TempDir(), "args")
	code, _, stderr, rep := benchFake(t, fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 10, ArgsFile: argsFile}, "--", "-ngl", "99", "--ctx-size", "512")
	if code != 0 {
		t.Fatal(stderr)
	}
	raw, _ := os.ReadFile(argsFile)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d starts, want plain, mtp(1), plain:\n%s", len(lines), raw)
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, " -ngl 99 --ctx-size 512") || strings.Contains(l, "draft-mtp") != (i == 1) {
			t.Errorf("start %d: %s", i, l)
		}
	}
	if !strings.Contains(lines[1], "--spec-type draft-mtp --spec-draft-n-max 1") {
		t.Errorf("the MTP start: %s", lines[1])
	}
	if got := rep["settings"].(map[string]any)["runtime_args"]; len(got.([]any)) != 4 {
		t.Errorf("runtime_args %v", got)
	}
	code, _, stderr, _ = benchFake(t, fakellama.Behaviour{FailStart: true})
	if code != exitFailure || !strings.Contains(stderr, "model doesn't contain MTP layers") || !strings.Contains(stderr, "mtp(1), repeat 1") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// --card on an export's folder writes the report, records its hash in the
// manifest and replaces (never duplicates) the card's section; verify passes.
// On a folder the head was added into, only mtpconv's own files change.
func TestBenchCard(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	exportTo(t, fixtures.Qwen36, out, "--target", "mlx", "--head-precision", "int4")
	cardPath := filepath.Join(out, manifests.CardFile)
	edited, _ := os.ReadFile(cardPath)
	edited = bytes.Replace(edited, []byte("## How to run\n"), []byte("## How to run\n\nOur own note.\n"), 1)
	os.WriteFile(cardPath, edited, 0o644)
	for run := 1; run <= 2; run++ {
		tps := float64(10 * run)
		if code, _, stderr, _ := benchFake(t, fakellama.Behaviour{Accept: 1, PlainTPS: tps, MTPTPS: 2 * tps}, "--card", out); code != 0 {
			t.Fatalf("run %d: %s", run, stderr)
		}
		card, _ := os.ReadFile(cardPath)
		if n := strings.Count(string(card), "## MTP performance"); n != 1 {
			t.Fatalf("run %d: %d MTP performance sections:\n%s", run, n, card)
		}
		if !bytes.Contains(card, []byte("Our own note.")) || !bytes.Contains(card, []byte("## Verification")) {
			t.Errorf("run %d: the card lost its other sections:\n%s", run, card)
		}
		if want := fmt.Sprintf("| plain | – | %.2f ", tps); !bytes.Contains(card, []byte(want)) {
			t.Errorf("run %d: the section is not this run's (%q):\n%s", run, want, card)
		}
		m, err := manifests.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		report, _ := os.ReadFile(filepath.Join(out, "mtpconv-bench.json"))
		found := false
		for _, f := range m.Files {
			if f.Name == "mtpconv-bench.json" {
				found = f.SHA256 == manifests.SHA256(report) && f.Size == int64(len(report))
			}
		}
		if !found || !bytes.Contains(card, []byte(manifests.SHA256(report))) {
			t.Errorf("run %d: the manifest or the card does not record the report's hash", run)
		}
		if code, _ := verifyReport(t, out, ""); code != 0 {
			t.Errorf("run %d: verify exit %d", run, code)
		}
	}
	// mtpconv card renders the card anew from the manifest and keeps the section.
	withSection, _ := os.ReadFile(cardPath)
	if code, _, stderr := runCLI(t, "card", out); code != 0 {
		t.Fatal(stderr)
	}
	rendered, _ := os.ReadFile(cardPath)
	if report.Section(rendered, report.CardHeading) != report.Section(withSection, report.CardHeading) || strings.Count(string(rendered), "## MTP performance") != 1 {
		t.Errorf("mtpconv card lost or changed the MTP performance section:\n%s", rendered)
	}
	// A changed report is caught by verify.
	os.WriteFile(filepath.Join(out, "mtpconv-bench.json"), []byte("{}\n"), 0o644)
	if code, r := verifyReport(t, out, ""); code == 0 || !strings.Contains(kinds(r), "file_hash") {
		t.Errorf("verify of an edited report: exit %d, %s", code, kinds(r))
	}

	_, dir := intoFixture(t)
	before := readDir(t, dir)
	if code, _, stderr, _ := benchFake(t, fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 20}, "--card", dir); code != 0 {
		t.Fatal(stderr)
	}
	after := readDir(t, dir)
	for name, b := range before {
		if name != manifests.FileName && !bytes.Equal(after[name], b) {
			t.Errorf("--card changed %s, a file of the folder the head was added into", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok && name != "mtpconv-bench.json" {
			t.Errorf("--card wrote %s", name)
		}
	}
	if code, r := verifyReport(t, dir, ""); code != 0 {
		t.Errorf("verify of the --into folder: exit %d, %s", code, kinds(r))
	}
	m, _ := manifests.Load(dir)
	if !m.Owns("mtpconv-bench.json") {
		t.Error("the manifest does not own the report it records")
	}
}
