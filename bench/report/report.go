// Package report judges a bench run: medians and ranges, the speedup with its
// noise band, the acceptance figures, whether MTP changed the output and
// where, the verdicts (closed sets), the JSON report (issue 39's field names),
// the table for people and the card section. It computes from the runtime's
// own numbers only; it starts nothing.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Verdicts, closed sets.
const (
	DraftNotDrafting = "not-drafting" // nothing drafted: no verify loop ran
	DraftNearZero    = "near-zero"    // acceptance below NearZero: a broken, mis-declared or mis-quantized head
	DraftDrafting    = "drafting"

	SpeedSlower = "slower" // the whole band below 1
	SpeedNoGain = "no-gain"
	SpeedPays   = "pays" // the whole band above 1

	OutputIdentical = "identical"
	OutputChanged   = "changed"
	OutputNotJudged = "not-judged" // sampling, or a plain arm that is not deterministic on its own
)

// NearZero is the acceptance under which a head is judged not to work.
const NearZero = 0.05

// Run is one request as the runtime reported it (the JSON "arms" entries).
type Run struct {
	Start               int     `json:"start"` // index of the runtime start (Starts) that served it
	Arm                 string  `json:"arm"`   // "plain" or "mtp"
	DraftTokens         int     `json:"draft_tokens"`
	Repeat              int     `json:"repeat"`
	Prompt              string  `json:"prompt"` // the prompt's id
	Class               string  `json:"class,omitempty"`
	PromptTokens        int     `json:"prompt_tokens"`
	Tokens              int     `json:"tokens"`
	TokensPerSecond     float64 `json:"tokens_per_second"`
	TTFTMillis          float64 `json:"ttft_ms"`
	Counted             bool    `json:"counted"` // false: the runtime reported no draft counters for it
	Drafted             int     `json:"drafted"`
	Accepted            int     `json:"accepted"`
	AcceptedPerPosition []int   `json:"accepted_per_position,omitempty"`
	VerifySteps         int     `json:"verify_steps,omitempty"`

	Text     string `json:"-"`
	TokenIDs []int  `json:"-"`
}

// Start is one start of the runtime serving one arm: a warm-up request
// (discarded), then every prompt once.
type Start struct {
	Arm          string  `json:"arm"`
	DraftTokens  int     `json:"draft_tokens"`
	Repeat       int     `json:"repeat"`
	Tokens       int     `json:"tokens"`
	Seconds      float64 `json:"seconds"` // wall time of the requests (what counts under concurrency)
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
	// Warmup is the discarded warm-up request's own counts: a runtime whose counters are server-wide
	// (/metrics) counted it too, and a reader reconciling them needs it.
	Warmup Warmup `json:"warmup"`
}

// Warmup is what the runtime reported for a start's warm-up request (not in any figure).
type Warmup struct {
	Tokens   int  `json:"tokens"`
	Counted  bool `json:"counted"`
	Drafted  int  `json:"drafted"`
	Accepted int  `json:"accepted"`
}

// Input is what the executor measured, and what it measured it with.
type Input struct {
	Runtime, RuntimeVersion, Model, Head string
	Hardware                             Hardware
	PromptsSHA256                        string
	Settings                             Settings
	Starts                               []Start
	Runs                                 []Run
}

// Settings are the choices the numbers depend on.
type Settings struct {
	Prompts     int      `json:"prompts"`
	Builtin     bool     `json:"builtin_prompts"`
	Context     int      `json:"context,omitempty"`
	MaxTokens   int      `json:"max_tokens"`
	Repeats     int      `json:"repeats"`
	Concurrency int      `json:"concurrency"`
	Greedy      bool     `json:"greedy"`
	Seed        int      `json:"seed"`
	DraftTokens []int    `json:"draft_tokens"`
	RuntimeArgs []string `json:"runtime_args"`
	Endpoints   bool     `json:"endpoints,omitempty"` // servers the user runs: no fresh start per arm, no peak memory
}

// Hardware is the machine, as far as bench can tell.
type Hardware struct {
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPU         string `json:"cpu,omitempty"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
}

// Report is the JSON report.
type Report struct {
	Runtime        string   `json:"runtime"`
	RuntimeVersion string   `json:"runtime_version"`
	Model          string   `json:"model"`
	Head           string   `json:"head,omitempty"`
	Hardware       Hardware `json:"hardware"`
	PromptsSHA256  string   `json:"prompts_sha256"`
	Settings       Settings `json:"settings"`
	Arms           []Run    `json:"arms"`
	Starts         []Start  `json:"starts"`
	Speed          []Speed  `json:"speed"`   // per arm (plain, then each draft length)
	Sweep          []Length `json:"sweep"`   // per draft length
	Classes        []Class  `json:"classes"` // per prompt class, at the best draft length
	Summary        Summary  `json:"summary"`
}

// Range is a median with the smallest and largest sample.
type Range struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Band is a speedup: the median ratio and its noise band from the repeats.
type Band struct {
	Median float64 `json:"median"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
}

// Speed is one arm's speed across its starts.
type Speed struct {
	Arm             string  `json:"arm"`
	DraftTokens     int     `json:"draft_tokens"`
	TokensPerSecond Range   `json:"tokens_per_second"`
	TTFTMillis      float64 `json:"ttft_ms_median"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes,omitempty"`
}

// Drafting is what the runtime counted for a set of MTP requests.
type Drafting struct {
	Drafted               int       `json:"drafted"`
	Accepted              int       `json:"accepted"`
	Acceptance            float64   `json:"acceptance"`
	AcceptancePerPosition []float64 `json:"acceptance_per_position"`
	MeanAcceptedPerStep   *float64  `json:"mean_accepted_per_step"` // null when the runtime does not count verify steps
}

// Length is one draft length of the sweep.
type Length struct {
	DraftTokens int `json:"draft_tokens"`
	Drafting
	Speedup Band `json:"speedup"`
}

// Class is one prompt class at the best draft length.
type Class struct {
	Class      string  `json:"class"`
	Prompts    int     `json:"prompts"`
	Drafted    int     `json:"drafted"`
	Accepted   int     `json:"accepted"`
	Acceptance float64 `json:"acceptance"`
	Speedup    float64 `json:"speedup"` // the class's decode throughput with MTP over without, all repeats
}

// Summary is the answer, at the best draft length.
type Summary struct {
	Drafting
	Speedup         Band       `json:"speedup"`
	SameOutput      SameOutput `json:"same_output"`
	BestDraftTokens int        `json:"best_draft_tokens"`
	Verdict         Verdict    `json:"verdict"`
}

// SameOutput compares every MTP answer with the plain one, per prompt.
type SameOutput struct {
	Identical   *int         `json:"identical"` // prompts whose every MTP answer equals the plain one; null when not judged
	Prompts     int          `json:"prompts"`
	Why         string       `json:"not_judged_because,omitempty"`
	Divergences []Divergence `json:"divergences"`
}

// Divergence is where an answer first differs: with MTP against plain, or
// (when the plain arm is not deterministic) plain against plain.
type Divergence struct {
	Prompt      string `json:"prompt"`
	Arm         string `json:"arm"` // the arm compared with the first plain answer
	DraftTokens int    `json:"draft_tokens"`
	Repeat      int    `json:"repeat"`
	TokenIndex  *int   `json:"token_index"` // null when the runtime gives no token ids
	ByteIndex   int    `json:"byte_index"`
	Plain       string `json:"plain"` // the text around the divergence in each answer
	Other       string `json:"other"`
}

// Verdict is the three one-word answers.
type Verdict struct {
	Draft  string `json:"draft"`
	Speed  string `json:"speed"`
	Output string `json:"output"`
}

// Compute judges what the executor measured.
func Compute(in Input) *Report {
	r := &Report{Runtime: in.Runtime, RuntimeVersion: in.RuntimeVersion, Model: in.Model, Head: in.Head, Hardware: in.Hardware,
		PromptsSHA256: in.PromptsSHA256, Settings: in.Settings, Arms: in.Runs, Starts: in.Starts}
	if r.Arms == nil {
		r.Arms = []Run{}
	}
	lengths := draftLengths(in.Runs)
	through := throughputs(in)
	r.Speed = append(r.Speed, speedOf(in, through, "plain", 0))
	for _, k := range lengths {
		r.Speed = append(r.Speed, speedOf(in, through, "mtp", k))
	}
	best := -1
	for _, k := range lengths {
		l := Length{DraftTokens: k, Drafting: drafting(mtpRuns(in.Runs, k, "")), Speedup: speedup(in, through, k)}
		r.Sweep = append(r.Sweep, l)
		if best < 0 || l.Speedup.Median > r.Sweep[best].Speedup.Median {
			best = len(r.Sweep) - 1
		}
	}
	if best >= 0 {
		b := r.Sweep[best]
		r.Summary.Drafting, r.Summary.Speedup, r.Summary.BestDraftTokens = b.Drafting, b.Speedup, b.DraftTokens
		r.Classes = classes(in.Runs, b.DraftTokens)
	}
	r.Summary.SameOutput = sameOutput(in.Runs, in.Settings.Greedy)
	r.Summary.Verdict = Verdict{Draft: draftVerdict(r.Summary.Drafting), Speed: speedVerdict(r.Summary.Speedup), Output: outputVerdict(r.Summary.SameOutput)}
	if best < 0 {
		r.Summary.Verdict.Speed = SpeedNoGain
	}
	return r
}

func draftLengths(runs []Run) []int {
	var ks []int
	for _, u := range runs {
		if u.Arm == "mtp" && !slices.Contains(ks, u.DraftTokens) {
			ks = append(ks, u.DraftTokens)
		}
	}
	slices.Sort(ks)
	return ks
}

func mtpRuns(runs []Run, k int, class string) []Run {
	var out []Run
	for _, u := range runs {
		if u.Arm == "mtp" && u.DraftTokens == k && (class == "" || u.Class == class) {
			out = append(out, u)
		}
	}
	return out
}

// throughputs is each start's decode throughput: under concurrency the
// tokens over the wall time of the batch; one request at a time, the tokens
// over the runtime's own decode time (its tokens/s per request).
func throughputs(in Input) []float64 {
	out := make([]float64, len(in.Starts))
	for i, s := range in.Starts {
		if in.Settings.Concurrency > 1 {
			if s.Seconds > 0 {
				out[i] = float64(s.Tokens) / s.Seconds
			}
			continue
		}
		var tokens, secs float64
		for _, u := range in.Runs {
			if u.Start == i && u.TokensPerSecond > 0 {
				tokens += float64(u.Tokens)
				secs += float64(u.Tokens) / u.TokensPerSecond
			}
		}
		if secs > 0 {
			out[i] = tokens / secs
		}
	}
	return out
}

func startsOf(in Input, arm string, k int) []int {
	var out []int
	for i, s := range in.Starts {
		if s.Arm == arm && (arm == "plain" || s.DraftTokens == k) {
			out = append(out, i)
		}
	}
	return out
}

func speedOf(in Input, through []float64, arm string, k int) Speed {
	sp := Speed{Arm: arm, DraftTokens: k}
	var tps, ttft []float64
	for _, i := range startsOf(in, arm, k) {
		tps = append(tps, through[i])
		sp.PeakRSSBytes = max(sp.PeakRSSBytes, in.Starts[i].PeakRSSBytes)
		for _, u := range in.Runs {
			if u.Start == i {
				ttft = append(ttft, u.TTFTMillis)
			}
		}
	}
	sp.TokensPerSecond = rangeOf(tps)
	sp.TTFTMillis = median(ttft)
	return sp
}

// speedup of draft length k: per repeat, the MTP start's throughput over the
// mean of that repeat's plain starts (the median of those ratios); the band
// runs from the lowest to the highest ratio, each taken against the repeat's
// fastest and slowest plain start, so the plain arm's own spread widens it.
// With a single MTP start its own noise is unknown: the plain arm's relative
// spread (fastest over slowest) stands for it, widening the band once more.
func speedup(in Input, through []float64, k int) Band {
	var mid, allPlain []float64
	b := Band{Low: math.Inf(1), High: math.Inf(-1)}
	for _, i := range startsOf(in, "mtp", k) {
		var plain []float64
		for _, j := range startsOf(in, "plain", 0) {
			if in.Starts[j].Repeat == in.Starts[i].Repeat && through[j] > 0 {
				plain = append(plain, through[j])
			}
		}
		if len(plain) == 0 || through[i] == 0 {
			continue
		}
		allPlain = append(allPlain, plain...)
		mid = append(mid, through[i]/mean(plain))
		b.Low = min(b.Low, through[i]/slices.Max(plain))
		b.High = max(b.High, through[i]/slices.Min(plain))
	}
	if len(mid) == 0 {
		return Band{}
	}
	if len(mid) == 1 {
		spread := slices.Max(allPlain) / slices.Min(allPlain)
		b.Low, b.High = b.Low/spread, b.High*spread
	}
	return Band{Median: round(median(mid), 3), Low: round(b.Low, 3), High: round(b.High, 3)}
}

func drafting(runs []Run) Drafting {
	var d Drafting
	var perPos []int
	steps, stepsKnown := 0, len(runs) > 0
	for _, u := range runs {
		d.Drafted += u.Drafted
		d.Accepted += u.Accepted
		for i, a := range u.AcceptedPerPosition {
			if i >= len(perPos) {
				perPos = append(perPos, make([]int, i+1-len(perPos))...)
			}
			perPos[i] += a
		}
		if u.Counted && u.VerifySteps == 0 && u.Drafted > 0 {
			stepsKnown = false
		}
		steps += u.VerifySteps
	}
	if d.Drafted > 0 {
		d.Acceptance = float64(d.Accepted) / float64(d.Drafted)
	}
	// Acceptance at position i: drafts accepted at i over the verify steps
	// (each step drafts one token at each position it reaches).
	d.AcceptancePerPosition = []float64{}
	if stepsKnown && steps > 0 {
		for _, a := range perPos {
			d.AcceptancePerPosition = append(d.AcceptancePerPosition, round(float64(a)/float64(steps), 4))
		}
		m := round(float64(d.Accepted)/float64(steps), 4)
		d.MeanAcceptedPerStep = &m
	}
	d.Acceptance = round(d.Acceptance, 4)
	return d
}

func classes(runs []Run, k int) []Class {
	var out []Class
	var names []string
	for _, u := range runs {
		if u.Class != "" && !slices.Contains(names, u.Class) {
			names = append(names, u.Class)
		}
	}
	for _, c := range names {
		d := drafting(mtpRuns(runs, k, c))
		cl := Class{Class: c, Drafted: d.Drafted, Accepted: d.Accepted, Acceptance: d.Acceptance}
		ids := map[string]bool{}
		var mt, ms, pt, ps float64
		for _, u := range runs {
			if u.Class != c || u.TokensPerSecond <= 0 {
				continue
			}
			ids[u.Prompt] = true
			switch {
			case u.Arm == "plain":
				pt, ps = pt+float64(u.Tokens), ps+float64(u.Tokens)/u.TokensPerSecond
			case u.DraftTokens == k:
				mt, ms = mt+float64(u.Tokens), ms+float64(u.Tokens)/u.TokensPerSecond
			}
		}
		cl.Prompts = len(ids)
		if ms > 0 && pt > 0 {
			cl.Speedup = round((mt/ms)/(pt/ps), 3)
		}
		out = append(out, cl)
	}
	return out
}

// same reports whether two answers are the same, by token ids where both have them.
func same(a, b Run) bool {
	if a.TokenIDs != nil && b.TokenIDs != nil {
		return slices.Equal(a.TokenIDs, b.TokenIDs)
	}
	return a.Text == b.Text
}

func sameOutput(runs []Run, greedy bool) SameOutput {
	var order []string
	plain := map[string][]Run{}
	other := map[string][]Run{}
	for _, u := range runs {
		if !slices.Contains(order, u.Prompt) {
			order = append(order, u.Prompt)
		}
		if u.Arm == "plain" {
			plain[u.Prompt] = append(plain[u.Prompt], u)
		} else {
			other[u.Prompt] = append(other[u.Prompt], u)
		}
	}
	so := SameOutput{Prompts: len(order), Divergences: []Divergence{}}
	if !greedy {
		so.Why = "sampling: outputs differ by design"
		return so
	}
	// Plain against plain first: a runtime that is not deterministic on its own is not the head's doing.
	var unstable []string
	for _, p := range order {
		ps := plain[p]
		for _, u := range ps[1:] {
			if !same(ps[0], u) {
				unstable = append(unstable, p)
				so.Divergences = append(so.Divergences, divergence(ps[0], u))
				break
			}
		}
	}
	if len(unstable) > 0 {
		so.Why = fmt.Sprintf("the plain arm is not deterministic: prompt %s answered differently across plain runs", strings.Join(unstable, ", "))
		return so
	}
	if countPlainRuns(plain) < 2 {
		so.Why = "one plain run per prompt: nothing to check the plain arm's determinism against"
		return so
	}
	n := 0
	for _, p := range order {
		if len(plain[p]) == 0 {
			continue
		}
		changed := false
		for _, u := range other[p] {
			if !same(plain[p][0], u) {
				changed = true
				so.Divergences = append(so.Divergences, divergence(plain[p][0], u))
				break
			}
		}
		if !changed {
			n++
		}
	}
	so.Identical = &n
	return so
}

func countPlainRuns(plain map[string][]Run) int {
	n := math.MaxInt
	for _, ps := range plain {
		n = min(n, len(ps))
	}
	if n == math.MaxInt {
		return 0
	}
	return n
}

// contextBytes is how much text a divergence shows on each side.
const contextBytes = 40

func divergence(a, b Run) Divergence {
	d := Divergence{Prompt: a.Prompt, Arm: b.Arm, DraftTokens: b.DraftTokens, Repeat: b.Repeat}
	if a.TokenIDs != nil && b.TokenIDs != nil {
		i := firstDiff(a.TokenIDs, b.TokenIDs)
		d.TokenIndex = &i
	}
	d.ByteIndex = firstDiff([]byte(a.Text), []byte(b.Text))
	d.Plain, d.Other = around(a.Text, d.ByteIndex), around(b.Text, d.ByteIndex)
	return d
}

func firstDiff[T comparable](a, b []T) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// around is the text around byte i, marked at i with ⟨…⟩ around what follows (valid UTF-8 kept).
func around(s string, i int) string {
	lo, hi := max(0, i-contextBytes), min(len(s), i+contextBytes)
	for lo > 0 && lo < len(s) && !utf8Start(s[lo]) {
		lo--
	}
	for hi < len(s) && !utf8Start(s[hi]) {
		hi++
	}
	i = min(i, len(s))
	for i > lo && i < len(s) && !utf8Start(s[i]) {
		i--
	}
	return strings.ToValidUTF8(s[lo:i]+"⟨"+s[i:hi]+"⟩", "\uFFFD")
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func draftVerdict(d Drafting) string {
	switch {
	case d.Drafted == 0:
		return DraftNotDrafting
	case d.Acceptance < NearZero:
		return DraftNearZero
	}
	return DraftDrafting
}

func speedVerdict(b Band) string {
	switch {
	case b.Median == 0:
		return SpeedNoGain // nothing measured
	case b.Low > 1:
		return SpeedPays
	case b.High < 1:
		return SpeedSlower
	}
	return SpeedNoGain
}

func outputVerdict(s SameOutput) string {
	switch {
	case s.Identical == nil:
		return OutputNotJudged
	case *s.Identical == s.Prompts:
		return OutputIdentical
	}
	return OutputChanged
}

func rangeOf(xs []float64) Range {
	if len(xs) == 0 {
		return Range{}
	}
	return Range{Median: round(median(xs), 3), Min: round(slices.Min(xs), 3), Max: round(slices.Max(xs), 3)}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.SortFunc(s, cmp.Compare)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
