package vllm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

// fakeVLLM answers like vLLM's OpenAI server: each completion adds one
// request's worth to its Prometheus counters and, when perRequest is set,
// returns the same counts as per-request metrics.
type fakeVLLM struct {
	fakeConfig
	// per request: 10 tokens; 4 verify steps, drafts accepted per step [2,0,1,2] of spec=2 → 8 drafted, 5 accepted
	mu                                       sync.Mutex
	drafts, draftTokens, accepted, gen, done float64
	perPos                                   []float64
	ttft, decode                             float64
	lastBody                                 map[string]any
	lastPath                                 string
}

type fakeConfig struct {
	spec       int  // draft length; 0 = a plain server (no spec-decode series)
	perRequest bool // metrics in each answer (--enable-per-request-metrics, --per-request-spec-decode-metrics)
	lie        bool // per-request counts that disagree with /metrics
	other      bool // another client's request is counted with each of bench's
	hold       chan struct{}
}

func (f *fakeVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/version":
		fmt.Fprint(w, `{"version":"0.32.0"}`)
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"/models/repo","object":"model"}]}`)
	case "/metrics":
		f.mu.Lock()
		defer f.mu.Unlock()
		fmt.Fprintf(w, "# HELP vllm:generation_tokens_total x\n# TYPE vllm:generation_tokens_total counter\n")
		l := `{engine="0",model_name="/models/repo"}`
		fmt.Fprintf(w, "vllm:generation_tokens_total%s %v\nvllm:prompt_tokens_total%s %v\n", l, f.gen, l, f.done*5)
		fmt.Fprintf(w, "vllm:time_to_first_token_seconds_sum%s %v\nvllm:request_decode_time_seconds_sum%s %v\n", l, f.ttft, l, f.decode)
		fmt.Fprintf(w, "vllm:request_decode_time_seconds_count%s %v\n", l, f.done)
		if f.spec > 0 {
			fmt.Fprintf(w, "vllm:spec_decode_num_drafts_total%s %v\nvllm:spec_decode_num_draft_tokens_total%s %v\n", l, f.drafts, l, f.draftTokens)
			fmt.Fprintf(w, "vllm:spec_decode_num_accepted_tokens_total%s %v\n", l, f.accepted)
			for i := range f.spec {
				fmt.Fprintf(w, "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"/models/repo\",position=\"%d\"} %v\n", i, f.perPos[i])
			}
		}
	case "/v1/completions", "/v1/chat/completions":
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if body["model"] != "/models/repo" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"message":"The model does not exist."}}`)
			return
		}
		if body["max_tokens"].(float64) > 100 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"max_tokens is too large"}}`)
			return
		}
		if f.hold != nil {
			<-f.hold
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lastBody, f.lastPath = body, r.URL.Path
		f.gen += 10
		f.done++
		if f.other {
			f.gen += 7
			f.done++
			f.drafts++
			f.draftTokens += 2
		}
		f.ttft += 0.25
		f.decode += 0.5
		resp := map[string]any{"usage": map[string]any{"prompt_tokens": 5, "completion_tokens": 10}}
		choice := map[string]any{"token_ids": []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}
		if r.URL.Path == "/v1/chat/completions" {
			choice["message"] = map[string]any{"role": "assistant", "content": "ten tokens", "reasoning": "think "}
		} else {
			choice["text"] = "ten tokens"
		}
		resp["choices"] = []any{choice}
		metrics := map[string]any{"time_to_first_token_ms": 200.0, "generation_time_ms": 450.0}
		if f.spec > 0 {
			f.drafts += 4
			f.draftTokens += 8
			f.accepted += 5
			f.perPos[0] += 3
			f.perPos[1] += 2
			hist := []int{1, 1, 2}
			if f.lie {
				hist = []int{0, 2, 2}
			}
			metrics["speculative_decoding"] = map[string]any{"acceptance_histogram": hist, "num_spec_steps": 4,
				"num_accepted_draft_tokens": 5, "num_draft_tokens": 8, "mean_acceptance_length": 2.25, "draft_acceptance_rate": 0.625}
		}
		if f.perRequest {
			resp["metrics"] = metrics
		}
		json.NewEncoder(w).Encode(resp)
	default:
		http.NotFound(w, r)
	}
}

func startFake(t *testing.T, f *fakeVLLM) string {
	t.Helper()
	if f.spec > 0 {
		f.perPos = make([]float64, f.spec)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	drafting := runtimes.Result{Text: "ten tokens", Tokens: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, PromptTokens: 5, DecodeTokens: 10,
		Counted: true, Drafted: 8, Accepted: 5, AcceptedPerPos: []int{3, 2}, VerifySteps: 4}
	plain := drafting
	plain.Counted, plain.Drafted, plain.Accepted, plain.AcceptedPerPos, plain.VerifySteps = false, 0, 0, nil, 0
	for _, tc := range []struct {
		name     string
		f        fakeConfig
		arm      runtimes.Arm
		want     runtimes.Result
		ttft     time.Duration
		perSec   float64
		startErr string
		err      string
	}{
		{"per-request metrics agreeing with /metrics", fakeConfig{spec: 2, perRequest: true}, runtimes.Arm{MTP: true, DraftTokens: 2},
			drafting, 200 * time.Millisecond, 9 / 0.45, "", ""},
		{"/metrics alone", fakeConfig{spec: 2}, runtimes.Arm{MTP: true, DraftTokens: 2}, drafting, 250 * time.Millisecond, 9 / 0.5, "", ""},
		{"plain", fakeConfig{perRequest: true}, runtimes.Arm{}, plain, 200 * time.Millisecond, 9 / 0.45, "", ""},
		{"an MTP endpoint that does not draft", fakeConfig{}, runtimes.Arm{MTP: true, DraftTokens: 1}, plain, 250 * time.Millisecond, 9 / 0.5, "", ""},
		{"another client's requests, /metrics alone", fakeConfig{spec: 2, other: true}, runtimes.Arm{MTP: true, DraftTokens: 2}, plain, 0, 0, "", ""},
		{"another client's requests, per-request metrics", fakeConfig{spec: 2, other: true, perRequest: true}, runtimes.Arm{MTP: true, DraftTokens: 2},
			drafting, 200 * time.Millisecond, 9 / 0.45, "", ""},
		{"per-request counts that disagree", fakeConfig{spec: 2, perRequest: true, lie: true}, runtimes.Arm{MTP: true, DraftTokens: 2},
			runtimes.Result{}, 0, 0, "", "disagree with its /metrics"},
		{"a plain endpoint that drafts", fakeConfig{spec: 1}, runtimes.Arm{}, runtimes.Result{}, 0, 0, "plain arm's server drafts", ""},
		{"another draft length", fakeConfig{spec: 3}, runtimes.Arm{MTP: true, DraftTokens: 2}, runtimes.Result{}, 0, 0, "give --draft-tokens 3", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeVLLM{fakeConfig: tc.f}
			url := startFake(t, f)
			s, err := attach(context.Background(), url+"/v1", tc.arm)
			if tc.startErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.startErr) {
					t.Fatalf("attach: got %v, want %q", err, tc.startErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Version() != "0.32.0" {
				t.Errorf("Version = %q", s.Version())
			}
			if _, ok := s.PeakRSS(); ok {
				t.Error("an endpoint has no peak RSS bench can read")
			}
			for range 2 { // the second reads deltas over counters that are not zero
				got, err := s.Generate(context.Background(), runtimes.Request{Prompt: "hello", MaxTokens: 10, Seed: 3, Greedy: true})
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("Generate: got %v, want %q", err, tc.err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.TimeToFirstToken != tc.ttft || got.DecodePerSecond < tc.perSec*0.999999 || got.DecodePerSecond > tc.perSec*1.000001 {
					t.Errorf("TTFT %v, decode %v/s; want %v, %v/s", got.TimeToFirstToken, got.DecodePerSecond, tc.ttft, tc.perSec)
				}
				got.TimeToFirstToken, got.DecodePerSecond = 0, 0
				if !equalResult(got, tc.want) {
					t.Errorf("got %+v\nwant %+v", got, tc.want)
				}
			}
			want := map[string]any{"model": "/models/repo", "prompt": "hello", "max_tokens": 10.0, "seed": 3.0, "temperature": 0.0,
				"return_token_ids": true, "stream": false}
			if f.lastPath != "/v1/completions" || fmt.Sprint(f.lastBody) != fmt.Sprint(want) {
				t.Errorf("sent %s %v, want %v", f.lastPath, f.lastBody, want)
			}
		})
	}
}

func equalResult(a, b runtimes.Result) bool {
	return a.Text == b.Text && slices.Equal(a.Tokens, b.Tokens) && a.PromptTokens == b.PromptTokens && a.DecodeTokens == b.DecodeTokens &&
		a.Counted == b.Counted && a.Drafted == b.Drafted && a.Accepted == b.Accepted && slices.Equal(a.AcceptedPerPos, b.AcceptedPerPos) &&
		a.VerifySteps == b.VerifySteps
}

func TestGenerateChatAndSampling(t *testing.T) {
	t.Parallel()
	f := &fakeVLLM{fakeConfig: fakeConfig{perRequest: true}}
	s, err := attach(context.Background(), startFake(t, f), runtimes.Arm{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Generate(context.Background(), runtimes.Request{Messages: []runtimes.Message{{Role: "user", Content: "hi"}}, MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "think ten tokens" || f.lastPath != "/v1/chat/completions" {
		t.Errorf("text %q via %s", got.Text, f.lastPath)
	}
	if _, ok := f.lastBody["temperature"]; ok || f.lastBody["messages"] == nil {
		t.Errorf("a sampled chat request sent %v", f.lastBody)
	}
	for _, tc := range []struct {
		r   runtimes.Request
		err string
	}{
		{runtimes.Request{Prompt: "x", MaxTokens: 1000}, "400 Bad Request: {\"error\":{\"message\":\"max_tokens is too large\"}}"},
		{runtimes.Request{MaxTokens: 10}, "not both or neither"},
		{runtimes.Request{Prompt: "x", Messages: []runtimes.Message{{Role: "user", Content: "y"}}}, "not both or neither"},
	} {
		if _, err := s.Generate(context.Background(), tc.r); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: got %v, want %q", tc.r, err, tc.err)
		}
	}
}

// Requests in flight at once: /metrics deltas are not one request's, so a
// server without per-request metrics reports no counts for them, and one
// with them reports each request's own.
func TestGenerateConcurrent(t *testing.T) {
	t.Parallel()
	for _, perRequest := range []bool{false, true} {
		f := &fakeVLLM{fakeConfig: fakeConfig{spec: 2, perRequest: perRequest, hold: make(chan struct{})}}
		s, err := attach(context.Background(), startFake(t, f), runtimes.Arm{MTP: true, DraftTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]runtimes.Result, 3)
		errs := make([]error, 3)
		for i := range results {
			wg.Go(func() {
				results[i], errs[i] = s.Generate(context.Background(), runtimes.Request{Prompt: "p", MaxTokens: 10, Greedy: true})
			})
		}
		for {
			s.(*session).mu.Lock()
			n := len(s.(*session).inflight)
			s.(*session).mu.Unlock()
			if n == 3 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(f.hold)
		wg.Wait()
		for i, r := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if r.Counted != perRequest || perRequest && (r.Drafted != 8 || r.Accepted != 5) || !perRequest && r.Drafted != 0 {
				t.Errorf("per-request metrics %v: request %d got %+v", perRequest, i, r)
			}
		}
	}
}

func TestPerPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ hist, want []int }{
		{nil, nil},
		{[]int{7}, nil},
		{[]int{1, 1, 2}, []int{3, 2}},
		{[]int{0, 0, 0, 5}, []int{5, 5, 5}},
		{[]int{4, 0, 0}, []int{0, 0}},
	} {
		if got := perPosition(tc.hist); !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.hist, got, tc.want)
		}
	}
}
