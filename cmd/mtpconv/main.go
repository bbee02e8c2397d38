// Command mtpconv exports the multi-token-prediction (MTP) head of the
// families of convert/families (--help lists them, from the registry)
// for OpenVINO, MLX, llama.cpp (GGUF) and vLLM/SGLang (HF repos)
// (one --target each, listed by --help from the target registry), with the
// commands inspect (a source checkpoint or one of our outputs), export,
// verify (re-hash an output, and recompute it from --src), card and bench.
// The source may be a folder, a Hugging Face cache entry or a Hub repo read
// by range (convert/source). This package wires flags, progress and JSON
// output, Ctrl-C and exit codes (exitCodes);
// the work is the library's (convert, manifests) and it knows nothing of tensors.
package main

//go:generate go test -run ^(TestFlagReference|TestFamilyLists)$ . -update-docs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/urfave/cli/v2"

	_ "github.com/mtpconv/mtpconv/convert/families"         // registers the families
	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"     // registers gguf
	_ "github.com/mtpconv/mtpconv/convert/targets/hf"       // registers hf
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"      // registers mlx and combined
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino" // registers openvino
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1   // the input or the work failed
	exitUsage       = 2   // the command line is wrong
	exitInterrupted = 130 // SIGINT or SIGTERM stopped the command (128 + SIGINT, as shells report it)
)

// exitCodes says what each exit code means, in --help and in the generated
// reference of docs/commands.md.
var exitCodes = fmt.Sprintf("Exit codes: %d success; %d bad input, failed work or failed verification (the message names the file and tensor); "+
	"%d bad command line (a flag the target does not take included); %d interrupted (SIGINT or SIGTERM; nothing partial is left).",
	exitOK, exitFailure, exitUsage, exitInterrupted)

type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() {
	if path := os.Getenv("MTPCONV_CPUPROFILE"); path != "" { // for performance work
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	code := runWithSignals(os.Args, os.Stdout, os.Stderr)
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

// runWithSignals runs the command line with a context that the first SIGINT
// or SIGTERM cancels: every command's long loops watch it and stop within a
// chunk, and the command exits with exitInterrupted. A second signal kills
// the process outright.
func runWithSignals(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // the default action again, for the second signal
	}()
	return run(ctx, args, stdout, stderr)
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, reorderArgs(app, args))
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		fmt.Fprintln(stderr, "mtpconv:", err)
		return exitInterrupted
	}
	var ue usageError
	var ce targets.UsageError
	if errors.As(err, &ue) || errors.As(err, &ce) || isCLIUsage(err) {
		fmt.Fprintln(stderr, "mtpconv:", withHelpHint(err.Error(), app, args))
		return exitUsage
	}
	fmt.Fprintln(stderr, "mtpconv:", err)
	return exitFailure
}

// withHelpHint ends a usage error, once, with where the usage is: every
// usage error is this one line, never the help followed by the error.
func withHelpHint(msg string, app *cli.App, args []string) string {
	if strings.Contains(msg, "--help") || strings.Contains(msg, "mtpconv help") {
		return msg
	}
	cmd := "mtpconv"
	if len(args) > 1 && app.Command(args[1]) != nil {
		cmd += " " + args[1]
	}
	return msg + " (see " + cmd + " --help)"
}

// goFlagName matches a flag as Go's flag package spells it in its errors
// ("-src"); we say "--src", as the help and every example do.
var goFlagName = regexp.MustCompile(`(^|[ :])-([a-z][a-z0-9-]+)`)

// cliUsageError is a urfave/cli parse error as a usage error, its flag names as --help spells them.
func cliUsageError(err error) error {
	return usageError{errors.New(goFlagName.ReplaceAllString(err.Error(), "$1--$2"))}
}

func isCLIUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") ||
		strings.HasPrefix(s, "invalid value") || strings.HasPrefix(s, "No help topic")
}

// appUsage is the one line --help starts with; it names no family (the
// description lists them from the registry, so the line cannot go stale).
const appUsage = "export the multi-token-prediction (MTP) head of open-weight LLM checkpoints " +
	"for speculative decoding with OpenVINO, MLX, llama.cpp (GGUF), and vLLM and SGLang (HF repos)"

// familyTitles names every registered family as its users know it, with
// its name in reports: "Qwen3-Next (qwen3_next)".
func familyTitles() string {
	var titles []string
	for _, f := range model.Registered() {
		titles = append(titles, f.Title+" ("+f.Name+")")
	}
	return strings.Join(titles, ", ")
}

// appDescription lists the families and the targets from their registries,
// so that a new one is in --help the moment it is registered.
func appDescription() string {
	lines := []string{"Families: " + familyTitles() + ".", "", "Targets:"}
	for _, n := range targets.TargetNames() {
		t, _ := targets.LookupTarget(n)
		lines = append(lines, "  --target "+n+": "+t.Usage())
	}
	return strings.Join(lines, "\n") + "\n\n" +
		"Start with `mtpconv inspect SRC`, then `mtpconv export --src SRC --target T --out DIR`.\n" +
		"`mtpconv COMMAND --help` shows a command's flags; docs/commands.md lists them all.\n\n" + exitCodes
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:            "mtpconv",
		Usage:           appUsage,
		Description:     appDescription(),
		Version:         version,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		// Our own help command keeps urfave/cli from adding --help/-h to the
		// app, and Go's flag package would then refuse them (exit 2).
		Flags: []cli.Flag{cli.HelpFlag},
		// Errors are printed once, by run, with the exit code it chooses.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cliUsageError(err)
		},
		Commands: []*cli.Command{inspectCommand(), exportCommand(), verifyCommand(), cardCommand(), benchCommand()},
	}
	for _, c := range app.Commands {
		// One line (run adds the hint), instead of the whole help on stdout and the error twice.
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return cliUsageError(err)
		}
		checkRequiredOurselves(c)
	}
	app.Commands = append(app.Commands, &cli.Command{
		Name: "version", Usage: "print the version and the commit it was built from",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "mtpconv %s%s\n", version, buildCommit())
			return nil
		},
	}, &cli.Command{
		Name: "help", Usage: "show the commands, or one command's help", ArgsUsage: "[COMMAND]",
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.ShowAppHelp(c)
			}
			if c.App.Command(c.Args().First()) == nil {
				return unknownCommand(c.App, c.Args().First())
			}
			parent := c
			if l := c.Lineage(); len(l) > 1 {
				parent = l[1] // the app's context: commands are looked up there
			}
			return cli.ShowCommandHelp(parent, c.Args().First())
		},
	})
	app.CommandNotFound = func(c *cli.Context, name string) {}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return unknownCommand(c.App, c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	return app
}

// checkRequiredOurselves moves the check of c's required flags from
// urfave/cli, which prints the whole help before its error, to a Before that
// refuses in one line with the hint to --help. The flags' usage says
// "(required)" instead, in --help and in docs/commands.md.
func checkRequiredOurselves(c *cli.Command) {
	var names []string
	for _, f := range c.Flags {
		rf, ok := f.(cli.RequiredFlag)
		if !ok || !rf.IsRequired() {
			continue
		}
		sf, ok := f.(*cli.StringFlag)
		if !ok {
			panic("mtpconv: only string flags can be required: " + f.Names()[0])
		}
		sf.Required = false
		sf.Usage = "(required) " + sf.Usage
		names = append(names, sf.Name)
	}
	if len(names) == 0 {
		return
	}
	name, before := c.Name, c.Before
	c.Before = func(ctx *cli.Context) error {
		var missing []string
		for _, n := range names {
			if !ctx.IsSet(n) {
				missing = append(missing, "--"+n)
			}
		}
		if len(missing) > 0 {
			if first := ctx.Args().First(); slices.Contains(missing, "--src") && first != "" && !strings.HasPrefix(first, "-") {
				// urfave/cli reads no flag after a positional argument.
				return usagef("%s needs %s: did you mean --src %s? (the source is a flag; nothing after a bare argument is read)", name, andList(missing), targets.ShellQuote(first))
			}
			return usagef("%s needs %s", name, andList(missing))
		}
		if before != nil {
			return before(ctx)
		}
		return nil
	}
}

// andList joins words as prose: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// unknownCommand refuses a command name, suggesting the closest one.
func unknownCommand(app *cli.App, name string) error {
	best, dist := "", 3
	for _, c := range app.Commands {
		if d := editDistance(name, c.Name); d < dist {
			best, dist = c.Name, d
		}
	}
	if best != "" {
		return usagef("%q is not a command; did you mean %s? (see mtpconv help)", name, best)
	}
	return usagef("%q is not a command (see mtpconv help)", name)
}

// editDistance is the Levenshtein distance of two short words.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// buildCommit is " (commit X)" from the build's VCS stamp, when Go recorded one.
func buildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev == "" {
		return " (commit unknown: built without VCS information)"
	}
	return " (commit " + rev + dirty + ")"
}

// reorderArgs moves a subcommand's flags in front of its positional
// arguments, because urfave/cli v2 stops parsing flags at the first
// positional one and would silently take `inspect SRC --json` as two paths.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	if len(args) == 3 && args[2] == "help" && app.Command(args[1]) != nil {
		return []string{args[0], "help", args[1]} // `mtpconv export help` is `mtpconv help export`
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.Name == args[1] {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, pos []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(rest) {
			flags = append(flags, rest[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	if len(pos) > 0 {
		out = append(append(out, "--"), pos...)
	}
	return out
}

// readDelayEnv is a test hook: set to a duration, it makes verify --src wait
// that long before each source read once verification is under way, and
// inspect --hash before each chunk it hashes, and announce the first wait on
// stderr, so that a test can interrupt a run that would otherwise end too soon.
const readDelayEnv = "MTPCONV_TEST_READ_DELAY"

type testDelay struct {
	d     time.Duration
	w     io.Writer
	armed atomic.Bool
	once  sync.Once
}

// newTestDelay reads readDelayEnv; nil (no waits) when it is unset.
func newTestDelay(w io.Writer) *testDelay {
	d, err := time.ParseDuration(os.Getenv(readDelayEnv))
	if err != nil || d <= 0 {
		return nil
	}
	return &testDelay{d: d, w: w}
}

func (t *testDelay) arm() {
	if t != nil {
		t.armed.Store(true)
	}
}

func (t *testDelay) wait() {
	if t == nil || !t.armed.Load() {
		return
	}
	t.once.Do(func() { fmt.Fprintln(t.w, "mtpconv: test hook: reading slowly") })
	time.Sleep(t.d)
}

// source wraps src so that its files wait before each read.
func (t *testDelay) source(src st.Opener) st.Opener {
	if t == nil {
		return src
	}
	return delayedSource{src, t}
}

type delayedSource struct {
	st.Opener
	t *testDelay
}

func (s delayedSource) Open(name string) (st.File, error) {
	f, err := s.Opener.Open(name)
	if err != nil {
		return nil, err
	}
	return delayedFile{f, s.t}, nil
}

type delayedFile struct {
	st.File
	t *testDelay
}

func (f delayedFile) ReadAt(p []byte, off int64) (int, error) {
	f.t.wait()
	return f.File.ReadAt(p, off)
}
