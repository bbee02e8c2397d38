package vllm

import (
	"math"
	"reflect"
	"strings"
	"testing"
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
