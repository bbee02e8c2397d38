package llamacpp

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/proc"
	"github.com/mtpconv/mtpconv/internal/fakellama"
)

// TestMain lets this test binary act as llama-server (internal/fakellama).
func TestMain(m *testing.M) {
	if os.Getenv(fakellama.Env) == "1" {
		fakellama.Main(os.Args[1:])
	}
	os.Exit(m.Run())
}

func fakeSetup(t *testing.T, b fakellama.Behaviour) runtimes.Setup {
	t.Helper()
	t.Setenv(fakellama.Env, "1")
	model, err := fakellama.Model(t.TempDir(), b)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	return runtimes.Setup{Model: model, Binary: self, Dir: t.TempDir(), Concurrency: 1}
}

func lookup(t *testing.T) runtimes.Runtime {
	rt, err := runtimes.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func generate(t *testing.T, rt runtimes.Runtime, s runtimes.Setup, a runtimes.Arm) (runtimes.Result, runtimes.Session) {
	t.Helper()
	sess, err := rt.Start(context.Background(), s, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	res, err := sess.Generate(context.Background(), runtimes.Request{Prompt: "hello", MaxTokens: 16, Greedy: true})
	if err != nil {
		t.Fatal(err)
	}
	return res, sess
}

func TestCountsAreTheServers(t *testing.T) {
	rt := lookup(t)
	s := fakeSetup(t, fakellama.Behaviour{Accept: 0.5, PlainTPS: 10, MTPTPS: 12})
	// 16 tokens at 3 drafted per step: 4 steps, 12 drafted, 6 accepted (4 at position 0, 2 at 1).
	res, sess := generate(t, rt, s, runtimes.Arm{MTP: true, DraftTokens: 3})
	if !res.Counted || res.Drafted != 12 || res.Accepted != 6 || res.VerifySteps != 4 || len(res.AcceptedPerPos) != 3 ||
		res.AcceptedPerPos[0] != 4 || res.AcceptedPerPos[1] != 2 || res.AcceptedPerPos[2] != 0 {
		t.Errorf("MTP result %+v", res)
	}
	if res.DecodeTokens != 16 || res.DecodePerSecond != 12 || len(res.Tokens) != 16 || res.TimeToFirstToken.Seconds() != 0.0015 {
		t.Errorf("MTP result %+v", res)
	}
	if sess.Version() != "unknown" {
		t.Errorf("version %q: the vendored build's b0-unknown is unknown", sess.Version())
	}
	if b, ok := sess.PeakRSS(); !ok || b <= 0 {
		t.Errorf("peak RSS %d %v", b, ok)
	}
	// The plain arm: timings carry no draft_n, so nothing is counted (not a count of 0).
	res, _ = generate(t, rt, s, runtimes.Arm{})
	if res.Counted || res.Drafted != 0 || res.AcceptedPerPos != nil {
		t.Errorf("plain result %+v", res)
	}
}

func TestNothingDraftedIsNotCounted(t *testing.T) {
	rt := lookup(t)
	s := fakeSetup(t, fakellama.Behaviour{NoDraft: true, PlainTPS: 10, MTPTPS: 10})
	res, _ := generate(t, rt, s, runtimes.Arm{MTP: true, DraftTokens: 2})
	if res.Counted || res.Drafted != 0 || res.AcceptedPerPos != nil {
		t.Errorf("result %+v", res)
	}
}

func TestDeathCarriesTheLastLines(t *testing.T) {
	rt := lookup(t)
	s := fakeSetup(t, fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 10, DieAfter: 1})
	sess, err := rt.Start(context.Background(), s, runtimes.Arm{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	_, err = sess.Generate(context.Background(), runtimes.Request{Prompt: "x", MaxTokens: 4, Greedy: true})
	if err == nil || !strings.Contains(err.Error(), "llama-server stopped (exit status 3)") || !strings.Contains(err.Error(), "GGML_ASSERT") {
		t.Errorf("got %v", err)
	}
	s = fakeSetup(t, fakellama.Behaviour{FailStart: true})
	_, err = rt.Start(context.Background(), s, runtimes.Arm{MTP: true, DraftTokens: 1})
	if err == nil || !strings.Contains(err.Error(), "model doesn't contain MTP layers") {
		t.Errorf("got %v", err)
	}
}

func TestMissingOrOldBinary(t *testing.T) {
	rt := &runtime{checked: map[string]error{}}
	old := filepath.Join(t.TempDir(), "llama-server")
	os.WriteFile(old, []byte("#!/bin/sh\necho '--draft N'\n"), 0o755)
	t.Setenv("PATH", t.TempDir())
	for _, c := range []struct {
		s    runtimes.Setup
		want string
	}{
		{runtimes.Setup{Model: "m.gguf"}, "llama-server is not on PATH: install llama.cpp's llama-server"},
		{runtimes.Setup{Model: "m.gguf", Binary: old}, "is too old: its --help names no `--spec-type draft-mtp`; install"},
	} {
		_, err := rt.Start(context.Background(), c.s, runtimes.Arm{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %v, want one line with %q", err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	rt := lookup(t)
	m := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(m, nil, 0o644)
	cases := []struct {
		s    runtimes.Setup
		want string
	}{
		{runtimes.Setup{Model: m, Head: m + ".missing"}, "--head " + m + ".missing: stat"},
		{runtimes.Setup{Model: m, RuntimeArgs: []string{"-ngl", "99", "--ctx-size", "4096"}}, ""},
		{runtimes.Setup{Model: m, RuntimeArgs: []string{"--port", "8080"}}, "--port after -- is bench's to set"},
		{runtimes.Setup{Model: m, RuntimeArgs: []string{"--spec-type=draft-mtp"}}, "is bench's to set"},
		{runtimes.Setup{Model: m, Python: "python3"}, "--python does not apply"},
		{runtimes.Setup{Endpoint: "http://x"}, "go together"},
		{runtimes.Setup{Endpoint: "http://x", PlainEndpoint: "http://y", Head: "h.gguf"}, "do not apply"},
		{runtimes.Setup{Endpoint: "http://x", PlainEndpoint: "http://y"}, ""},
		{runtimes.Setup{}, "give the model"},
	}
	for _, c := range cases {
		err := rt.Check(c.s)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want %q", c.s, err, c.want)
		}
	}
	if err := rt.Check(runtimes.Setup{Model: m + ".missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing model: %v, want an error wrapping fs.ErrNotExist (exit 1, not a usage error)", err)
	}
	if !rt.Claims(runtimes.Setup{Model: "x/Model-Q4_K_M.GGUF"}) || rt.Claims(runtimes.Setup{Model: "x/mlx-folder"}) {
		t.Error("Claims")
	}
}

// An endpoint is measured as it is: nothing started, nothing stopped, no peak memory.
func TestEndpoint(t *testing.T) {
	s := fakeSetup(t, fakellama.Behaviour{Accept: 1, PlainTPS: 10, MTPTPS: 20})
	port, _ := proc.FreePort()
	p, err := proc.Start("fake", s.Binary, []string{"-m", s.Model, "--port", itoa(port), "--spec-type", "draft-mtp", "--spec-draft-n-max", "2"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(proc.StopGrace)
	url := "http://127.0.0.1:" + itoa(port)
	if err := proc.WaitHealthy(context.Background(), p, url+"/health", HealthTimeout); err != nil {
		t.Fatal(err)
	}
	rt := lookup(t)
	res, sess := generate(t, rt, runtimes.Setup{Endpoint: url, PlainEndpoint: url}, runtimes.Arm{MTP: true, DraftTokens: 2})
	if !res.Counted || res.Accepted != res.Drafted || res.Drafted == 0 {
		t.Errorf("result %+v", res)
	}
	if _, ok := sess.PeakRSS(); ok {
		t.Error("peak RSS of a server bench did not start")
	}
	sess.Close()
	if p.Exited() != nil {
		t.Error("Close stopped the user's server")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP llamacpp:spec_decode_num_draft_tokens_total x
llamacpp:spec_decode_num_draft_tokens_total 30
llamacpp:spec_decode_num_accepted_tokens_total 12
llamacpp:spec_decode_num_drafts_total 10
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 4
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 8
llamacpp:prompt_tokens_total 99
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil || !m.ok || m.draftTokens != 30 || m.accepted != 12 || m.drafts != 10 || len(m.perPos) != 2 || m.perPos[0] != 8 || m.perPos[1] != 4 {
		t.Errorf("%+v %v", m, err)
	}
	if m, _ := ParseMetrics(strings.NewReader("llamacpp:prompt_tokens_total 9\n")); m.ok {
		t.Error("metrics without spec-decode counters read as ok")
	}
}
