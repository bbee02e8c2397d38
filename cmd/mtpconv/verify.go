package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// errVerifyFailed exits 1 after the report has been printed.
var errVerifyFailed = errors.New("verification failed")

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check an output folder against its manifest (and, with --src, against the source)",
		ArgsUsage: "OUT",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "src", Usage: "source checkpoint: recompute every output tensor and check it"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.BoolFlag{Name: "save", Usage: "also record the report in OUT/" + manifests.ReportFile + " (the card shows it)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("verify takes one OUT folder, got %d arguments", c.NArg())
			}
			dir := c.Args().First()
			var src *st.Checkpoint
			if s := c.String("src"); s != "" {
				source, remote, err := openSource(c, s)
				if err != nil {
					return err
				}
				defer remote.Close()
				ck, err := st.Open(source)
				if err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
				defer ck.Close()
				src = ck
			}
			r, err := manifests.Verify(dir, src)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			if c.Bool("save") {
				b, _ := json.MarshalIndent(r, "", "  ")
				if err := os.WriteFile(filepath.Join(dir, manifests.ReportFile), append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			if c.Bool("json") {
				if err := printJSON(c, r); err != nil {
					return err
				}
			} else {
				for _, p := range r.Problems {
					fmt.Fprintf(c.App.Writer, "FAIL %-26s %s\n", p.Kind, p.Message)
				}
				for _, p := range r.Warnings {
					fmt.Fprintf(c.App.Writer, "WARN %-26s %s\n", p.Kind, p.Message)
				}
				status := "OK"
				if !r.OK {
					status = fmt.Sprintf("FAILED (%d problems)", len(r.Problems))
				}
				fmt.Fprintf(c.App.Writer, "%s: %d files, %d tensors checked, %d recomputed from the source: %s\n", dir, r.Files, r.Entries, r.Recomputed, status)
			}
			if !r.OK {
				return errVerifyFailed
			}
			return nil
		},
	}
}

func cardCommand() *cli.Command {
	return &cli.Command{
		Name:      "card",
		Usage:     "write OUT/README.md, the model card, from the manifest (and a saved verify report)",
		ArgsUsage: "OUT",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("card takes one OUT folder, got %d arguments", c.NArg())
			}
			dir := c.Args().First()
			m, err := manifests.Load(dir)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			var report *manifests.Report
			if b, err := os.ReadFile(filepath.Join(dir, manifests.ReportFile)); err == nil {
				report = &manifests.Report{}
				if err := json.Unmarshal(b, report); err != nil {
					return fmt.Errorf("%s: %w", manifests.ReportFile, err)
				}
			}
			return os.WriteFile(filepath.Join(dir, "README.md"), manifests.Card(m, report), 0o644)
		},
	}
}
