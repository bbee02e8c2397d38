package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/proc"
)

// RequestTimeout bounds one request (a long generation on a CPU included).
const RequestTimeout = 30 * time.Minute

// settleTimeout bounds the wait for /metrics to count a request whose
// response has arrived (vLLM records its statistics in the same step it
// hands the output over; the wait only guards against a lag).
const settleTimeout = 10 * time.Second

// session is one vLLM server serving one arm: started by bench (p != nil)
// or the user's (an endpoint).
type session struct {
	base    string
	arm     runtimes.Arm
	p       *proc.Process
	client  *http.Client
	model   string // the id the server serves the model as (/v1/models)
	version string
	spec    bool // /metrics has the spec-decode series: the server drafts

	mu       sync.Mutex
	inflight map[*flight]bool
	peak     int64
}

// flight is one request in progress; overlapped is set when another request
// was in flight at any moment of it, so that /metrics deltas are not its own.
type flight struct{ overlapped bool }

// attach measures a server the user runs. Its arm is what the server was
// started with: the MTP endpoint must draft (else every request reports no
// draft counts, and bench says not-drafting) with the arm's draft length,
// the plain endpoint must not.
func attach(ctx context.Context, endpoint string, a runtimes.Arm) (runtimes.Session, error) {
	base, err := baseURL(endpoint)
	if err != nil {
		return nil, err
	}
	s, err := open(ctx, base, a, nil)
	if err != nil {
		return nil, fmt.Errorf("vllm endpoint %s: %w", endpoint, err)
	}
	return s, nil
}

// open reads what bench needs of a healthy server: its version, the model it
// serves, whether it drafts and how many tokens.
func open(ctx context.Context, base string, a runtimes.Arm, p *proc.Process) (*session, error) {
	s := &session{base: base, arm: a, p: p, client: &http.Client{}, inflight: map[*flight]bool{}}
	var v struct {
		Version string `json:"version"`
	}
	if err := s.getJSON(ctx, "/version", &v); err != nil {
		return nil, err
	}
	s.version = v.Version
	if s.version == "" {
		s.version = "unknown"
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := s.getJSON(ctx, "/v1/models", &models); err != nil {
		return nil, err
	}
	if len(models.Data) == 0 {
		return nil, fmt.Errorf("%s/v1/models lists no model", base)
	}
	s.model = models.Data[0].ID
	c, err := s.counters(ctx)
	if err != nil {
		return nil, err
	}
	s.spec = c.Spec
	switch {
	case !a.MTP && c.Spec:
		return nil, fmt.Errorf("the plain arm's server drafts (its /metrics has %s): it must be the same model served without --speculative-config", metricDrafts)
	case a.MTP && c.Spec && len(c.AcceptedPerPos) != a.DraftTokens:
		return nil, fmt.Errorf("the server drafts %d tokens per step (its %s series), not %d: give --draft-tokens %d",
			len(c.AcceptedPerPos), metricAcceptedPerPos, a.DraftTokens, len(c.AcceptedPerPos))
	case a.MTP && !c.Spec && p != nil:
		return nil, fmt.Errorf("vLLM %s was started with --speculative-config but its /metrics has no %s", s.version, metricDrafts)
	}
	return s, nil
}

func (s *session) Version() string { return s.version }

func (s *session) PeakRSS() (int64, bool) {
	if s.p == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readPeak()
	return s.peak, s.peak > 0
}

// readPeak adds up the peak resident memory of every process of the
// server's process group (vLLM runs its engine in a child process: the
// weights and the KV cache live there), keeping the largest sum seen; the
// server's own reading (rusage) once it has exited. Called with s.mu held.
func (s *session) readPeak() {
	if b, ok := s.p.GroupPeakRSS(); ok {
		s.peak = max(s.peak, b)
	} else if b, ok := s.p.PeakRSS(); ok {
		s.peak = max(s.peak, b)
	}
}

func (s *session) Close() error {
	if s.p == nil {
		return nil
	}
	s.mu.Lock()
	s.readPeak()
	s.mu.Unlock()
	return s.p.Stop(proc.StopGrace)
}

// completionBody is the request as vLLM's OpenAI server takes it:
// return_token_ids asks for the generated token ids (vLLM's extension; a
// server without it ignores the field and bench compares text).
func completionBody(model string, r runtimes.Request) (path string, body []byte, err error) {
	if (r.Prompt == "") == (len(r.Messages) == 0) {
		return "", nil, errors.New("vllm: a request has a prompt or chat messages, not both or neither")
	}
	req := map[string]any{"model": model, "max_tokens": r.MaxTokens, "seed": r.Seed, "return_token_ids": true, "stream": false}
	if r.Greedy {
		req["temperature"] = 0
	}
	path = "/v1/completions"
	if len(r.Messages) > 0 {
		path, req["messages"] = "/v1/chat/completions", r.Messages
	} else {
		req["prompt"] = r.Prompt
	}
	body, err = json.Marshal(req)
	return path, body, err
}

// response is what bench reads of a completions or chat completions answer.
type response struct {
	Choices []struct {
		Text    string `json:"text"`
		Message *struct {
			Content          string `json:"content"`
			Reasoning        string `json:"reasoning"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		TokenIDs []int `json:"token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Metrics *struct {
		TimeToFirstTokenMs *float64 `json:"time_to_first_token_ms"`
		GenerationTimeMs   *float64 `json:"generation_time_ms"`
		Spec               *struct {
			AcceptanceHistogram []int `json:"acceptance_histogram"`
			NumSpecSteps        int   `json:"num_spec_steps"`
			NumAccepted         int   `json:"num_accepted_draft_tokens"`
			NumDraftTokens      int   `json:"num_draft_tokens"`
		} `json:"speculative_decoding"`
	} `json:"metrics"`
}

func (s *session) Generate(ctx context.Context, r runtimes.Request) (runtimes.Result, error) {
	res, err := s.generate(ctx, r)
	if err != nil && s.p != nil {
		return res, s.p.Explain(err)
	}
	return res, err
}

func (s *session) generate(ctx context.Context, r runtimes.Request) (runtimes.Result, error) {
	path, body, err := completionBody(s.model, r)
	if err != nil {
		return runtimes.Result{}, err
	}
	f := s.enter()
	defer s.leave(f)
	before, err := s.counters(ctx)
	if err != nil {
		return runtimes.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var resp response
	if err := s.postJSON(ctx, path, body, &resp); err != nil {
		return runtimes.Result{}, err
	}
	if len(resp.Choices) != 1 {
		return runtimes.Result{}, fmt.Errorf("vllm %s: %d choices in the answer, want 1", path, len(resp.Choices))
	}
	var delta *counters
	if !s.overlapped(f) {
		d, err := s.settle(ctx, before, resp.Usage.CompletionTokens)
		if err != nil {
			return runtimes.Result{}, err
		}
		// A request bench did not send (another client of an endpoint) would be
		// counted with this one: more finished requests or tokens than this one's.
		if !s.overlapped(f) && d.Finished == 1 && d.GenerationTokens == float64(resp.Usage.CompletionTokens) {
			delta = &d
		}
	}
	return result(resp, delta, s.spec)
}

// result turns an answer, and the server's counter deltas over it (nil when
// another request overlapped it), into bench's Result: the per-request
// metrics of the answer where the server gives them, the deltas otherwise;
// where both are there they must agree.
func result(resp response, delta *counters, spec bool) (runtimes.Result, error) {
	c := resp.Choices[0]
	res := runtimes.Result{Text: c.Text, Tokens: c.TokenIDs, PromptTokens: resp.Usage.PromptTokens,
		DecodeTokens: resp.Usage.CompletionTokens}
	if c.Message != nil {
		res.Text = c.Message.Reasoning + c.Message.ReasoningContent + c.Message.Content
	}
	n := resp.Usage.CompletionTokens
	var decodeSeconds float64
	switch m := resp.Metrics; {
	case m != nil && m.TimeToFirstTokenMs != nil && m.GenerationTimeMs != nil:
		res.TimeToFirstToken = time.Duration(*m.TimeToFirstTokenMs * float64(time.Millisecond))
		decodeSeconds = *m.GenerationTimeMs / 1000
	case delta != nil:
		res.TimeToFirstToken = time.Duration(delta.TTFTSeconds * float64(time.Second))
		decodeSeconds = delta.DecodeSeconds
	}
	if n > 1 && decodeSeconds > 0 {
		// vLLM's decode time runs from the first generated token to the last.
		res.DecodePerSecond = float64(n-1) / decodeSeconds
	}
	var fromDelta *runtimes.Result
	if delta != nil && delta.Spec {
		fromDelta = &runtimes.Result{Counted: true, Drafted: int(delta.DraftTokens), Accepted: int(delta.Accepted),
			VerifySteps: int(delta.Drafts), AcceptedPerPos: ints(delta.AcceptedPerPos)}
	}
	if resp.Metrics != nil && resp.Metrics.Spec != nil {
		sp := resp.Metrics.Spec
		own := runtimes.Result{Counted: true, Drafted: sp.NumDraftTokens, Accepted: sp.NumAccepted,
			VerifySteps: sp.NumSpecSteps, AcceptedPerPos: perPosition(sp.AcceptanceHistogram)}
		if fromDelta != nil && !sameCounts(own, *fromDelta) {
			return runtimes.Result{}, fmt.Errorf("vLLM's per-request draft counts (drafted %d, accepted %d, steps %d, per position %v) disagree with its /metrics over the same request (drafted %d, accepted %d, steps %d, per position %v)",
				own.Drafted, own.Accepted, own.VerifySteps, own.AcceptedPerPos, fromDelta.Drafted, fromDelta.Accepted, fromDelta.VerifySteps, fromDelta.AcceptedPerPos)
		}
		fromDelta = &own
	}
	if fromDelta != nil {
		res.Counted, res.Drafted, res.Accepted = true, fromDelta.Drafted, fromDelta.Accepted
		res.VerifySteps, res.AcceptedPerPos = fromDelta.VerifySteps, fromDelta.AcceptedPerPos
	}
	return res, nil
}

// perPosition turns vLLM's per-request histogram (index j: verify steps that
// accepted exactly j draft tokens) into accepted drafts per position: a draft
// at position i is accepted in every step that accepted more than i, as
// vLLM's own per-position counter counts them.
func perPosition(hist []int) []int {
	if len(hist) < 2 {
		return nil
	}
	out := make([]int, len(hist)-1)
	for j, n := range hist {
		for i := 0; i < j; i++ {
			out[i] += n
		}
	}
	return out
}

func sameCounts(a, b runtimes.Result) bool {
	return a.Drafted == b.Drafted && a.Accepted == b.Accepted && a.VerifySteps == b.VerifySteps &&
		slices.Equal(a.AcceptedPerPos, b.AcceptedPerPos)
}

func ints(f []float64) []int {
	out := make([]int, len(f))
	for i, v := range f {
		out[i] = int(v)
	}
	return out
}

func (s *session) enter() *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &flight{}
	if len(s.inflight) > 0 {
		f.overlapped = true
		for g := range s.inflight {
			g.overlapped = true
		}
	}
	s.inflight[f] = true
	return f
}

func (s *session) leave(f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, f)
	if s.p != nil {
		s.readPeak()
	}
}

func (s *session) overlapped(f *flight) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f.overlapped
}

// settle reads /metrics until it has counted the finished request (its
// decode time recorded and its generated tokens counted), within
// settleTimeout, and returns the change since before.
func (s *session) settle(ctx context.Context, before counters, generated int) (counters, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		after, err := s.counters(ctx)
		if err != nil {
			return counters{}, err
		}
		d, err := after.sub(before)
		if err != nil {
			return counters{}, err
		}
		if d.Finished >= 1 && d.GenerationTokens >= float64(generated) {
			return d, nil
		}
		if time.Now().After(deadline) {
			return counters{}, fmt.Errorf("vllm /metrics did not count the request within %s (finished %v, generated tokens %v of %d): was the server started with --disable-log-stats?",
				settleTimeout, d.Finished, d.GenerationTokens, generated)
		}
		select {
		case <-ctx.Done():
			return counters{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *session) counters(ctx context.Context) (counters, error) {
	text, err := s.get(ctx, "/metrics")
	if err != nil {
		return counters{}, err
	}
	samples, err := parseMetrics(string(text))
	if err != nil {
		return counters{}, fmt.Errorf("%s/metrics: %w", s.base, err)
	}
	return readCounters(samples)
}

func (s *session) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	return s.do(req)
}

func (s *session) getJSON(ctx context.Context, path string, v any) error {
	b, err := s.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s%s: %w", s.base, path, err)
	}
	return nil
}

func (s *session) postJSON(ctx context.Context, path string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	b, err := s.do(req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s%s: %w", s.base, path, err)
	}
	return nil
}

func (s *session) do(req *http.Request) ([]byte, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, truncate(strings.TrimSpace(string(b)), 600))
	}
	return b, nil
}
