package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/bench"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/manifests/words"
	"github.com/urfave/cli/v2"
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
			&cli.BoolFlag{Name: "save", Usage: "also record the report in OUT/" + manifests.ReportFile + " and refresh the verification section of the card (OUT/" + manifests.CardFile + ")"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("verify takes one OUT folder, got %d arguments", c.NArg())
			}
			dir := c.Args().First()
			if c.Bool("save") {
				// Before the work: the report is for the card, which an --into folder does not get.
				if m, err := manifests.Load(dir); err == nil && m.Into != nil {
					return fmt.Errorf("%s: %w; run verify without --save", dir, errIntoFolder(manifests.ReportFile+" (read only by the card)"))
				}
			}
			delay := newTestDelay(c.App.ErrWriter)
			var src *st.Checkpoint
			if s := c.String("src"); s != "" {
				source, remote, err := openSource(c, "--src", s)
				if err != nil {
					return err
				}
				defer remote.Close()
				ck, err := st.Open(delay.source(source))
				if err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
				defer ck.Close()
				src = ck
			}
			delay.arm()
			r, err := manifests.Verify(c.Context, dir, src)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			if c.Bool("save") {
				if err := saveReport(c, dir, r); err != nil {
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
				writeHealth(c.App.Writer, r.Health)
				status := "OK"
				if !r.OK {
					status = "FAILED (" + words.Count(len(r.Problems), "problem") + ")"
				}
				fmt.Fprintf(c.App.Writer, "%s: %s listed in the manifest, %s (%s) checked, %d recomputed from the source: %s\n", dir, words.Count(r.Files, "file"),
					words.Count(r.Tensors, "tensor"), words.Count(r.Entries, "stored entry", "stored entries"), r.Recomputed, status)
			}
			if !r.OK {
				return errVerifyFailed
			}
			return nil
		},
	}
}

// saveReport records the report in OUT for the card, unless the manifest
// names files outside OUT or files that are not regular: such a report is
// not published, and an earlier one is removed so the card cannot show it.
func saveReport(c *cli.Context, dir string, r *manifests.Report) error {
	path := filepath.Join(dir, manifests.ReportFile)
	if r.Unsafe() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "mtpconv: not saving %s: the manifest names files outside %s or files that are not regular\n", manifests.ReportFile, dir)
		return refreshCard(c, dir, nil) // no earlier result stays on the card either
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileReplacing(path, append(b, '\n')); err != nil {
		return err
	}
	return refreshCard(c, dir, r)
}

// refreshCard brings the verification section of OUT/README.md up to date
// with the report just saved, keeping the rest of the card as it is (edits
// included). An output exported with --no-card gets no card; a README.md
// without mtpconv's verification section is left alone, with a warning.
func refreshCard(c *cli.Context, dir string, r *manifests.Report) error {
	path := filepath.Join(dir, manifests.CardFile)
	card, err := manifests.ReadRegularFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	out, ok := manifests.RefreshVerification(card, r)
	if !ok {
		fmt.Fprintf(c.App.ErrWriter, "mtpconv: warning: %s has no \"## Verification\" section of mtpconv's; left as it is (mtpconv card %s writes the whole card)\n", path, dir)
		return nil
	}
	if bytes.Equal(out, card) {
		return nil
	}
	return writeFileReplacing(path, out)
}

// writeFileReplacing writes a file through a temporary sibling renamed over
// it, so a symbolic link at path is replaced, never written through.
func writeFileReplacing(path string, data []byte) error {
	return manifests.WriteReplacing(path, data)
}

// errIntoFolder says why mtpconv writes nothing but its own files into a
// folder it added its head into.
func errIntoFolder(file string) error {
	return fmt.Errorf("mtpconv added its head into this folder (export --into) and owns only the files its %s records; it writes no %s there, the folder's own files belong to the export it was added to", manifests.FileName, file)
}

func cardCommand() *cli.Command {
	return &cli.Command{
		Name:      "card",
		Usage:     "write OUT/README.md, the model card, from the manifest (and a saved verify report); not for a folder the head was added into (--into): its README.md is the export's own",
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
			if m.Into != nil {
				return fmt.Errorf("%s: %w; no card written: the head is described by %s (check it with mtpconv verify)", dir, errIntoFolder(manifests.CardFile), manifests.FileName)
			}
			var report *manifests.Report
			b, err := manifests.ReadRegularFile(filepath.Join(dir, manifests.ReportFile))
			switch {
			case err == nil:
				report = &manifests.Report{}
				if err := json.Unmarshal(b, report); err != nil {
					return fmt.Errorf("%s: %w", manifests.ReportFile, err)
				}
			case !errors.Is(err, fs.ErrNotExist):
				return err
			}
			path := filepath.Join(dir, manifests.CardFile)
			old, _ := manifests.ReadRegularFile(path) // its bench section, if any, is carried over
			card := bench.CarryCardSection(m, old, manifests.Card(m, targets.CardOf(m), report))
			if err := writeFileReplacing(path, card); err != nil {
				return err
			}
			from := "the manifest"
			if report != nil {
				from += " and the saved verify report (" + manifests.ReportFile + ")"
			}
			fmt.Fprintf(c.App.Writer, "wrote %s (%d bytes) from %s\n", path, len(card), from)
			return nil
		},
	}
}

// writeHealth prints the quantization error against the source of the
// concat projection's halves and of the head tensor that lost most.
func writeHealth(w io.Writer, hs []manifests.TensorHealth) {
	var worst *manifests.TensorHealth
	for i, h := range hs {
		if len(h.Parts) > 0 {
			var words []string
			for _, p := range h.Parts {
				words = append(words, fmt.Sprintf("%s half %.3f", p.Name, p.RelRMS))
			}
			fmt.Fprintf(w, "head %s: quantization error (relative RMS) %s\n", h.Name, strings.Join(words, ", "))
		}
		if h.Component == "head" && (worst == nil || h.RelRMS > worst.RelRMS) {
			worst = &hs[i]
		}
	}
	if worst != nil {
		fmt.Fprintf(w, "head: largest quantization error %.3f (relative RMS), %s\n", worst.RelRMS, worst.Name)
	}
}
