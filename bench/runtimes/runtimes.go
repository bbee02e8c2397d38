// Package runtimes is the interface between `mtpconv bench` and the runtimes
// it measures (llama.cpp, vLLM, mlx-vlm, OpenVINO GenAI), and their registry.
// A runtime starts one arm (plain, or with the MTP head drafting K tokens) as
// the user serves it and answers requests with the runtime's own counters;
// bench decides the schedule and judges the numbers. Each runtime package
// registers itself from init; cmd/mtpconv imports them blank.
package runtimes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Arm is one way of serving: plain, or with the MTP head drafting DraftTokens tokens per step.
type Arm struct {
	MTP         bool
	DraftTokens int // 0 for the plain arm
}

func (a Arm) String() string {
	if !a.MTP {
		return "plain"
	}
	return fmt.Sprintf("mtp(%d)", a.DraftTokens)
}

// Setup is what the user serves: their files and their own runtime arguments (after `--`), unchanged.
type Setup struct {
	Model         string   // trunk/bundled GGUF, HF repo folder, MLX folder, OpenVINO folder
	Head          string   // sidecar GGUF / drafter folder / MTP IR folder; "" when the head is inside Model
	RuntimeArgs   []string // the arguments after `--`, passed unchanged
	Binary        string   // --llama-server PATH ("" = find it on PATH)
	Python        string   // --python PATH ("" = the runtime's default)
	Endpoint      string   // --endpoint URL (MTP arm): measures a server the user runs; nothing started
	PlainEndpoint string   // --plain-endpoint URL (plain arm)
	Concurrency   int      // requests bench sends at once through one Session (1 = one at a time)
	Dir           string   // a scratch dir the runtime may use (logs), removed by bench
}

// Runtime starts one arm. A runtime that is missing or too old returns an error naming what to install.
type Runtime interface {
	Name() string // "llama.cpp", "vllm", "mlx-vlm", "openvino-genai"
	// Check refuses, before anything starts, a setup this runtime cannot serve: a flag that does not
	// apply (--llama-server for vLLM, --endpoint for an in-process driver), Concurrency > 1 where requests
	// cannot run at once, a Model of the wrong kind. bench reports its error as a usage error (exit 2),
	// except one that wraps fs.ErrNotExist (a --model or --head that is not there: exit 1).
	Check(s Setup) error
	// Claims says whether the files are obviously this runtime's (a .gguf Model is llama.cpp's), so that
	// --runtime can be left out; bench requires the flag when no runtime, or more than one, claims them.
	Claims(s Setup) bool
	// HeadCount is the number of MTP layers the files declare (the default sweep is 1..min(count, 3)),
	// 0 when the runtime cannot tell.
	HeadCount(s Setup) int
	// Start starts a fresh process serving the arm (or attaches to the arm's endpoint) and returns when it
	// is ready to serve, within a bounded time. A process that dies or never gets ready is an error that
	// carries its last lines of output.
	Start(ctx context.Context, s Setup, a Arm) (Session, error)
}

// Session serves requests of one arm until Close.
type Session interface {
	Version() string // the runtime's own version, or "unknown" (llama.cpp's vendored build prints none)
	// Generate serves one request. It is safe for concurrent use where Check accepted Concurrency > 1.
	Generate(ctx context.Context, r Request) (Result, error)
	PeakRSS() (bytes int64, ok bool) // of the serving process, when the OS tells (false for an endpoint)
	Close() error                    // stops and reaps the process (SIGTERM, then SIGKILL after a bound); safe to call twice
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one generation. Exactly one of Prompt and Messages is set.
type Request struct {
	Prompt    string    // raw prompt, or
	Messages  []Message // chat messages (role, content), formatted by the runtime's chat template
	MaxTokens int
	Seed      int
	Greedy    bool // temperature 0 / top_k 1 (bench's default); false = the runtime's sampling
}

// Result is one request as the runtime reported it. Counts are the runtime's own; Counted=false when the
// runtime reported no draft counters for this request (llama.cpp omits timings.draft_n when nothing drafted).
type Result struct {
	Text             string
	Tokens           []int // generated token ids where the runtime gives them (else nil: bench compares Text)
	PromptTokens     int
	DecodeTokens     int
	DecodePerSecond  float64 // the runtime's own where it reports one, else from its own timings
	TimeToFirstToken time.Duration
	Counted          bool
	Drafted          int
	Accepted         int
	AcceptedPerPos   []int // index i = drafts accepted at position i (nil when the runtime does not say)
	VerifySteps      int   // drafts (verify steps), 0 when unknown
}

var (
	mu       sync.Mutex
	registry = map[string]Runtime{}
)

// Register adds a runtime; each runtime package calls it from init.
func Register(r Runtime) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[r.Name()]; dup {
		panic("bench: runtime " + r.Name() + " registered twice")
	}
	registry[r.Name()] = r
}

// Names lists the registered runtimes, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup finds a registered runtime by its --runtime name.
func Lookup(name string) (Runtime, error) {
	mu.Lock()
	r, ok := registry[name]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("--runtime %q: must be %s", name, strings.Join(Names(), ", "))
	}
	return r, nil
}

// Infer picks the one runtime that claims the setup's files, or says that --runtime is needed.
func Infer(s Setup) (Runtime, error) {
	var claimed []Runtime
	for _, n := range Names() {
		r, _ := Lookup(n)
		if r.Claims(s) {
			claimed = append(claimed, r)
		}
	}
	switch len(claimed) {
	case 1:
		return claimed[0], nil
	case 0:
		return nil, fmt.Errorf("cannot tell which runtime serves %s: give --runtime (%s)", s.Model, strings.Join(Names(), ", "))
	default:
		names := make([]string, len(claimed))
		for i, r := range claimed {
			names[i] = r.Name()
		}
		return nil, fmt.Errorf("%s can be served by %s: give --runtime", s.Model, strings.Join(names, " or "))
	}
}
