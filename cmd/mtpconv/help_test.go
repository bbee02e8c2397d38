package main

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
)

// The first thing a newcomer types: --help and -h print the app's help on
// stdout and exit 0: the one line names every consumer, the description
// every registered family (from the registry, as it runs) and every
// registered target with its one-line usage.
func TestAppHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
			first := strings.SplitN(strings.TrimPrefix(stdout, "NAME:\n"), "\n", 2)[0]
			for _, w := range []string{"MTP", "OpenVINO", "MLX", "llama.cpp", "GGUF", "vLLM", "SGLang", "HF"} {
				if !strings.Contains(first, w) {
					t.Errorf("the one-line description %q does not name %s", first, w)
				}
			}
			for _, f := range model.Registered() {
				if !strings.Contains(stdout, f.Title+" ("+f.Name+")") {
					t.Errorf("help does not name the family %s (%s)", f.Title, f.Name)
				}
			}
			for _, n := range targets.TargetNames() {
				tg, _ := targets.LookupTarget(n)
				if !strings.Contains(stdout, "--target "+n+": "+tg.Usage()) {
					t.Errorf("help does not list --target %s with its usage", n)
				}
			}
			for _, c := range []string{"inspect", "export", "verify", "card", "--help, -h", "--version"} {
				if !strings.Contains(stdout, c) {
					t.Errorf("help does not show %s:\n%s", c, stdout)
				}
			}
		})
	}
	// Each command's own --help too.
	for _, c := range []string{"inspect", "export", "verify", "card"} {
		for _, h := range []string{"--help", "-h"} {
			code, stdout, stderr := runCLI(t, c, h)
			if code != 0 || stderr != "" || !strings.Contains(stdout, "mtpconv "+c+" - ") {
				t.Errorf("mtpconv %s %s: exit %d, stderr %q, stdout %.80q", c, h, code, stderr, stdout)
			}
		}
	}
}

// Every usage error, a missing required flag included, is one line on
// stderr ending in where to read the usage, with nothing on stdout, flags
// spelled as --help spells them, and exit 2.
func TestUsageErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"export"}, "export needs --src and --target (see mtpconv export --help)"},
		{[]string{"export", "--target", "mlx", "--out", dir + "/o"}, "export needs --src (see mtpconv export --help)"},
		{[]string{"export", "--src", dir}, "export needs --target (see mtpconv export --help)"},
		{[]string{"export", "--src", dir, "--target", "mlx"}, "--out (or --into) is required (see mtpconv export --help)"},
		{[]string{"export", "--src", dir, "--target", "mlx", "--out", "a", "--into", "b"}, "exclusive (see mtpconv export --help)"},
		{[]string{"export", "--src"}, "flag needs an argument: --src (see mtpconv export --help)"},
		{[]string{"export", "--jobs", "x"}, `invalid value "x" for flag --jobs`},
		{[]string{"export", "--bogus"}, "flag provided but not defined: --bogus (see mtpconv export --help)"},
		{[]string{"--bogus"}, "flag provided but not defined: --bogus (see mtpconv --help)"},
		{[]string{"inspect"}, "(see mtpconv inspect --help)"},
		{[]string{"verify", "a", "b"}, "(see mtpconv verify --help)"},
		{[]string{"card"}, "(see mtpconv card --help)"},
		{[]string{"exprot"}, "did you mean export? (see mtpconv help)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing (no help before the error)", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "mtpconv: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, c.want)
			}
			if strings.Count(stderr, "--help") > 1 {
				t.Errorf("stderr %q gives the hint twice", stderr)
			}
		})
	}
}
