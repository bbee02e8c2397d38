// Package pydriver runs a runtime whose API is in-process Python (mlx-vlm,
// OpenVINO GenAI) as a process bench can start and stop: a small driver that
// mtpconv ships (the runtime's runtime_driver.py, embedded by its package, and
// the runner mtpconv_driver.py embedded here) is written to a scratch folder
// and run with the user's Python, one process per arm run. They speak JSON
// lines: a start line and then one request per line in, one reply per line out
// (the protocol is described in mtpconv_driver.py). The process runs in its own
// process group (bench/runtimes/proc); its stderr is its log.
package pydriver

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/proc"
)

//go:embed mtpconv_driver.py
var runner []byte

// Bounds on a driver that does not answer. Loading is the runtime's own load of the model (minutes for a large
// one); a request is one generation.
var (
	StartTimeout   = 20 * time.Minute
	RequestTimeout = 30 * time.Minute
)

// Driver is one runtime's Python side.
type Driver struct {
	Runtime string // the name errors use: "mlx-vlm"
	Source  []byte // its runtime_driver.py
}

// Start is what the driver is told first: the files, the arm and the user's runtime arguments.
type Start struct {
	Model       string   `json:"model"`
	Head        string   `json:"head,omitempty"`
	MTP         bool     `json:"mtp"`
	DraftTokens int      `json:"draft_tokens"`
	Args        []string `json:"args"`
}

type request struct {
	Prompt    string             `json:"prompt,omitempty"`
	Messages  []runtimes.Message `json:"messages,omitempty"`
	MaxTokens int                `json:"max_tokens"`
	Seed      int                `json:"seed"`
	Greedy    bool               `json:"greedy"`
}

type result struct {
	Text            string  `json:"text"`
	Tokens          []int   `json:"tokens"`
	PromptTokens    int     `json:"prompt_tokens"`
	DecodeTokens    int     `json:"decode_tokens"`
	DecodePerSecond float64 `json:"decode_per_second"`
	TTFTSeconds     float64 `json:"ttft_seconds"`
	Counted         bool    `json:"counted"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
	AcceptedPerPos  []int   `json:"accepted_per_pos"`
	VerifySteps     int     `json:"verify_steps"`
}

type reply struct {
	Ready *struct {
		Version string `json:"version"`
	} `json:"ready"`
	Result *result `json:"result"`
	Error  *string `json:"error"`
}

// Session is one running driver: one arm, one request at a time.
type Session struct {
	d       Driver
	p       *proc.Process
	in      io.WriteCloser
	replies chan line
	stop    chan struct{} // closed by Close: the reader stops delivering
	work    string        // the folder the driver runs from
	version string
	ended   error // why the driver's output ended, once it has
	mu      sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

type line struct {
	b   []byte
	err error // the end of the driver's stdout
}

// Python is the interpreter a setup names, or python3 from PATH.
func Python(s runtimes.Setup) string {
	if s.Python != "" {
		return s.Python
	}
	return "python3"
}

// Run writes the driver into dir, starts it with python and waits until it has loaded the model (or says why
// it cannot: a missing or too old package is its one-line error naming what to install).
func Run(ctx context.Context, python string, d Driver, dir string, st Start) (*Session, error) {
	path, err := exec.LookPath(python)
	if err != nil {
		return nil, fmt.Errorf("%s: --python %s: %w", d.Runtime, python, err)
	}
	work, err := os.MkdirTemp(dir, "pydriver-")
	if err != nil {
		return nil, fmt.Errorf("%s driver: %w", d.Runtime, err)
	}
	for name, b := range map[string][]byte{"mtpconv_driver.py": runner, "runtime_driver.py": d.Source} {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			os.RemoveAll(work)
			return nil, fmt.Errorf("%s driver: %w", d.Runtime, err)
		}
	}
	env := []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}
	p, in, out, err := proc.StartPiped(d.Runtime, path, []string{"-u", filepath.Join(work, "mtpconv_driver.py")}, env,
		filepath.Join(work, "driver.log"))
	if err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	s := &Session{d: d, p: p, in: in, replies: make(chan line, 1), stop: make(chan struct{}), work: work}
	go s.read(out)
	if err := s.send(st); err != nil {
		s.Close()
		return nil, err
	}
	r, err := s.await(ctx, StartTimeout, "load the model")
	if err == nil && r.Ready == nil {
		err = fmt.Errorf("%s driver: expected its ready line, got %s", d.Runtime, describe(r))
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.version = r.Ready.Version
	return s, nil
}

func (s *Session) read(out io.ReadCloser) {
	defer out.Close()
	br := bufio.NewReader(out)
	for {
		b, err := br.ReadBytes('\n')
		l := line{b: b, err: err}
		select {
		case s.replies <- l:
		case <-s.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *Session) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		return s.p.Explain(fmt.Errorf("%s driver: write: %w", s.d.Runtime, err))
	}
	return nil
}

// await reads the next reply, within bound; the driver's own error comes back as an error (one line: it is
// the message, its traceback is in the log); a driver that stops or never answers is an error with its last
// lines, and is stopped.
func (s *Session) await(ctx context.Context, bound time.Duration, what string) (reply, error) {
	if s.ended != nil {
		return reply{}, s.ended
	}
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case l := <-s.replies:
		if l.err != nil {
			s.ended = s.waitExit()
			if s.ended == nil {
				s.ended = fmt.Errorf("%s driver closed its output without an answer; its last lines:\n%s", s.d.Runtime, s.p.LastLines())
			}
			return reply{}, s.ended
		}
		var r reply
		if err := json.Unmarshal(l.b, &r); err != nil {
			return reply{}, fmt.Errorf("%s driver: a reply that is not JSON: %q", s.d.Runtime, strings.TrimSpace(string(l.b)))
		}
		if r.Error != nil {
			if strings.HasPrefix(*r.Error, s.d.Runtime+" ") { // "mlx-vlm is not installed …" names it already
				return reply{}, errors.New(*r.Error)
			}
			return reply{}, fmt.Errorf("%s: %s", s.d.Runtime, *r.Error)
		}
		return r, nil
	case <-ctx.Done():
		s.p.Stop(proc.StopGrace)
		return reply{}, ctx.Err()
	case <-timer.C:
		s.p.Stop(proc.StopGrace)
		return reply{}, fmt.Errorf("%s driver did not %s within %s; its last lines:\n%s", s.d.Runtime, what, bound, s.p.LastLines())
	}
}

// waitExit is the driver's exit, once its output has ended (it exits right after).
func (s *Session) waitExit() error {
	select {
	case <-s.p.Done():
	case <-time.After(proc.StopGrace):
		s.p.Stop(proc.StopGrace)
	}
	return s.p.Exited()
}

func describe(r reply) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Version is the runtime package's version, as the driver read it.
func (s *Session) Version() string { return s.version }

// Generate serves one request; requests are served one at a time.
func (s *Session) Generate(ctx context.Context, req runtimes.Request) (runtimes.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.send(request{Prompt: req.Prompt, Messages: req.Messages, MaxTokens: req.MaxTokens, Seed: req.Seed,
		Greedy: req.Greedy}); err != nil {
		return runtimes.Result{}, err
	}
	r, err := s.await(ctx, RequestTimeout, "answer a request")
	if err == nil && r.Result == nil {
		err = fmt.Errorf("%s driver: expected a result line, got %s", s.d.Runtime, describe(r))
	}
	if err != nil {
		return runtimes.Result{}, err
	}
	g := r.Result
	return runtimes.Result{
		Text: g.Text, Tokens: g.Tokens, PromptTokens: g.PromptTokens, DecodeTokens: g.DecodeTokens,
		DecodePerSecond: g.DecodePerSecond, TimeToFirstToken: time.Duration(g.TTFTSeconds * float64(time.Second)),
		Counted: g.Counted, Drafted: g.Drafted, Accepted: g.Accepted, AcceptedPerPos: g.AcceptedPerPos,
		VerifySteps: g.VerifySteps,
	}, nil
}

// PeakRSS is the driver process's peak resident memory: the runtime runs in it.
func (s *Session) PeakRSS() (int64, bool) { return s.p.PeakRSS() }

// Close ends the driver: the end of its input stops it; it is stopped by its process group if it does not
// exit within proc.StopGrace. Its folder (the driver files and its log) is removed. Calling it again returns
// the first result.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.in.Close()
		select {
		case <-s.p.Done():
		case <-time.After(proc.StopGrace):
		}
		s.closeErr = s.p.Stop(proc.StopGrace)
		close(s.stop)
		if err := os.RemoveAll(s.work); s.closeErr == nil && err != nil {
			s.closeErr = fmt.Errorf("%s driver: %w", s.d.Runtime, err)
		}
	})
	return s.closeErr
}

// Name is the runtime's name (Runtime.Name for a runtime that embeds its Driver).
func (d Driver) Name() string { return d.Runtime }

// Start is Runtime.Start for a runtime that embeds its Driver: a fresh driver process serving the arm.
func (d Driver) Start(ctx context.Context, s runtimes.Setup, a runtimes.Arm) (runtimes.Session, error) {
	st := Start{Model: s.Model, MTP: a.MTP, DraftTokens: a.DraftTokens, Args: s.RuntimeArgs}
	if a.MTP {
		st.Head = s.Head
	}
	sess, err := Run(ctx, Python(s), d, s.Dir, st)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// CheckInProcess refuses what does not apply to an in-process runtime: a server binary, endpoints (there is no
// server to attach to), and requests at once (the driver serves one at a time).
func (d Driver) CheckInProcess(s runtimes.Setup) error {
	switch {
	case s.Binary != "":
		return fmt.Errorf("--llama-server does not apply to %s (it runs in-process in --python)", d.Runtime)
	case s.Endpoint != "" || s.PlainEndpoint != "":
		return fmt.Errorf("--endpoint and --plain-endpoint do not apply to %s: it has no server; bench runs it in-process with --python", d.Runtime)
	case s.Concurrency > 1:
		return fmt.Errorf("--concurrency %d does not apply to %s: its driver serves one request at a time", s.Concurrency, d.Runtime)
	}
	return nil
}

// Folder checks that path, given as flag, is a folder holding at least one of names (none given: any folder).
func Folder(flag, path string, names ...string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, errors.Unwrap(err)) // the errno: the path is named once
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s: not a folder", flag, path)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(path, n)); err == nil {
			return nil
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("%s %s: no %s in it", flag, path, strings.Join(names, " or "))
	}
	return nil
}

// Config reads dir/config.json; a missing or unreadable one is nil.
func Config(dir string) map[string]any {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
