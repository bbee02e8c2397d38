// Command mkfixtures generates the tiny test checkpoints (deterministically)
// into testdata/fixtures, or into -out.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

func main() {
	out := flag.String("out", fixtures.Dir(), "folder to generate the fixtures in")
	flag.Parse()
	names := flag.Args()
	if len(names) == 0 {
		names = fixtures.All
	}
	for _, n := range names {
		dir, err := fixtures.EnsureDir(*out, n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkfixtures:", err)
			os.Exit(1)
		}
		fmt.Println(dir)
	}
}
