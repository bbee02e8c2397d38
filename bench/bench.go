// Package bench measures an MTP head where the user serves it: the options
// become a Schedule (pure data: which arm, which draft length, which repeat,
// in which order), the executor runs it through a runtime without deciding
// anything, and package report judges what it measured.
package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mtpconv/mtpconv/bench/prompts"
	"github.com/mtpconv/mtpconv/bench/report"
	"github.com/mtpconv/mtpconv/bench/runtimes"
)

// Options are what the user asked for.
type Options struct {
	Setup       runtimes.Setup
	Prompts     []prompts.Prompt
	DraftTokens []int // the sweep, each > 0
	Repeats     int
	MaxTokens   int
	Seed        int
	Greedy      bool
	Concurrency int
}

// WarmupTokens bounds the warm-up request each start answers first (discarded).
const WarmupTokens = 16

// Step is one start of the runtime: a warm-up request, discarded, then every prompt once.
type Step struct {
	Arm    runtimes.Arm
	Repeat int
}

// Plan is the schedule: per repeat the plain arm and each draft length, the
// order reversed every other repeat (plain, MTP, MTP, plain, …: ABBA, so that
// drift hits both arms alike), and a closing plain start when the schedule
// would end on MTP, so that every repeat's MTP starts are bracketed by plain
// ones and the plain arm is run at least twice (its own determinism is checked first).
func Plan(draftTokens []int, repeats int) []Step {
	var steps []Step
	for r := range repeats {
		seq := []runtimes.Arm{{}}
		for _, k := range draftTokens {
			seq = append(seq, runtimes.Arm{MTP: true, DraftTokens: k})
		}
		if r%2 == 1 {
			for i, j := 0, len(seq)-1; i < j; i, j = i+1, j-1 {
				seq[i], seq[j] = seq[j], seq[i]
			}
		}
		for _, a := range seq {
			steps = append(steps, Step{Arm: a, Repeat: r})
		}
	}
	if len(steps) > 0 && steps[len(steps)-1].Arm.MTP {
		steps = append(steps, Step{Repeat: repeats - 1})
	}
	return steps
}

// Measured is what the executor recorded.
type Measured struct {
	Version string
	Starts  []report.Start
	Runs    []report.Run
}

// Execute runs the schedule: one fresh Start per step, the warm-up, every
// prompt (Concurrency at a time), the peak memory, Close. progress, when not
// nil, is told each step as it begins.
func Execute(ctx context.Context, rt runtimes.Runtime, o Options, steps []Step, progress func(i int, s Step)) (*Measured, error) {
	m := &Measured{}
	for i, s := range steps {
		if progress != nil {
			progress(i, s)
		}
		start, runs, version, err := executeStep(ctx, rt, o, i, s)
		if err != nil {
			return nil, fmt.Errorf("%s, repeat %d: %w", s.Arm, s.Repeat+1, err)
		}
		if m.Version == "" {
			m.Version = version
		}
		m.Starts = append(m.Starts, start)
		m.Runs = append(m.Runs, runs...)
	}
	return m, nil
}

func executeStep(ctx context.Context, rt runtimes.Runtime, o Options, i int, s Step) (report.Start, []report.Run, string, error) {
	arm := "plain"
	if s.Arm.MTP {
		arm = "mtp"
	}
	st := report.Start{Arm: arm, DraftTokens: s.Arm.DraftTokens, Repeat: s.Repeat}
	sess, err := rt.Start(ctx, o.Setup, s.Arm)
	if err != nil {
		return st, nil, "", err
	}
	defer sess.Close()
	w, err := sess.Generate(ctx, o.Prompts[0].Request(min(WarmupTokens, o.MaxTokens), o.Seed, o.Greedy))
	if err != nil {
		return st, nil, "", fmt.Errorf("warm-up request: %w", err)
	}
	st.Warmup = report.Warmup{Tokens: w.DecodeTokens, Counted: w.Counted, Drafted: w.Drafted, Accepted: w.Accepted}
	results := make([]runtimes.Result, len(o.Prompts))
	errs := make([]error, len(o.Prompts))
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range max(1, o.Concurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				results[j], errs[j] = sess.Generate(ctx, o.Prompts[j].Request(o.MaxTokens, o.Seed, o.Greedy))
			}
		}()
	}
	for j := range o.Prompts {
		next <- j
	}
	close(next)
	wg.Wait()
	st.Seconds = time.Since(t0).Seconds()
	for j, err := range errs {
		if err != nil {
			return st, nil, "", fmt.Errorf("prompt %s: %w", o.Prompts[j].ID, err)
		}
	}
	runs := make([]report.Run, len(o.Prompts))
	for j, res := range results {
		p := o.Prompts[j]
		runs[j] = report.Run{Start: i, Arm: arm, DraftTokens: s.Arm.DraftTokens, Repeat: s.Repeat, Prompt: p.ID, Class: p.Class,
			PromptTokens: res.PromptTokens, Tokens: res.DecodeTokens, TokensPerSecond: res.DecodePerSecond,
			TTFTMillis: float64(res.TimeToFirstToken.Microseconds()) / 1000, Counted: res.Counted, Drafted: res.Drafted,
			Accepted: res.Accepted, AcceptedPerPosition: res.AcceptedPerPos, VerifySteps: res.VerifySteps,
			Text: res.Text, TokenIDs: res.Tokens}
		st.Tokens += res.DecodeTokens
	}
	if b, ok := sess.PeakRSS(); ok {
		st.PeakRSSBytes = b
	}
	version := sess.Version()
	if err := sess.Close(); err != nil {
		return st, nil, "", err
	}
	if b, ok := sess.PeakRSS(); ok && b > st.PeakRSSBytes {
		st.PeakRSSBytes = b
	}
	return st, runs, version, nil
}
