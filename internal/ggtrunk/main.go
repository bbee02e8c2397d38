// Command ggtrunk writes the trunk of a (tiny, fixture) checkpoint as a bf16
// GGUF without the MTP head, for the interop tests that run llama.cpp with a
// trunk and an mtpconv sidecar:
//
//	go run ./internal/ggtrunk SRC OUT.gguf
package main

import (
	"fmt"
	"os"

	_ "github.com/mtpconv/mtpconv/convert/families" // registers the families
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/gguftrunk"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: ggtrunk SRC OUT.gguf")
		os.Exit(2)
	}
	m, err := model.Load(source.Dir(os.Args[1]))
	if err == nil {
		err = gguftrunk.WriteTrunk(m, os.Args[2])
		m.Checkpoint.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggtrunk:", err)
		os.Exit(1)
	}
}
