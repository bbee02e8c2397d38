package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "export the MTP head (and for combined, the trunk) of a checkpoint",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "src", Usage: "source checkpoint folder", Required: true},
			&cli.StringFlag{Name: "target", Usage: "mlx | combined | openvino", Required: true},
			&cli.StringFlag{Name: "out", Usage: "output folder (must not exist unless --force)", Required: true},
			&cli.StringFlag{Name: "head-precision", Value: "bf16", Usage: "f16 | bf16 | int8 | int4"},
			&cli.StringFlag{Name: "trunk-precision", Value: "bf16", Usage: "combined target: f16 | bf16 | int8 | int4"},
			&cli.IntFlag{Name: "group-size", Value: 64, Usage: "quantization group size: 32 | 64 | 128"},
			&cli.StringFlag{Name: "mlx-rounding", Value: "gpu", Usage: "gpu (what mlx_lm.convert gives on Apple silicon) | cpu (MLX's CPU kernel)"},
			&cli.IntFlag{Name: "router-bits", Value: 8, Usage: "bits of the MoE router and shared_expert_gate when quantized, at group size 64, as mlx-lm does (0: same as their component)"},
			&cli.IntFlag{Name: "jobs", Value: 0, Usage: "tensors converted in parallel (default: all cores); never changes the bytes"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing output folder"},
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable summary"},
			&cli.BoolFlag{Name: "quiet", Usage: "print nothing but errors"},
		},
		Action: runExport,
	}
}

type exportSummary struct {
	Target    string                `json:"target"`
	Out       string                `json:"out"`
	Files     []string              `json:"files"`
	BytesRead int64                 `json:"bytes_read"`
	BytesOut  int64                 `json:"bytes_written"`
	Seconds   float64               `json:"seconds"`
	Tensors   int                   `json:"tensors"`
	Notes     []string              `json:"notes"`
	Stats     []convert.TensorStats `json:"tensor_stats"`
}

func runExport(c *cli.Context) error {
	if c.NArg() != 0 {
		return usagef("export takes no positional arguments, got %v", c.Args().Slice())
	}
	start := time.Now()
	target := c.String("target")
	o := convert.MLXOptions{GroupSize: c.Int("group-size"), Rounding: c.String("mlx-rounding"), RouterBits: c.Int("router-bits")}
	var err error
	if o.Head, err = convert.ParsePrecision(c.String("head-precision")); err != nil {
		return usagef("--head-precision: %v", err)
	}
	if o.Trunk, err = convert.ParsePrecision(c.String("trunk-precision")); err != nil {
		return usagef("--trunk-precision: %v", err)
	}
	switch o.GroupSize {
	case 32, 64, 128:
	default:
		return usagef("--group-size %d: must be 32, 64 or 128", o.GroupSize)
	}
	if o.Rounding != "gpu" && o.Rounding != "cpu" {
		return usagef("--mlx-rounding %q: must be gpu or cpu", o.Rounding)
	}
	if o.RouterBits != 0 && o.RouterBits != 8 {
		return usagef("--router-bits %d: must be 8 or 0", o.RouterBits)
	}
	out := c.String("out")
	if _, err := os.Stat(out); err == nil && !c.Bool("force") {
		return fmt.Errorf("%s already exists; pass --force to replace it", out)
	}

	m, err := convert.Load(st.DirSource(c.String("src")))
	if err != nil {
		return err
	}
	defer m.Checkpoint.Close()
	var plan *convert.Plan
	switch target {
	case convert.TargetMLX:
		plan, err = convert.PlanMLX(m, o)
	case convert.TargetCombined:
		plan, err = convert.PlanCombined(m, o)
	case "openvino":
		return usagef("--target openvino is not available in this version yet; use mlx or combined")
	default:
		return usagef("--target %q: must be mlx, combined or openvino", target)
	}
	if err != nil {
		return err
	}

	res, err := writeAtomically(c, out, func(dir string) (*convert.Result, error) {
		jobs := c.Int("jobs")
		if jobs <= 0 {
			jobs = runtime.GOMAXPROCS(0)
		}
		return convert.Run(c.Context, plan, m.Checkpoint, dir, convert.RunOptions{
			Jobs: jobs,
			OnFile: func(name string, size int64) {
				if !c.Bool("quiet") && !c.Bool("json") {
					fmt.Fprintf(c.App.ErrWriter, "wrote %s (%d bytes)\n", name, size)
				}
			},
		})
	})
	if err != nil {
		return err
	}
	sum := exportSummary{Target: target, Out: out, Files: res.FilesOut, BytesRead: res.BytesRead, BytesOut: res.BytesOut,
		Seconds: time.Since(start).Seconds(), Tensors: len(plan.Tensors), Notes: plan.Notes, Stats: res.Tensors}
	for _, s := range res.Tensors {
		if s.F16Overflows > 0 {
			sum.Notes = append(sum.Notes, fmt.Sprintf("%s: %d values above the f16 range became infinite", s.Name, s.F16Overflows))
		}
	}
	if sum.Notes == nil {
		sum.Notes = []string{}
	}
	switch {
	case c.Bool("json"):
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	case !c.Bool("quiet"):
		for _, n := range sum.Notes {
			fmt.Fprintln(c.App.ErrWriter, "note:", n)
		}
		fmt.Fprintf(c.App.Writer, "exported %s: %d tensors, %d files, %d bytes in %.1fs (%d source bytes read)\n",
			out, sum.Tensors, len(sum.Files), sum.BytesOut, sum.Seconds, sum.BytesRead)
	}
	return nil
}

// writeAtomically runs write into a temporary sibling of out and renames it
// into place only when everything succeeded, so an interrupted or failed run
// never leaves a folder that looks complete.
func writeAtomically(c *cli.Context, out string, write func(dir string) (*convert.Result, error)) (*convert.Result, error) {
	parent := filepath.Dir(filepath.Clean(out))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".partial-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	res, err := write(tmp)
	if err != nil {
		if errors.Is(err, c.Context.Err()) && c.Context.Err() != nil {
			return nil, fmt.Errorf("interrupted; nothing was written to %s", out)
		}
		return nil, err
	}
	if _, err := os.Stat(out); err == nil {
		old := tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			return nil, err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	ok = true
	return res, nil
}
