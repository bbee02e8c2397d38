// Command mkfixtures generates the tiny test checkpoints (deterministically)
// into testdata/fixtures, or into -out: with no name, the ones the README and
// the tests start from; -list shows every fixture it can write, and the GGUF
// trunks (a fixture's trunk as llama.cpp's reference converter writes it,
// for --target gguf --graft), which it writes when named.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/gguftrunk"
)

// trunk is a GGUF file mkfixtures writes from a fixture.
type trunk struct {
	File, Of, About string
}

// trunks are the GGUF trunks it can write, beside the fixtures.
var trunks = []trunk{
	{fixtures.Qwen36BPE + "-BF16.gguf", fixtures.Qwen36BPE,
		"the trunk of " + fixtures.Qwen36BPE + " as a bf16 GGUF without its MTP head (convert_hf_to_gguf.py's layout): for --target gguf --graft"},
}

// defaults are what mkfixtures writes when no name is given: what the
// README and the tests start from, and a quant of each kind to try --into on.
var defaults = append(append([]string{}, fixtures.All...), fixtures.Qwen36BPE, trunks[0].File,
	fixtures.Qwen36BPEW8A8, fixtures.Qwen36BPEMLX4bit, fixtures.Qwen36GenAI)

// optimum are the optimum-intel exports committed in testdata/genai (made
// outside CI by scripts/optimum-fixture/make.py, not by mkfixtures), named
// by -list for --target openvino --into.
var optimum = []string{fixtures.Qwen36GenAI, fixtures.Qwen36GenAIRigged, fixtures.Qwen36DenseGenAI, fixtures.Qwen36DenseGenAIRigged}

// optimumDir is the committed optimum-intel export of a GenAI fixture.
func optimumDir(name string) string { return filepath.Join("testdata", "genai", name+"-optimum") }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mkfixtures", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", fixtures.Dir(), "folder to generate the fixtures in")
	list := fs.Bool("list", false, "list every fixture and GGUF trunk mkfixtures can write, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mkfixtures [-out DIR] [NAME ...]   (no NAME: %v)\n       mkfixtures -list\n", defaults)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *list {
		printList(stdout)
		return 0
	}
	names := fs.Args()
	if len(names) == 0 {
		names = defaults
	}
	for _, n := range names {
		path, err := write(*out, n)
		if err != nil {
			fmt.Fprintln(stderr, "mkfixtures:", err)
			return 1
		}
		fmt.Fprintln(stdout, path)
	}
	return 0
}

// printList prints every name mkfixtures takes, with what it is; * marks the defaults.
func printList(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	isDefault := map[string]string{}
	for _, n := range defaults {
		isDefault[n] = "*"
	}
	for _, f := range fixtures.Catalog {
		fmt.Fprintf(tw, "%s%s\t%s\n", f.Name, isDefault[f.Name], f.About)
	}
	for _, t := range trunks {
		fmt.Fprintf(tw, "%s%s\t%s\n", t.File, isDefault[t.File], t.About)
	}
	for _, n := range optimum {
		fmt.Fprintf(tw, "%s\t%s\n", optimumDir(n), "committed, not written: an optimum-intel export of "+n+
			" with its own MTP IR (move openvino_mtp_model.* aside, then --target openvino --into a copy)")
	}
	tw.Flush()
	fmt.Fprintln(w, "(* written when no name is given)")
}

// write generates fixture or trunk name under base unless it is there, and returns its path.
func write(base, name string) (string, error) {
	for _, t := range trunks {
		if t.File == name {
			return writeTrunk(base, t)
		}
	}
	return fixtures.EnsureDir(base, name)
}

// writeTrunk writes a trunk GGUF from its fixture, under its own name (the
// file name is its general.name) in a temporary folder, then renamed into
// place. Its bytes depend only on the fixture, so an existing file is
// written again rather than trusted.
func writeTrunk(base string, t trunk) (string, error) {
	dir, err := fixtures.EnsureDir(base, t.Of)
	if err != nil {
		return "", err
	}
	m, err := model.Load(source.Dir(dir))
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	defer m.Checkpoint.Close()
	tmp, err := os.MkdirTemp(base, "."+t.File+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := gguftrunk.WriteTrunk(m, filepath.Join(tmp, t.File)); err != nil {
		return "", fmt.Errorf("%s: %w", t.File, err)
	}
	path := filepath.Join(base, t.File)
	return path, os.Rename(filepath.Join(tmp, t.File), path)
}
