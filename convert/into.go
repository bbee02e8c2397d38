package convert

// --into: the head added to a folder another tool exported (an optimum-intel
// OpenVINO export), touching only the files the target places there and the
// mtpconv manifest.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/manifests"
)

// Intoer is a Target that can add its output to an existing folder of the
// same model: CheckInto refuses a folder that is not one (saying what
// differs) and names the files of the output that go into it; the tensor
// files among them are the only ones planned.
type Intoer interface {
	CheckInto(dir string, m *Model) ([]string, error)
}

// intoStaging is the hidden folder inside the destination where the files
// are written before they are renamed into place.
const intoStaging = ".mtpconv-into"

// exportInto runs the export into a staging folder inside r.Into (so every
// rename stays on one file system), then renames the target's files into
// r.Into, each whole or not at all, the .xml-like descriptor last, and the
// manifest after them. Nothing else of r.Into is touched.
func exportInto(ctx context.Context, r Request) (*Outcome, error) {
	if r.Out != "" {
		return nil, UsageError{errors.New("--into and --out are exclusive")}
	}
	if r.Resume {
		return nil, UsageError{errors.New("--resume does not apply to --into")}
	}
	t, err := LookupTarget(r.Target)
	if err != nil {
		return nil, UsageError{err}
	}
	in, ok := t.(Intoer)
	if !ok {
		return nil, UsageError{fmt.Errorf("--target %s does not take --into", t.Name())}
	}
	fi, err := os.Stat(r.Into)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %w", r.Into, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("--into %s is not a folder", r.Into)
	}
	keep, err := in.CheckInto(r.Into, r.Model)
	if err != nil {
		return nil, err
	}
	var present []string
	for _, f := range keep {
		if _, err := os.Lstat(filepath.Join(r.Into, f)); err == nil {
			present = append(present, f)
		}
	}
	if len(present) > 0 && !r.Force {
		return nil, fmt.Errorf("%s already has %s; pass --force to replace %s", r.Into, strings.Join(present, " and "), plural(len(present), "it", "them"))
	}
	if _, err := os.Lstat(filepath.Join(r.Into, manifests.FileName)); err == nil && !isMTPConvOutput(r.Into) {
		return nil, fmt.Errorf("%s has a %s that mtpconv did not write; refusing to replace it", r.Into, manifests.FileName)
	}
	staging := filepath.Join(r.Into, intoStaging)
	sub := r
	sub.Into, sub.Out, sub.Force, sub.NoCard, sub.keep = "", staging, true, true, keep
	if !r.DryRun {
		// A staging folder left by a killed run is ours: its name is reserved.
		if err := os.RemoveAll(staging); err != nil {
			return nil, err
		}
		defer os.RemoveAll(staging)
	}
	oc, err := Export(ctx, sub)
	if err != nil {
		return nil, err
	}
	if r.DryRun {
		return oc, nil
	}
	// Descriptors (.xml, .json) after the data they describe, the manifest last:
	// a reader that finds the .xml finds its .bin complete.
	order := append([]string{}, keep...)
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if filepath.Ext(order[j]) == ".bin" && filepath.Ext(order[i]) != ".bin" {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	for _, f := range append(order, manifests.FileName) {
		if err := os.Rename(filepath.Join(staging, f), filepath.Join(r.Into, f)); err != nil {
			return nil, fmt.Errorf("--into %s: %w", r.Into, err)
		}
	}
	if err := syncDir(r.Into); err != nil {
		return nil, err
	}
	var files []manifests.File
	for _, f := range oc.Files {
		if f.Name != manifests.CardFile {
			files = append(files, f)
		}
	}
	oc.Files = files
	return oc, nil
}

// keepOnly narrows a plan to the tensor files kept by --into.
func keepOnly(p *Plan, keep []string) {
	k := map[string]bool{}
	for _, f := range keep {
		k[f] = true
	}
	var files []string
	for _, f := range p.TensorFiles {
		if k[f] {
			files = append(files, f)
		}
	}
	var ts []OutTensor
	for _, t := range p.Tensors {
		if k[t.File] {
			ts = append(ts, t)
		}
	}
	var other []OutFile
	for _, f := range p.Files {
		if k[f.Name] {
			other = append(other, f)
		}
	}
	// A note about a file ("NAME: ...") that is not written goes too.
	var notes []string
	for _, n := range p.Notes {
		if name, _, ok := strings.Cut(n, ": "); ok && filepath.Ext(name) != "" && !strings.Contains(name, " ") && !k[name] {
			continue
		}
		notes = append(notes, n)
	}
	p.TensorFiles, p.Tensors, p.Files, p.Notes = files, ts, other, notes
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
