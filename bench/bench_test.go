package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mtpconv/mtpconv/bench/prompts"
	"github.com/mtpconv/mtpconv/bench/report"
	"github.com/mtpconv/mtpconv/bench/runtimes"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	str := func(steps []Step) string {
		var s []string
		for _, st := range steps {
			s = append(s, fmt.Sprintf("%s/%d", st.Arm, st.Repeat))
		}
		return strings.Join(s, " ")
	}
	cases := []struct {
		ks      []int
		repeats int
		want    string
	}{
		{[]int{3}, 1, "plain/0 mtp(3)/0 plain/0"},
		{[]int{3}, 2, "plain/0 mtp(3)/0 mtp(3)/1 plain/1"},
		{[]int{1, 2}, 3, "plain/0 mtp(1)/0 mtp(2)/0 mtp(2)/1 mtp(1)/1 plain/1 plain/2 mtp(1)/2 mtp(2)/2 plain/2"},
	}
	for _, c := range cases {
		if got := str(Plan(c.ks, c.repeats)); got != c.want {
			t.Errorf("Plan(%v, %d) = %s, want %s", c.ks, c.repeats, got, c.want)
		}
	}
}

// fake is a runtime whose answers and counters the test sets.
type fake struct {
	starts      atomic.Int32
	plainTPS    float64
	mtpTPS      map[int]float64 // per draft length
	accept      float64         // fraction of drafts accepted
	noDraft     bool            // the MTP arm drafts nothing (no verify loop)
	plainNoise  bool            // the plain arm answers differently on each start
	changeWith  map[string]bool // prompts whose MTP answer differs
	failStartAt int32           // 1-based start that fails
	mu          sync.Mutex
	inFlight    int
	maxInFlight int
}

func (f *fake) Name() string                 { return "fake" }
func (f *fake) Check(runtimes.Setup) error   { return nil }
func (f *fake) Claims(runtimes.Setup) bool   { return false }
func (f *fake) HeadCount(runtimes.Setup) int { return 3 }
func (f *fake) Start(_ context.Context, _ runtimes.Setup, a runtimes.Arm) (runtimes.Session, error) {
	n := f.starts.Add(1)
	if n == f.failStartAt {
		return nil, errors.New("fake-server stopped (exit status 1); its last lines:\n    model doesn't contain MTP layers")
	}
	return &fakeSession{f: f, arm: a, start: int(n)}, nil
}

type fakeSession struct {
	f     *fake
	arm   runtimes.Arm
	start int
}

func (s *fakeSession) Version() string        { return "fake-1" }
func (s *fakeSession) PeakRSS() (int64, bool) { return int64(100+s.start) << 20, true }
func (s *fakeSession) Close() error           { return nil }
func (s *fakeSession) Generate(_ context.Context, r runtimes.Request) (runtimes.Result, error) {
	s.f.mu.Lock()
	s.f.inFlight++
	s.f.maxInFlight = max(s.f.maxInFlight, s.f.inFlight)
	s.f.mu.Unlock()
	defer func() { s.f.mu.Lock(); s.f.inFlight--; s.f.mu.Unlock() }()
	text := "answer to " + r.Prompt
	if s.arm.MTP && s.f.changeWith[r.Prompt] {
		text = "another " + text
	}
	if !s.arm.MTP && s.f.plainNoise {
		text += fmt.Sprint(" #", s.start)
	}
	res := runtimes.Result{Text: text, DecodeTokens: r.MaxTokens, PromptTokens: 5, DecodePerSecond: s.f.plainTPS}
	if s.arm.MTP {
		res.DecodePerSecond = s.f.mtpTPS[s.arm.DraftTokens] * (1 + 0.01*float64(s.start%3))
		if !s.f.noDraft {
			steps := 10
			drafted := steps * s.arm.DraftTokens
			accepted := int(s.f.accept * float64(drafted))
			res.Counted, res.Drafted, res.Accepted, res.VerifySteps = true, drafted, accepted, steps
			res.AcceptedPerPos = make([]int, s.arm.DraftTokens)
			for i, left := 0, accepted; i < s.arm.DraftTokens; i++ {
				res.AcceptedPerPos[i] = min(left, steps)
				left -= res.AcceptedPerPos[i]
			}
		}
	}
	return res, nil
}

func ps(texts ...string) []prompts.Prompt {
	var out []prompts.Prompt
	for i, s := range texts {
		out = append(out, prompts.Prompt{ID: fmt.Sprint(i + 1), Class: []string{"code", "prose"}[i%2], Text: s})
	}
	return out
}

func runFake(t *testing.T, f *fake, o Options) (*report.Report, error) {
	t.Helper()
	if o.Prompts == nil {
		o.Prompts = ps("a", "b", "c", "d")
	}
	if o.Repeats == 0 {
		o.Repeats = 2
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = 32
	}
	o.Concurrency = max(1, o.Concurrency)
	m, err := Execute(context.Background(), f, o, Plan(o.DraftTokens, o.Repeats), nil)
	if err != nil {
		return nil, err
	}
	return report.Compute(report.Input{Runtime: "fake", RuntimeVersion: m.Version, Starts: m.Starts, Runs: m.Runs,
		Settings: report.Settings{Greedy: o.Greedy, Concurrency: o.Concurrency, Repeats: o.Repeats}}), nil
}

func TestVerdicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name              string
		f                 *fake
		ks                []int
		greedy            bool
		draft, speed, out string
		best              int
		identical         int // -1: null
	}{
		{"rigged", &fake{plainTPS: 10, mtpTPS: map[int]float64{1: 14, 2: 18}, accept: 1}, []int{1, 2}, true,
			report.DraftDrafting, report.SpeedPays, report.OutputIdentical, 2, 4},
		{"random head", &fake{plainTPS: 10, mtpTPS: map[int]float64{3: 7}, accept: 0.01}, []int{3}, true,
			report.DraftNearZero, report.SpeedSlower, report.OutputIdentical, 3, 4},
		{"no verify loop", &fake{plainTPS: 10, mtpTPS: map[int]float64{3: 10}, noDraft: true}, []int{3}, true,
			report.DraftNotDrafting, report.SpeedNoGain, report.OutputIdentical, 3, 4},
		{"changed", &fake{plainTPS: 10, mtpTPS: map[int]float64{2: 12}, accept: 0.8, changeWith: map[string]bool{"b": true}}, []int{2}, true,
			report.DraftDrafting, report.SpeedPays, report.OutputChanged, 2, 3},
		// The plain arm answers differently on its own: the head is not blamed, even where MTP differs too.
		{"plain not deterministic", &fake{plainTPS: 10, mtpTPS: map[int]float64{2: 12}, accept: 0.8, plainNoise: true, changeWith: map[string]bool{"b": true}}, []int{2}, true,
			report.DraftDrafting, report.SpeedPays, report.OutputNotJudged, 2, -1},
		{"sampling", &fake{plainTPS: 10, mtpTPS: map[int]float64{2: 12}, accept: 0.8}, []int{2}, false,
			report.DraftDrafting, report.SpeedPays, report.OutputNotJudged, 2, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := runFake(t, c.f, Options{DraftTokens: c.ks, Greedy: c.greedy})
			if err != nil {
				t.Fatal(err)
			}
			v := r.Summary.Verdict
			if v.Draft != c.draft || v.Speed != c.speed || v.Output != c.out {
				t.Errorf("verdict %+v, want %s %s %s\n%s", v, c.draft, c.speed, c.out, r.Table())
			}
			if r.Summary.BestDraftTokens != c.best {
				t.Errorf("best draft tokens %d, want %d", r.Summary.BestDraftTokens, c.best)
			}
			so := r.Summary.SameOutput
			if (c.identical < 0) != (so.Identical == nil) || (so.Identical != nil && *so.Identical != c.identical) {
				t.Errorf("same_output %+v, want identical %d", so, c.identical)
			}
			if so.Identical == nil && so.Why == "" {
				t.Error("not judged without a reason")
			}
			if want := len(Plan(c.ks, 2)); int(c.f.starts.Load()) != want {
				t.Errorf("%d starts, want one per step (%d)", c.f.starts.Load(), want)
			}
		})
	}
}

// The counts are the runtime's own, summed; the figures derive from them only.
func TestFigures(t *testing.T) {
	t.Parallel()
	f := &fake{plainTPS: 10, mtpTPS: map[int]float64{2: 15}, accept: 0.75, changeWith: map[string]bool{"c": true}}
	r, err := runFake(t, f, Options{DraftTokens: []int{2}, Greedy: true})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	// 4 prompts × 2 repeats, each 10 steps × 2 drafted, 15 accepted (10 at position 0, 5 at 1).
	if s.Drafted != 160 || s.Accepted != 120 || s.Acceptance != 0.75 {
		t.Errorf("drafted %d accepted %d acceptance %v", s.Drafted, s.Accepted, s.Acceptance)
	}
	if len(s.AcceptancePerPosition) != 2 || s.AcceptancePerPosition[0] != 1 || s.AcceptancePerPosition[1] != 0.5 {
		t.Errorf("per position %v", s.AcceptancePerPosition)
	}
	if s.MeanAcceptedPerStep == nil || *s.MeanAcceptedPerStep != 1.5 {
		t.Errorf("mean accepted per step %v", s.MeanAcceptedPerStep)
	}
	// MTP starts run at 15 × (1 + 0.01·(start mod 3)); plain at 10 exactly.
	if s.Speedup.Low < 1.5 || s.Speedup.High > 1.53 || s.Speedup.Median < s.Speedup.Low || s.Speedup.Median > s.Speedup.High {
		t.Errorf("speedup %+v", s.Speedup)
	}
	if len(s.SameOutput.Divergences) != 1 {
		t.Fatalf("divergences %+v", s.SameOutput.Divergences)
	}
	d := s.SameOutput.Divergences[0]
	if d.Prompt != "3" || d.ByteIndex != 2 || d.Plain != "an⟨swer to c⟩" || d.Other != "an⟨other answer to c⟩" {
		t.Errorf("divergence %+v", d)
	}
	if len(r.Arms) != 4*len(Plan([]int{2}, 2)) {
		t.Errorf("%d runs in arms", len(r.Arms))
	}
	if len(r.Classes) != 2 || r.Classes[0].Class != "code" || r.Classes[0].Prompts != 2 {
		t.Errorf("classes %+v", r.Classes)
	}
	if r.RuntimeVersion != "fake-1" {
		t.Errorf("version %q", r.RuntimeVersion)
	}
	if sp := r.Speed[0]; sp.Arm != "plain" || sp.TokensPerSecond.Median != 10 || sp.PeakRSSBytes == 0 {
		t.Errorf("plain speed %+v", sp)
	}
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	f := &fake{plainTPS: 10, mtpTPS: map[int]float64{1: 12}, accept: 1}
	if _, err := runFake(t, f, Options{DraftTokens: []int{1}, Greedy: true, Concurrency: 3, Prompts: ps("a", "b", "c", "d", "e", "f")}); err != nil {
		t.Fatal(err)
	}
	if f.maxInFlight > 3 {
		t.Errorf("%d requests at once, want at most 3", f.maxInFlight)
	}
}

func TestStartFailureStopsTheRun(t *testing.T) {
	t.Parallel()
	f := &fake{plainTPS: 10, mtpTPS: map[int]float64{1: 12}, failStartAt: 2}
	_, err := runFake(t, f, Options{DraftTokens: []int{1}, Greedy: true})
	if err == nil || !strings.Contains(err.Error(), "mtp(1), repeat 1") || !strings.Contains(err.Error(), "model doesn't contain MTP layers") {
		t.Errorf("got %v", err)
	}
	if f.starts.Load() != 2 {
		t.Errorf("%d starts after the failure, want none", f.starts.Load())
	}
}

func TestHardware(t *testing.T) {
	t.Parallel()
	h := Hardware()
	if h.CPUs < 1 || h.OS == "" || h.Arch == "" {
		t.Errorf("%+v", h)
	}
	if h.OS == "linux" && (h.MemoryBytes < 1<<20 || h.CPU == "" && h.Arch == "amd64") {
		t.Errorf("/proc read as %+v", h)
	}
}
