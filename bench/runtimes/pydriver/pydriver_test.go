package pydriver

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

// fake is a runtime_driver.py with no runtime: it answers from the request, and misbehaves on cue.
const fake = `
import os, sys, time
REQUIRES = [%s]

def version():
    return "9.9"

class Session(object):
    def __init__(self, cfg):
        self.cfg = cfg

    def generate(self, req):
        p = req.get("prompt") or req["messages"][0]["content"]
        print("noise on stdout from the runtime")
        os.write(1, b"noise on fd 1\n")
        if p == "die":
            sys.stderr.write("the runtime fell over\n")
            sys.stderr.flush()
            os._exit(3)
        if p == "hang":
            time.sleep(600)
        if p == "fail":
            raise RuntimeError("no such token")
        mtp = self.cfg["mtp"]
        return {"text": p.upper(), "tokens": [1, 2, 3], "prompt_tokens": len(p), "decode_tokens": req["max_tokens"],
                "decode_per_second": 12.5, "ttft_seconds": 0.25, "counted": mtp,
                "drafted": 6 if mtp else 0, "accepted": 4 if mtp else 0,
                "accepted_per_pos": [2, 2] if mtp else None, "verify_steps": 3 if mtp else 0,
                "args": self.cfg["args"]}

def start(cfg):
    if cfg["model"] == "missing-model":
        raise FileNotFoundError("no config.json in missing-model")
    return Session(cfg)
`

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not on PATH: these tests run the driver runner with it")
	}
	return p
}

func run(t *testing.T, requires string, st Start) (*Session, error) {
	t.Helper()
	d := Driver{Runtime: "fake", Source: []byte(strings.Replace(fake, "%s", requires, 1))}
	return Run(context.Background(), python(t), d, t.TempDir(), st)
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := run(t, "", Start{Model: "m", MTP: true, DraftTokens: 2, Args: []string{"a=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Version() != "9.9" {
		t.Errorf("version %q", s.Version())
	}
	for _, c := range []struct {
		text string
		req  runtimes.Request
	}{
		{"hello", runtimes.Request{Prompt: "hello", MaxTokens: 7, Greedy: true}},
		{"chat", runtimes.Request{Messages: []runtimes.Message{{Role: "user", Content: "chat"}}, MaxTokens: 5}},
	} {
		got, err := s.Generate(context.Background(), c.req)
		if err != nil {
			t.Fatal(err)
		}
		want := runtimes.Result{Text: strings.ToUpper(c.text), Tokens: []int{1, 2, 3}, PromptTokens: len(c.text),
			DecodeTokens: c.req.MaxTokens, DecodePerSecond: 12.5, TimeToFirstToken: 250 * time.Millisecond,
			Counted: true, Drafted: 6, Accepted: 4, AcceptedPerPos: []int{2, 2}, VerifySteps: 3}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.text, got, want)
		}
	}
	if b, ok := s.PeakRSS(); !ok || b <= 0 {
		t.Errorf("peak RSS %d %v", b, ok)
	}
}

// The driver's own errors are one line; a process that dies or hangs is an error with its last lines, and is
// stopped; a missing or too old package names what to install.
func TestFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, requires, model, prompt string
		want                          []string
	}{
		{"missing package", `("mtpconv-no-such-package", "1.0", "pip install mtpconv-no-such-package==1.0")`, "m", "",
			[]string{"fake: mtpconv-no-such-package is not installed for ", ": pip install mtpconv-no-such-package==1.0"}},
		{"missing, named as the runtime", `("fake", "1.0", "pip install fake==1.0")`, "m", "",
			[]string{"fake is not installed for ", ": pip install fake==1.0"}},
		{"too old", `("pip", "999.1", "pip install pip==999.1")`, "m", "",
			[]string{"fake: pip ", " is older than 999.1 (", "): pip install pip==999.1"}},
		{"start fails", "", "missing-model", "", []string{"fake: FileNotFoundError: no config.json in missing-model"}},
		{"request fails", "", "m", "fail", []string{"fake: RuntimeError: no such token"}},
		{"dies", "", "m", "die", []string{"fake stopped (exit status 3)", "the runtime fell over"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := run(t, c.requires, Start{Model: c.model})
			if err == nil {
				defer s.Close()
				_, err = s.Generate(context.Background(), runtimes.Request{Prompt: c.prompt, MaxTokens: 1})
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.HasPrefix(err.Error(), "fake: fake ") {
				t.Errorf("the runtime named twice: %q", err)
			}
			if c.prompt == "" && strings.Contains(err.Error(), "\n") {
				t.Errorf("a setup error is one line: %q", err)
			}
		})
	}
}

func TestHangIsStopped(t *testing.T) {
	t.Parallel()
	s, err := run(t, "", Start{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = s.Generate(ctx, runtimes.Request{Prompt: "hang", MaxTokens: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	select {
	case <-s.p.Done():
	case <-time.After(time.Minute):
		t.Fatal("the hung driver was not stopped")
	}
	if _, err := s.Generate(context.Background(), runtimes.Request{Prompt: "x", MaxTokens: 1}); err == nil {
		t.Error("a stopped driver answered")
	}
	s.Close()
}

func TestCloseEndsTheDriverAndRemovesItsFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Run(context.Background(), python(t), Driver{Runtime: "fake", Source: []byte(strings.Replace(fake, "%s", "", 1))},
		dir, Start{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // bench closes a session twice (deferred and at the end of a step)
		t.Fatal(err)
	}
	if err := s.p.Exited(); err == nil || !strings.Contains(err.Error(), "(exited)") {
		t.Errorf("the driver did not end by itself on the end of its input: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestMissingPython(t *testing.T) {
	t.Parallel()
	_, err := Run(context.Background(), filepath.Join(t.TempDir(), "no-python"), Driver{Runtime: "fake"}, t.TempDir(), Start{})
	if err == nil || !strings.Contains(err.Error(), "--python") {
		t.Fatalf("error %v", err)
	}
}
