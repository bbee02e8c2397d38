package report

import (
	"strings"
	"testing"
)

// starts builds an Input from per-start throughputs: plain and MTP (draft length 2), in the given order and repeats.
func starts(arms []string, repeats []int, tps []float64) Input {
	in := Input{Settings: Settings{Concurrency: 1, Greedy: true}}
	for i, a := range arms {
		k := 0
		if a == "mtp" {
			k = 2
		}
		in.Starts = append(in.Starts, Start{Arm: a, DraftTokens: k, Repeat: repeats[i]})
		in.Runs = append(in.Runs, Run{Start: i, Arm: a, DraftTokens: k, Repeat: repeats[i], Prompt: "1", Tokens: 100, TokensPerSecond: tps[i], Text: "same"})
	}
	return in
}

func TestSpeedupBand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		in             Input
		median, lo, hi float64
		verdict        string
	}{
		// Two repeats: the band is the ratios against each repeat's fastest and slowest plain start.
		{"two repeats", starts([]string{"plain", "mtp", "mtp", "plain"}, []int{0, 0, 1, 1}, []float64{10, 15, 16, 10}), 1.55, 1.5, 1.6, SpeedPays},
		// One repeat bracketed by two plain starts (8 and 12): 15/10, widened by the plain spread 12/8 once more.
		{"one repeat", starts([]string{"plain", "mtp", "plain"}, []int{0, 0, 0}, []float64{8, 15, 12}), 1.5, 15.0 / 12 / 1.5, 15.0 / 8 * 1.5, SpeedNoGain},
		{"slower", starts([]string{"plain", "mtp", "mtp", "plain"}, []int{0, 0, 1, 1}, []float64{10, 7, 8, 10}), 0.75, 0.7, 0.8, SpeedSlower},
	}
	for _, c := range cases {
		r := Compute(c.in)
		b := r.Summary.Speedup
		if b.Median != c.median || b.Low != round(c.lo, 3) || b.High != round(c.hi, 3) || r.Summary.Verdict.Speed != c.verdict {
			t.Errorf("%s: %+v %s, want %v %v %v %s", c.name, b, r.Summary.Verdict.Speed, c.median, round(c.lo, 3), round(c.hi, 3), c.verdict)
		}
	}
}

func TestDivergence(t *testing.T) {
	t.Parallel()
	a := Run{Prompt: "p", Arm: "plain", Text: "héllo wörld, the answer is 42 and more", TokenIDs: []int{1, 2, 3, 4}}
	b := Run{Prompt: "p", Arm: "mtp", DraftTokens: 2, Text: "héllo wörld, the answer is 41 and more", TokenIDs: []int{1, 2, 3, 5}}
	d := divergence(a, b)
	if d.TokenIndex == nil || *d.TokenIndex != 3 || d.ByteIndex != strings.Index(a.Text, "2 and") {
		t.Fatalf("%+v", d)
	}
	if !strings.HasSuffix(d.Plain, "is 4⟨2 and more⟩") || !strings.HasSuffix(d.Other, "is 4⟨1 and more⟩") {
		t.Errorf("%q / %q", d.Plain, d.Other)
	}
	// A cut inside a multi-byte character moves to its start: the text stays valid UTF-8.
	long := strings.Repeat("é", 50)
	if s := around(long, 51); !strings.HasPrefix(s, "é") || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("around cut a character: %q", s)
	}
	// Without token ids the bytes decide, and the token index is null.
	b.TokenIDs = nil
	if d := divergence(a, b); d.TokenIndex != nil {
		t.Errorf("token index without token ids: %v", *d.TokenIndex)
	}
}

func TestReplaceSection(t *testing.T) {
	t.Parallel()
	sec := "## MTP performance\n\nnew numbers\n"
	cases := []struct{ name, card, want string }{
		{"inserted before", "# T\n\n## How\n\nx\n\n## Verification\n\nv\n", "# T\n\n## How\n\nx\n\n## MTP performance\n\nnew numbers\n\n## Verification\n\nv\n"},
		{"replaced in place", "# T\n\n## MTP performance\n\nold\nlines\n\n## Verification\n\nv\n", "# T\n\n## MTP performance\n\nnew numbers\n\n## Verification\n\nv\n"},
		{"replaced at the end", "# T\n\n## MTP performance\n\nold\n", "# T\n\n## MTP performance\n\nnew numbers\n"},
		{"appended", "# T\n\nbody", "# T\n\nbody\n\n## MTP performance\n\nnew numbers\n"},
		{"a heading that only starts alike is not it", "## MTP performance notes\n\nours\n", "## MTP performance notes\n\nours\n\n## MTP performance\n\nnew numbers\n"},
	}
	for _, c := range cases {
		got := string(ReplaceSection([]byte(c.card), sec, "## Verification"))
		if got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
		if again := string(ReplaceSection([]byte(got), sec, "## Verification")); again != got {
			t.Errorf("%s: a second run changed the card:\n%q", c.name, again)
		}
	}
}

func TestNotCountedIsNotDrafting(t *testing.T) {
	t.Parallel()
	in := starts([]string{"plain", "mtp", "plain"}, []int{0, 0, 0}, []float64{10, 10, 10})
	r := Compute(in) // the MTP run has Counted=false: the runtime reported no draft counters
	if r.Summary.Verdict.Draft != DraftNotDrafting || r.Summary.Drafted != 0 || r.Summary.MeanAcceptedPerStep != nil {
		t.Errorf("%+v", r.Summary)
	}
	if r.Summary.Verdict.Output != OutputIdentical || *r.Summary.SameOutput.Identical != 1 {
		t.Errorf("output %+v", r.Summary.SameOutput)
	}
}
