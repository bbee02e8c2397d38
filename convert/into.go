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
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// Intoer is a Target that can add its output to an existing folder of the
// same model: CheckInto refuses a folder that is not one (saying what
// differs) and names the files of the output that go into it; the tensor
// files among them are the only ones planned.
type Intoer interface {
	CheckInto(dir string, m *Model) ([]string, error)
}

// IntoPlanner is an Intoer whose output depends on the folder it goes into
// (MLX: the head in a file of its own, the folder's config.json and index
// updated to declare it). PlanInto plans the export for dir, reading the
// folder's files it updates with IntoBase; exportInto replaces them (listed
// in Plan.IntoUpdates) each atomically, after keeping a copy of the bytes
// the folder had under IntoOriginals, and records all of it in the manifest.
type IntoPlanner interface {
	Intoer
	PlanInto(dir string, m *Model, o Options) (*Plan, error)
}

// IntoOriginals is the folder, inside an --into folder, that keeps the prior
// bytes of the folder's own files mtpconv replaced (copy them back to undo).
const IntoOriginals = "mtpconv-original"

// IntoBase reads what an update of the folder's file name starts from: the
// bytes the folder had before mtpconv first replaced that file, that is the
// copy an earlier --into kept (the file must then still be as mtpconv wrote
// it: an edit made since is not silently dropped), or else the file itself.
// Files are read only when regular and at most limit bytes. sum is the
// sha256 of the file as it is now.
func IntoBase(dir, name string, limit int64) (base []byte, sum string, err error) {
	cur, err := st.ReadSmallFile(source.Dir(dir), name, limit)
	if err != nil {
		return nil, "", fmt.Errorf("--into %s: %w", dir, err)
	}
	sum = manifests.SHA256(cur)
	prior, err := intoManifest(dir)
	if err != nil {
		return nil, "", err
	}
	u, ok := priorInto(prior).UpdatedFile(name)
	if !ok {
		return cur, sum, nil
	}
	if wrote, _ := findFile(prior.Files, name); wrote.SHA256 != sum {
		return nil, "", fmt.Errorf("--into %s: %s changed since mtpconv updated it (sha256 %s, recorded %s); put back the version mtpconv wrote or the original in %s/ first", dir, name, sum, wrote.SHA256, IntoOriginals)
	}
	orig, err := st.ReadSmallFile(source.Dir(dir), u.Original.Name, limit)
	if err != nil {
		return nil, "", fmt.Errorf("--into %s: the copy of the original %s: %w", dir, name, err)
	}
	if manifests.SHA256(orig) != u.Original.SHA256 {
		return nil, "", fmt.Errorf("--into %s: %s is not the original %s mtpconv kept (its sha256 differs from the record)", dir, u.Original.Name, name)
	}
	return orig, sum, nil
}

// IntoOwned reports whether an earlier --into recorded file name of dir as
// written by mtpconv.
func IntoOwned(dir, name string) (bool, error) {
	prior, err := intoManifest(dir)
	if err != nil || priorInto(prior) == nil {
		return false, err
	}
	return slices.Contains(prior.Into.OwnedFiles, name), nil
}

// intoManifest is the manifest of an earlier export into dir, nil when there
// is none (or it is not mtpconv's, which exportInto refuses).
func intoManifest(dir string) (*manifests.Manifest, error) {
	if _, err := os.Lstat(filepath.Join(dir, manifests.FileName)); err != nil || !isMTPConvOutput(dir) {
		return nil, nil
	}
	m, err := manifests.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %w", dir, err)
	}
	return m, nil
}

// priorInto is the Into record of an earlier export's manifest, if any.
func priorInto(m *manifests.Manifest) *manifests.Into {
	if m == nil {
		return nil
	}
	return m.Into
}

func findFile(files []manifests.File, name string) (manifests.File, bool) {
	for _, f := range files {
		if f.Name == name {
			return f, true
		}
	}
	return manifests.File{}, false
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
	_, planner := in.(IntoPlanner)
	if planner {
		sub.intoDir = r.Into
	}
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
	if planner {
		// The copies of the originals first, the folder's own files last
		// (in plan order), each replaced by one rename.
		kept, err := recordInto(ctx, r.Into, staging, oc.Plan)
		if err != nil {
			return nil, err
		}
		if len(kept) > 0 {
			if err := os.MkdirAll(filepath.Join(r.Into, IntoOriginals), 0o755); err != nil {
				return nil, fmt.Errorf("--into %s: %w", r.Into, err)
			}
		}
		order = append(kept, order...)
		for _, u := range oc.Plan.IntoUpdates {
			order = append(order, u.Name)
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

// recordInto completes the staged manifest of an IntoPlanner's export with
// the Into record: each updated file checked unchanged since it was planned
// and its original kept (the copy an earlier --into made, or one staged now
// under IntoOriginals), and the folder's files the output builds on hashed.
// It returns the staged copies to rename into place.
func recordInto(ctx context.Context, dir, staging string, p *Plan) ([]string, error) {
	prior, err := intoManifest(dir)
	if err != nil {
		return nil, err
	}
	man, err := manifests.Load(staging)
	if err != nil {
		return nil, err
	}
	in := &manifests.Into{}
	var staged []string
	for _, u := range p.IntoUpdates {
		size, sum, err := manifests.HashFile(filepath.Join(dir, u.Name))
		if err != nil {
			return nil, fmt.Errorf("--into %s: %w", dir, err)
		}
		if sum != u.SHA256 {
			return nil, fmt.Errorf("--into %s: %s changed during the export; nothing was replaced", dir, u.Name)
		}
		rec, ok := priorInto(prior).UpdatedFile(u.Name)
		if !ok {
			rec = manifests.Updated{Name: u.Name, Original: manifests.File{Name: IntoOriginals + "/" + u.Name, Size: size, SHA256: sum}}
			if _, err := os.Lstat(filepath.Join(dir, rec.Original.Name)); err == nil {
				return nil, fmt.Errorf("--into %s: %s exists and mtpconv did not write it; refusing to replace it", dir, rec.Original.Name)
			}
			if err := copyRegular(filepath.Join(dir, u.Name), filepath.Join(staging, rec.Original.Name), sum); err != nil {
				return nil, fmt.Errorf("--into %s: keeping the original %s: %w", dir, u.Name, err)
			}
			staged = append(staged, rec.Original.Name)
		}
		in.Updated = append(in.Updated, rec)
		man.Files = append(man.Files, rec.Original)
	}
	for _, f := range man.Files {
		if _, updated := in.UpdatedFile(f.Name); !updated {
			in.OwnedFiles = append(in.OwnedFiles, f.Name)
		}
	}
	in.OwnedFiles = append(in.OwnedFiles, manifests.FileName)
	for _, name := range p.IntoKept {
		size, sum, err := manifests.HashFileContext(ctx, filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("--into %s: %w", dir, err)
		}
		in.Kept = append(in.Kept, manifests.File{Name: name, Size: size, SHA256: sum})
	}
	man.Into = in
	return staged, man.Write(staging)
}

// copyRegular copies a regular file whose bytes must hash to sum.
func copyRegular(from, to, sum string) error {
	b, err := manifests.ReadRegularFile(from)
	if err != nil {
		return err
	}
	if manifests.SHA256(b) != sum {
		return fmt.Errorf("%s changed while being read", from)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
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
