// Command readbound measures the read bound of an export: it plans the same
// export as mtpconv would and reads exactly the source byte ranges the plan
// needs, in 8 MiB preads, discarding them. It prints JSON: bytes, seconds.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	_ "github.com/mtpconv/mtpconv/convert/families" // registers the families
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"

	_ "github.com/mtpconv/mtpconv/convert/targets/gguf"
	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

func main() {
	src := flag.String("src", "", "source checkpoint folder")
	target := flag.String("target", "mlx", "mlx | combined | openvino | gguf")
	flag.Parse()
	if err := run(*src, *target); err != nil {
		fmt.Fprintln(os.Stderr, "readbound:", err)
		os.Exit(1)
	}
}

func run(src, target string) error {
	m, err := model.Load(source.Dir(src))
	if err != nil {
		return err
	}
	defer m.Checkpoint.Close()
	// The source ranges depend on the target, not on its precisions: its defaults do.
	t, err := targets.LookupTarget(target)
	if err != nil {
		return err
	}
	p, err := t.Plan(m, targets.Options{})
	if err != nil {
		return err
	}
	files := map[string]*os.File{}
	for name := range p.SourceRanges(m.Checkpoint) {
		f, err := os.Open(src + "/" + name)
		if err != nil {
			return err
		}
		defer f.Close()
		files[name] = f
	}
	buf := make([]byte, 8<<20)
	start := time.Now()
	var total int64
	for name, ranges := range p.SourceRanges(m.Checkpoint) {
		for _, r := range ranges {
			for off := r[0]; off < r[1]; {
				n := min(int64(len(buf)), r[1]-off)
				if _, err := files[name].ReadAt(buf[:n], off); err != nil {
					return err
				}
				off += n
				total += n
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"bytes": total, "seconds": time.Since(start).Seconds()})
}
