// Command mtpconv exports the multi-token-prediction head of Qwen3.5/3.6-MoE
// and Qwen3-Next checkpoints for OpenVINO and MLX. This package wires flags,
// exit codes and output; it knows nothing of tensors.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	_ "github.com/mtpconv/mtpconv/convert/target/mlx"      // registers mlx and combined
	_ "github.com/mtpconv/mtpconv/convert/target/openvino" // registers openvino
	st "github.com/mtpconv/mtpconv/formats/safetensors"
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
	fmt.Fprintln(stderr, "mtpconv:", err)
	var ue usageError
	var ce convert.UsageError
	if errors.As(err, &ue) || errors.As(err, &ce) || isCLIUsage(err) {
		return exitUsage
	}
	return exitFailure
}

func isCLIUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") || strings.HasPrefix(s, "Required flag") ||
		strings.HasPrefix(s, "invalid value") || strings.HasPrefix(s, "No help topic")
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:            "mtpconv",
		Usage:           "export the MTP head of Qwen3.5/3.6-MoE and Qwen3-Next for OpenVINO and MLX",
		Version:         version,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		// Errors are printed once, by run, with the exit code it chooses.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		Commands: []*cli.Command{inspectCommand(), exportCommand(), verifyCommand(), cardCommand()},
	}
}

// reorderArgs moves a subcommand's flags in front of its positional
// arguments, because urfave/cli v2 stops parsing flags at the first
// positional one and would silently take `inspect SRC --json` as two paths.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
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
func (t *testDelay) source(src st.Source) st.Source {
	if t == nil {
		return src
	}
	return delayedSource{src, t}
}

type delayedSource struct {
	st.Source
	t *testDelay
}

func (s delayedSource) Open(name string) (st.File, error) {
	f, err := s.Source.Open(name)
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
