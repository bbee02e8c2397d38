package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/bench"
	"github.com/mtpconv/mtpconv/bench/prompts"
	"github.com/mtpconv/mtpconv/bench/report"
	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/urfave/cli/v2"

	_ "github.com/mtpconv/mtpconv/bench/runtimes/genai"    // registers openvino-genai
	_ "github.com/mtpconv/mtpconv/bench/runtimes/llamacpp" // registers llama.cpp
	_ "github.com/mtpconv/mtpconv/bench/runtimes/mlxvlm"   // registers mlx-vlm
	_ "github.com/mtpconv/mtpconv/bench/runtimes/vllm"     // registers vllm
)

// maxDefaultDraftTokens caps the default sweep (1..the head's layer count).
const maxDefaultDraftTokens = 3

func benchCommand() *cli.Command {
	return &cli.Command{
		Name: "bench",
		Usage: "measure the MTP head where you serve it: start the runtime plain and with the head (fresh process per arm, ABBA, warm-up discarded), " +
			"and report whether it drafts, whether it pays and whether it changes the answer, from the runtime's own counters",
		ArgsUsage: "[-- RUNTIME ARGS]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "runtime", DefaultText: "inferred from the files when obvious", Usage: "the runtime to measure: " + strings.Join(runtimes.Names(), " | ")},
			&cli.StringFlag{Name: "model", Usage: "what the runtime serves: the trunk GGUF (or the bundled/grafted file), the HF repo, MLX or OpenVINO folder"},
			&cli.StringFlag{Name: "head", Usage: "the MTP head when it is not inside --model: a GGUF sidecar (llama.cpp -md), a drafter or MTP IR folder"},
			&cli.StringFlag{Name: "llama-server", DefaultText: "llama-server on PATH", Usage: "llama.cpp: the llama-server to start"},
			&cli.StringFlag{Name: "python", Usage: "vllm, mlx-vlm, openvino-genai: the Python that has the runtime installed"},
			&cli.StringFlag{Name: "endpoint", Usage: "measure a server you run (with the head) at this URL instead of starting one; needs --plain-endpoint"},
			&cli.StringFlag{Name: "plain-endpoint", Usage: "the URL of the same server without the head (with --endpoint)"},
			&cli.StringFlag{Name: "prompts", DefaultText: "the built-in classes: code, prose, extraction, math, chat", Usage: "a JSONL file (\"prompt\" or chat \"messages\" per line) or a text file (one prompt per line, or per blank-line block)"},
			&cli.IntFlag{Name: "context", Usage: "pad each prompt with a neutral document to about N tokens (0: no padding)"},
			&cli.StringFlag{Name: "draft-tokens", DefaultText: "1 up to the head's layer count, at most 3", Usage: "the draft lengths to sweep, comma-separated (\"1,2,3\"); one runtime start per length"},
			&cli.IntFlag{Name: "repeats", Value: 3, Usage: "settled runs of each arm (the speedup's noise band comes from them)"},
			&cli.IntFlag{Name: "max-tokens", Value: 128, Usage: "tokens generated per prompt at most"},
			&cli.IntFlag{Name: "concurrency", Value: 1, Usage: "requests sent at once (server runtimes)"},
			&cli.IntFlag{Name: "seed", Value: 42, Usage: "the sampling seed of every request"},
			&cli.BoolFlag{Name: "sample", Usage: "use the runtime's sampling instead of greedy decoding (the output is then not judged)"},
			&cli.StringFlag{Name: "json", Usage: "write the whole report as JSON to this file (also when a gate fails)"},
			&cli.StringFlag{Name: "card", Usage: "record the report in this mtpconv output folder: " + bench.ReportFile + " (hashed in the manifest) and, in an --out folder, the card's \"MTP performance\" section"},
			&cli.Float64Flag{Name: "min-acceptance", Usage: "exit 1 when the acceptance is below this fraction (0..1)"},
			&cli.Float64Flag{Name: "min-speedup", Usage: "exit 1 when the speedup's noise band reaches below this factor"},
			&cli.BoolFlag{Name: "require-same-output", Usage: "exit 1 unless greedy output with the head is identical to output without it on every prompt"},
		},
		Action: runBench,
	}
}

// benchPlan is everything the command line decided, checked.
type benchPlan struct {
	rt        runtimes.Runtime
	opts      bench.Options
	settings  report.Settings
	jsonPath  string
	cardDir   string
	minAccept float64
	minSpeed  float64
	sameOut   bool
}

func parseBench(c *cli.Context) (*benchPlan, error) {
	s := runtimes.Setup{Model: c.String("model"), Head: c.String("head"), RuntimeArgs: c.Args().Slice(), Binary: c.String("llama-server"),
		Python: c.String("python"), Endpoint: c.String("endpoint"), PlainEndpoint: c.String("plain-endpoint"), Concurrency: c.Int("concurrency")}
	if s.Model == "" && s.Endpoint == "" {
		return nil, usagef("bench needs --model (or --endpoint and --plain-endpoint for servers you run)")
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"--repeats", c.Int("repeats") >= 1}, {"--max-tokens", c.Int("max-tokens") >= 1}, {"--concurrency", c.Int("concurrency") >= 1},
		{"--context", c.Int("context") >= 0},
		{"--min-acceptance", c.Float64("min-acceptance") >= 0 && c.Float64("min-acceptance") <= 1},
		{"--min-speedup", c.Float64("min-speedup") >= 0},
	} {
		if !f.ok {
			return nil, usagef("%s is out of range", f.name)
		}
	}
	if c.Bool("sample") && c.Bool("require-same-output") {
		return nil, usagef("--require-same-output needs greedy decoding: sampled outputs differ by design (drop --sample)")
	}
	var rt runtimes.Runtime
	var err error
	if c.IsSet("runtime") {
		rt, err = runtimes.Lookup(c.String("runtime"))
	} else {
		rt, err = runtimes.Infer(s)
	}
	if err != nil {
		return nil, usageError{err}
	}
	if err := rt.Check(s); errors.Is(err, fs.ErrNotExist) {
		return nil, err // a file that is not there is bad input, not a bad command line
	} else if err != nil {
		return nil, usagef("--runtime %s: %v", rt.Name(), err)
	}
	for _, f := range []struct{ flag, path string }{{"--llama-server", s.Binary}, {"--python", s.Python}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				return nil, fmt.Errorf("%s: %w", f.flag, err)
			}
		}
	}
	if dir := c.String("card"); dir != "" {
		if err := bench.CheckCard(dir); err != nil {
			return nil, err
		}
	}
	ks, err := draftTokens(c, rt, s)
	if err != nil {
		return nil, err
	}
	ps, builtin := prompts.Builtin(), true
	if c.IsSet("prompts") {
		if ps, err = prompts.Load(c.String("prompts")); err != nil {
			return nil, err
		}
		builtin = false
	}
	ps = prompts.Pad(ps, c.Int("context"))
	p := &benchPlan{rt: rt, jsonPath: c.String("json"), cardDir: c.String("card"), minAccept: c.Float64("min-acceptance"),
		minSpeed: c.Float64("min-speedup"), sameOut: c.Bool("require-same-output")}
	p.opts = bench.Options{Setup: s, Prompts: ps, DraftTokens: ks, Repeats: c.Int("repeats"), MaxTokens: c.Int("max-tokens"),
		Seed: c.Int("seed"), Greedy: !c.Bool("sample"), Concurrency: c.Int("concurrency")}
	p.settings = report.Settings{Prompts: len(ps), Builtin: builtin, Context: c.Int("context"), MaxTokens: p.opts.MaxTokens,
		Repeats: p.opts.Repeats, Concurrency: p.opts.Concurrency, Greedy: p.opts.Greedy, Seed: p.opts.Seed, DraftTokens: ks,
		RuntimeArgs: append([]string{}, s.RuntimeArgs...), Endpoints: s.Endpoint != ""}
	return p, nil
}

// draftTokens is the sweep: --draft-tokens, or 1 up to the head's layer count (at most 3; 3 when the files do not say).
func draftTokens(c *cli.Context, rt runtimes.Runtime, s runtimes.Setup) ([]int, error) {
	var ks []int
	if c.IsSet("draft-tokens") {
		for _, f := range strings.Split(c.String("draft-tokens"), ",") {
			k, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || k < 1 || k > 64 {
				return nil, usagef("--draft-tokens %q: give draft lengths from 1 to 64, comma-separated", c.String("draft-tokens"))
			}
			for _, seen := range ks {
				if seen == k {
					return nil, usagef("--draft-tokens %q names %d twice", c.String("draft-tokens"), k)
				}
			}
			ks = append(ks, k)
		}
	} else {
		n := maxDefaultDraftTokens
		if h := rt.HeadCount(s); h > 0 {
			n = min(h, n)
		}
		if s.Endpoint != "" {
			return []int{n}, nil // the server's own draft length: one, named for the report
		}
		for k := 1; k <= n; k++ {
			ks = append(ks, k)
		}
	}
	if s.Endpoint != "" && len(ks) > 1 {
		return nil, usagef("--endpoint: a server's draft length is fixed when it starts; give the one it runs with as --draft-tokens K")
	}
	return ks, nil
}

func runBench(c *cli.Context) error {
	p, err := parseBench(c)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mtpconv-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p.opts.Setup.Dir = dir
	steps := bench.Plan(p.opts.DraftTokens, p.opts.Repeats)
	m, err := bench.Execute(c.Context, p.rt, p.opts, steps, func(i int, s bench.Step) {
		fmt.Fprintf(c.App.ErrWriter, "bench: start %d of %d: %s, repeat %d\n", i+1, len(steps), s.Arm, s.Repeat+1)
	})
	if err != nil {
		return err
	}
	in := report.Input{Runtime: p.rt.Name(), RuntimeVersion: m.Version, Model: filepath.Base(p.opts.Setup.Model), Hardware: bench.Hardware(),
		PromptsSHA256: prompts.SHA256(p.opts.Prompts), Settings: p.settings, Starts: m.Starts, Runs: m.Runs}
	if p.opts.Setup.Model == "" {
		in.Model = p.opts.Setup.Endpoint
	}
	if p.opts.Setup.Head != "" {
		in.Head = filepath.Base(p.opts.Setup.Head)
	}
	r := report.Compute(in)
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	js = append(js, '\n')
	fmt.Fprint(c.App.Writer, r.Table())
	if p.jsonPath != "" {
		if err := writeFileReplacing(p.jsonPath, js); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if p.cardDir != "" {
		wrote, err := bench.WriteCard(p.cardDir, js, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "bench: wrote %s in %s\n", andList(wrote), p.cardDir)
	}
	return gate(p, r)
}

// gate is the CI gate: every threshold the report misses, named.
func gate(p *benchPlan, r *report.Report) error {
	s := r.Summary
	var failed []string
	if p.minAccept > 0 && s.Acceptance < p.minAccept {
		failed = append(failed, fmt.Sprintf("acceptance %.4f (%d of %d drafted) is below --min-acceptance %g", s.Acceptance, s.Accepted, s.Drafted, p.minAccept))
	}
	if p.minSpeed > 0 && s.Speedup.Low < p.minSpeed {
		failed = append(failed, fmt.Sprintf("the speedup ×%.3f (band %.3f–%.3f) reaches below --min-speedup %g", s.Speedup.Median, s.Speedup.Low, s.Speedup.High, p.minSpeed))
	}
	if p.sameOut && s.Verdict.Output != report.OutputIdentical {
		why := s.SameOutput.Why
		if s.Verdict.Output == report.OutputChanged {
			why = fmt.Sprintf("%d of %d prompts answered differently with MTP", s.SameOutput.Prompts-*s.SameOutput.Identical, s.SameOutput.Prompts)
		}
		failed = append(failed, fmt.Sprintf("--require-same-output: output %s (%s)", s.Verdict.Output, why))
	}
	if len(failed) > 0 {
		return errors.New("bench gate failed: " + strings.Join(failed, "; "))
	}
	return nil
}
