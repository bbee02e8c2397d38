package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/urfave/cli/v2"
)

// The flag reference in docs/commands.md is generated from the command
// definitions (go generate ./cmd/mtpconv runs this test with -update-docs),
// so that it cannot drift: a flag added, renamed or reworded and not
// regenerated fails this test.
var updateDocs = flag.Bool("update-docs", false, "rewrite the generated flag reference in docs/commands.md")

const (
	commandsDoc = "../../docs/commands.md"
	refBegin    = "<!-- flag reference: generated from the CLI's definitions by `go generate ./cmd/mtpconv`; do not edit -->\n"
	refEnd      = "<!-- end of the flag reference -->\n"
)

// flagReference renders every command and every flag of app as Markdown.
func flagReference(app *cli.App) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("Global flags: %s.", strings.Join(flagNames(app.Flags), ", "))
	p("")
	p("%s", exitCodes)
	p("")
	for _, c := range app.Commands {
		p("### `mtpconv %s`", strings.TrimSpace(c.Name+" "+c.ArgsUsage))
		p("")
		p("%s.", strings.TrimSuffix(c.Usage, "."))
		p("")
		if c.Name == "inspect" {
			p("Families it reads (`family` in its report): %s.", "`"+strings.Join(model.Families(), "`, `")+"`")
			p("")
		}
		if c.Name == "export" {
			p("| `--target` | writes | takes |")
			p("|---|---|---|")
			for _, n := range targets.TargetNames() {
				t, _ := targets.LookupTarget(n)
				p("| `%s` | %s | %s |", n, strings.ReplaceAll(t.Usage(), "|", `\|`), "`"+strings.Join(dashed(t.Accepts()), "`, `")+"`")
			}
			p("")
		}
		for _, f := range c.Flags {
			if f == cli.HelpFlag {
				continue
			}
			p("- %s", flagLine(f))
		}
		if len(c.Flags) > 0 {
			p("")
		}
	}
	return b.String()
}

func flagNames(fs []cli.Flag) []string {
	var out []string
	for _, f := range fs {
		out = append(out, "`"+spell(f)+"`")
	}
	return out
}

// spell is a flag as a user types it: --name, -alias, VALUE when it takes one.
func spell(f cli.Flag) string {
	var names []string
	for _, n := range f.Names() {
		if len(n) == 1 {
			names = append(names, "-"+n)
		} else {
			names = append(names, "--"+n)
		}
	}
	s := strings.Join(names, ", ")
	if d, ok := f.(cli.DocGenerationFlag); ok && d.TakesValue() {
		s += " " + valueName(f)
	}
	return s
}

// valueName is the placeholder of a flag's value: N for a number, VALUE otherwise.
func valueName(f cli.Flag) string {
	if _, ok := f.(*cli.IntFlag); ok {
		return "N"
	}
	return "VALUE"
}

func flagLine(f cli.Flag) string {
	d := f.(cli.DocGenerationFlag)
	line := "`" + spell(f) + "`: " + d.GetUsage()
	if d.TakesValue() {
		if def := d.GetDefaultText(); def != "" && !strings.Contains(d.GetUsage(), "default") {
			line += " (default: " + strings.Trim(def, `"`) + ")"
		}
	}
	return line
}

func TestFlagReference(t *testing.T) {
	t.Parallel()
	app := newApp(io.Discard, io.Discard)
	app.Setup() // adds --version, as running it does
	ref := flagReference(app)
	checkRegion(t, commandsDoc, refBegin, refEnd, ref)
	// The generator itself: every flag of every command is in the reference.
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			if f != cli.HelpFlag && !strings.Contains(ref, "`"+spell(f)+"`") {
				t.Errorf("mtpconv %s %s is missing from the reference", c.Name, spell(f))
			}
		}
	}
}

// Every precision a target accepts for --head-precision is named in the
// flag's usage, in the part for that target: the reference cannot omit one
// (as it once omitted fp8). Accepted: the export does not exit 2 on it.
func TestHeadPrecisionsDocumented(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.Qwen36)
	var usage string
	for _, f := range exportCommand().Flags {
		if f.Names()[0] == targets.OptHeadPrecision {
			usage = f.(cli.DocGenerationFlag).GetUsage()
		}
	}
	candidates := []string{"f32", "f16", "fp16", "bf16", "int1", "int2", "int3", "int4", "int5", "int6", "int8",
		"mxfp4", "mxfp8", "nvfp4", "fp4", "fp8", "q8_0", "Q8_0", "Q4_K_M"}
	for _, n := range targets.TargetNames() {
		tg, _ := targets.LookupTarget(n)
		if !slices.Contains(tg.Accepts(), targets.OptHeadPrecision) {
			continue
		}
		part := usagePart(usage, n)
		if part == "" {
			t.Errorf("--head-precision's usage has no part for --target %s: %q", n, usage)
			continue
		}
		for _, p := range candidates {
			code, _, _ := runCLI(t, "export", "--src", src, "--target", n, "--head-precision", p, "--dry-run")
			named := regexp.MustCompile(`(^|[^\w])` + regexp.QuoteMeta(p) + `([^\w]|$)`).MatchString(part)
			if accepted := code != exitUsage; accepted != named {
				t.Errorf("--target %s --head-precision %s: accepted %v, named in the usage %v (%q)", n, p, accepted, named, part)
			}
		}
	}
}

// usagePart is the ";"-separated part of a per-target usage that starts
// with a list of target names holding name ("mlx, combined: ..."), without
// its parenthesized remarks (which name other things: "int8 (Q8_0)").
func usagePart(usage, name string) string {
	usage = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(usage, "")
	for _, part := range strings.Split(usage, ";") {
		names, rest, ok := strings.Cut(strings.TrimSpace(part), ": ")
		if ok && slices.Contains(strings.Split(names, ", "), name) {
			return rest
		}
	}
	return ""
}
