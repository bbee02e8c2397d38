// Command mtpconv exports the multi-token-prediction (MTP) head of
// Qwen3.5/3.6-MoE and Qwen3-Next checkpoints for OpenVINO and MLX (--target
// openvino, mlx, or combined: trunk and head in one MLX model), with the
// commands inspect (a source checkpoint or one of our outputs), export,
// verify (re-hash an output, and recompute it from --src) and card. The
// source may be a folder, a Hugging Face cache entry or a Hub repo read by
// range (convert/source). This package wires flags, progress and JSON
// output, Ctrl-C and exit codes (0 success, 1 failure, 2 bad command line);
// the work is the library's (convert, manifests) and it knows nothing of tensors.
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
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	_ "github.com/mtpconv/mtpconv/convert/target/mlx"      // registers mlx and combined
	_ "github.com/mtpconv/mtpconv/convert/target/openvino" // registers openvino
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the input or the work failed
	exitUsage   = 2 // the command line is wrong
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		os.Exit(code)
	}
}

// run executes the command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, reorderArgs(app, args))
	if err == nil {
		return exitOK
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
