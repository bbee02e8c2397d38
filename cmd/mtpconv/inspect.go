package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/mtpconv/mtpconv/convert"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a checkpoint: family, dims, MTP head, expert layout, tensor groups and problems",
		ArgsUsage: "SRC",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print a machine-readable report"},
			&cli.BoolFlag{Name: "hash", Usage: "read every tensor and include the sha256 of its bytes"},
			&cli.BoolFlag{Name: "strict", Usage: "exit non-zero when the MTP head is incomplete"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one SRC folder, got %d arguments", c.NArg())
			}
			m, err := convert.Load(st.DirSource(c.Args().First()))
			if err != nil {
				return err
			}
			defer m.Checkpoint.Close()
			r, err := m.Inspect(c.Bool("hash"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				r.WriteText(c.App.Writer)
			}
			if c.Bool("strict") {
				return m.HeadError()
			}
			return nil
		},
	}
}
