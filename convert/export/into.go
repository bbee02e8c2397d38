package export

// --into: the head added to a folder another tool exported (an optimum-intel
// OpenVINO export, an MLX folder), touching only the files the target places
// there, the mtpconv manifest and, for the folder's files a target must
// update to declare the head (MLX's config.json and index), the copies of
// their originals under manifests.IntoOriginals.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/manifests"
)

// The hidden names --into reserves in the destination: the staging folder
// the files are written in before they are renamed into place (so every
// rename stays on one file system), and the lock held from before anything
// is touched until the last rename.
const (
	intoStaging = ".mtpconv-into"
	// intoInterim, inside the staging folder, holds the interim versions of
	// updated files (plan.IntoUpdate.Interim).
	intoInterim = "interim"
	intoLock    = ".mtpconv-into.lock"
)

// addition is the destination --into: the target's files added to a folder
// another export made, staged in a reserved folder inside it (so every
// rename stays on one file system) and moved in by intoSteps. Only the files
// the manifest records as ours are ever replaced; nothing else of the
// folder is touched, and nothing is written through a link (linkRule).
type addition struct {
	dir           string
	force, noCard bool
	dryRun        bool
	intoer        targets.Intoer
	source        string // the local source folder, never added into
	model         *model.Model
	files         []string // the target's files, in the Intoer's order (a file after those it refers to)

	lock    *outputLock
	staging string   // ours once claimed: release removes it
	present []string // of files, those an earlier --into wrote, as claimed
	// superseded are the present files as they are (each as mtpconv wrote it).
	superseded []manifests.File
	copies     []string // staged copies of originals (record)
	updates    []string // the folder's files replaced by their staged new version (the plan's IntoUpdates)
	early      []string // of updates, those replaced before the output's files (their interim is their new version)
	interim    []string // of updates, those given a staged interim version first
	done       bool
}

func newAddition(r Request, t targets.Target) (*addition, error) {
	// The command line first: a usage error changes nothing.
	if r.Resume {
		return nil, targets.UsageError{Err: errors.New("--resume does not apply to --into")}
	}
	in, ok := t.(targets.Intoer)
	if !ok {
		err := fmt.Errorf("--target %s does not take --into", t.Name())
		if e, ok := t.(targets.IntoElsewhere); ok {
			err = fmt.Errorf("%w: %s", err, e.Instead())
		}
		return nil, targets.UsageError{Err: err}
	}
	d := &addition{dir: r.Dest.Dir, force: r.Force, noCard: r.NoCard, dryRun: r.DryRun, intoer: in, model: r.Model}
	if dir, ok := r.Model.Checkpoint.Source.(source.Dir); ok {
		d.source = string(dir)
	}
	return d, nil
}

func (d *addition) String() string { return "--into " + d.dir }

// check refuses a folder that is not one the target adds into, or whose
// files of the target's names mtpconv did not write.
func (d *addition) check() error {
	if err := CheckIntoFolder(d.dir); err != nil {
		return err
	}
	if d.source != "" {
		a, aerr := resolveExisting(d.dir)
		b, berr := resolveExisting(d.source)
		if aerr == nil && berr == nil && pathRelation(a, b) == relSame {
			return fmt.Errorf("--into %s is the source folder; a source is never written (--into takes another export of it)", d.dir)
		}
	}
	files, err := d.intoer.CheckInto(d.dir, d.model)
	if err != nil {
		return err
	}
	d.files = files
	if err := d.checkStaging(); err != nil {
		return err
	}
	if !d.dryRun {
		return nil // the files of the folder are checked under the lock (claim), which may be another run's
	}
	_, _, err = intoReplaces(context.Background(), d.dir, files, d.force)
	return err
}

// plan plans only the target's files for the folder: an IntoPlanner plans
// for the folder itself, any other target's plan is narrowed to its files.
func (d *addition) plan(t targets.Target, m *model.Model, o targets.Options) (*plan.Plan, error) {
	if ip, ok := t.(targets.IntoPlanner); ok {
		p, err := ip.PlanInto(d.dir, m, o)
		if err != nil {
			return nil, err
		}
		return p, d.checkLinks(p)
	}
	p, err := t.Plan(m, o)
	if err == nil {
		keepOnly(p, d.files)
	}
	return p, err
}

// checkLinks refuses a folder whose files the output builds on or
// replaces lead, through a symbolic link, where verify would not follow
// (manifests.LinkedFile: inside the folder, or in the blob store of the
// Hugging Face cache snapshot it is). They are read through their links;
// a replaced one has its link replaced by mtpconv's file, its blob kept.
func (d *addition) checkLinks(p *plan.Plan) error {
	root, err := filepath.EvalSymlinks(d.dir)
	if err != nil {
		return fmt.Errorf("--into %s: %w", d.dir, err)
	}
	names := slices.Clone(p.IntoKept)
	for _, u := range p.IntoUpdates {
		names = append(names, u.Name)
	}
	for _, n := range names {
		if _, err := manifests.LinkedFile(root, n); err != nil {
			return fmt.Errorf("--into %s: %s: %w; mtpconv reads a folder's files through links only into the folder or its Hugging Face cache blobs (verify could not check it); copy the file into the folder", d.dir, n, err)
		}
	}
	return nil
}

func (d *addition) reserved() map[string]string {
	return map[string]string{
		manifests.FileName:      "the manifest",
		intoStaging:             "the staging folder of --into",
		intoLock:                "the lock of --into",
		manifests.IntoOriginals: "the folder of the originals mtpconv keeps",
		planMarker:              "the marker of the staging folder",
	}
}

// card: none; README.md belongs to the export the head is added to.
func (d *addition) card() bool { return false }

// checkStaging refuses a staging folder mtpconv did not make: a file or
// link of that name, or a folder without the marker every staging folder
// holds from its creation. One mtpconv made is removed when claimed (the
// lock says no run is using it).
func (d *addition) checkStaging() error {
	path := filepath.Join(d.dir, intoStaging)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--into %s: %w", d.dir, err)
	}
	if fi.IsDir() {
		if m, err := os.Lstat(filepath.Join(path, planMarker)); err == nil && m.Mode().IsRegular() {
			return nil
		}
	}
	return fmt.Errorf("--into %s: %s exists and mtpconv did not make it (mtpconv stages its files in a folder of that name, marked by %s); move it out of the folder to add the head", d.dir, intoStaging, planMarker)
}

func (d *addition) claim(ctx context.Context, p *plan.Plan, planHash string) (string, error) {
	lock, err := lockOutput(filepath.Join(d.dir, intoLock))
	if errors.Is(err, errLocked) {
		return "", fmt.Errorf("another export is adding into %s (%s is locked); wait for it to finish or stop it", d.dir, intoLock)
	}
	if err != nil {
		return "", err
	}
	d.lock = lock
	// Checked again under the lock: another run may have changed the folder.
	if d.present, d.superseded, err = intoReplaces(ctx, d.dir, d.files, d.force); err != nil {
		return "", err
	}
	if err := d.checkStaging(); err != nil {
		return "", err
	}
	staging := filepath.Join(d.dir, intoStaging)
	if err := os.RemoveAll(staging); err != nil {
		return "", err
	}
	if err := os.Mkdir(staging, 0o755); err != nil {
		return "", fmt.Errorf("--into %s: %w", d.dir, err)
	}
	d.staging = staging
	if err := os.WriteFile(filepath.Join(staging, planMarker), []byte(planHash), 0o644); err != nil {
		return "", err
	}
	return staging, nil
}

// reuse: nothing (--resume does not apply to --into).
func (d *addition) reuse(string) (run.FileRecord, bool) { return run.FileRecord{}, false }
func (d *addition) finished(run.FileRecord)             {}

// record completes the manifest with the Into record (see recordInto).
func (d *addition) record(ctx context.Context, man *manifests.Manifest, p *plan.Plan) error {
	copies, err := recordInto(ctx, d.dir, d.staging, man, p)
	if err != nil {
		return err
	}
	// The earlier version of a file this run writes anew (a run stopped
	// before its rename leaves it); one of the same bytes needs no record.
	for _, f := range d.superseded {
		if now, _ := manifests.FindFile(man.Files, f.Name); now.SHA256 != f.SHA256 {
			man.Into.Superseded = append(man.Into.Superseded, f)
		}
	}
	d.copies = copies
	for _, u := range p.IntoUpdates {
		d.updates = append(d.updates, u.Name)
		if u.Interim == nil {
			continue
		}
		final := manifests.SHA256(plannedContents(p, u.Name))
		switch sum := manifests.SHA256(u.Interim); sum {
		case final:
			d.early = append(d.early, u.Name)
		default:
			path := filepath.Join(d.staging, intoInterim, u.Name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, u.Interim, 0o644); err != nil {
				return err
			}
			d.interim = append(d.interim, u.Name)
			for i := range man.Into.Updated {
				if man.Into.Updated[i].Name == u.Name {
					man.Into.Updated[i].Interim = sum
				}
			}
		}
	}
	return nil
}

// plannedContents is the contents the plan gives a file of its own.
func plannedContents(p *plan.Plan, name string) []byte {
	for _, f := range p.Files {
		if f.Name == name {
			return f.Contents
		}
	}
	return nil
}

// commit moves the staged files into the folder (intoSteps), unless the
// target's files changed since the claim or a signal came before the
// first step; after it, the steps run to the end.
func (d *addition) commit(ctx context.Context) error {
	if now, err := findPresent(d.dir, d.files); err != nil {
		return err
	} else if !slices.Equal(now, d.present) {
		return fmt.Errorf("--into %s: %s changed during the export; nothing was replaced", d.dir, strings.Join(d.files, " or "))
	}
	changes := intoChanges{files: d.files, ours: d.present, copies: d.copies, updates: d.updates, early: d.early, interim: d.interim}
	if _, ok := d.intoer.(targets.InPlaceIntoer); ok {
		changes.ours = nil // replaced by the renames, not removed first
	}
	steps := intoSteps(d.dir, d.staging, changes)
	if err := ctx.Err(); err != nil {
		return interrupted(ctx, d, err)
	}
	for i, s := range steps {
		var err error
		if stepFault != nil {
			err = stepFault(i)
		}
		if err == nil {
			err = s.apply()
		}
		if err != nil {
			return fmt.Errorf("--into %s: %w (run it again with --force to complete it)", d.dir, err)
		}
	}
	d.done = true
	for _, dir := range []string{filepath.Join(d.dir, manifests.IntoOriginals), d.dir} {
		if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (d *addition) release() {
	if d.staging != "" {
		os.RemoveAll(d.staging)
	}
	d.lock.release()
}

func (d *addition) outcome() ([]string, []string) {
	if !d.done || d.noCard {
		return nil, nil
	}
	return nil, []string{fmt.Sprintf("no model card written: %s belongs to the export the head was added to; %s records the head (check it with mtpconv verify)", manifests.CardFile, manifests.FileName)}
}

// stepFault, set by tests only, fails the final phase of --into before
// step i (a kill or a failing rename there).
var stepFault func(i int) error

// CheckIntoFolder refuses an --into that is not an existing folder; it
// reads nothing else, so callers check it before reading a remote source.
func CheckIntoFolder(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--into %s: no such folder (--into adds to an existing export; --out makes a new folder)", dir)
	}
	if err != nil {
		return fmt.Errorf("--into %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--into %s is not a folder", dir)
	}
	return nil
}

// findPresent lists the target's files already in dir, in the target's
// order, refusing any that mtpconv did not write: an optimum-intel export
// carries an MTP IR of its own, and a file the user made is never replaced,
// moved or deleted, --force or not.
func findPresent(dir string, files []string) ([]string, error) {
	prior, err := manifests.LoadInto(dir)
	if err != nil {
		return nil, err
	}
	var present, theirs []string
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			continue
		}
		if prior.IntoRecord() != nil && slices.Contains(prior.Into.OwnedFiles, f) {
			present = append(present, f)
		} else {
			theirs = append(theirs, f)
		}
	}
	if len(theirs) > 0 {
		return nil, fmt.Errorf("%s already has %s, which mtpconv did not write (%s came with the export); mtpconv never replaces, moves or deletes a file it did not write, --force or not: move %s out of the folder yourself to add mtpconv's head, or write it to a folder of its own with --out",
			dir, strings.Join(theirs, " and "), plural(len(theirs), "it", "they"), plural(len(theirs), "it", "them"))
	}
	return present, nil
}

// intoReplaces returns the files of the output an earlier --into wrote in
// dir, each as it is now, refusing them unless force. --force replaces
// exactly these files, never another file of the folder: neither one
// mtpconv did not write (see findPresent), nor a manifest mtpconv did not
// write, nor a file an earlier --into owned that this one would not replace,
// nor one of its files edited since (its bytes are not what the manifest
// records: an edit is refused, not dropped, as for the folder's own files
// mtpconv updated, manifests.IntoBase).
func intoReplaces(ctx context.Context, dir string, files []string, force bool) ([]string, []manifests.File, error) {
	kind, rec := manifests.FolderOwner(dir)
	switch kind {
	case manifests.OwnerForeign:
		return nil, nil, fmt.Errorf("%s has a %s that mtpconv did not write; refusing to replace it", dir, manifests.FileName)
	case manifests.OwnerExport:
		return nil, nil, fmt.Errorf("%s is an mtpconv output of its own (not an export mtpconv added into); refusing to add into it", dir)
	}
	if rec != nil {
		for _, f := range rec.OwnedFiles {
			if f == manifests.FileName || slices.Contains(files, f) || isOriginal(rec, f) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
				return nil, nil, fmt.Errorf("%s holds %s from an earlier --into that this export would not replace; remove it (and %s) yourself to add this one", dir, f, manifests.FileName)
			}
		}
	}
	present, err := findPresent(dir, files)
	if err != nil {
		return nil, nil, err
	}
	if len(present) > 0 && !force {
		return nil, nil, fmt.Errorf("%s already has %s (an earlier mtpconv --into wrote %s); pass --force to replace %s with mtpconv's (nothing else of the folder is touched)",
			dir, strings.Join(present, " and "), plural(len(present), "it", "them"), plural(len(present), "it", "them"))
	}
	sums, err := ownedAsWritten(ctx, dir, present)
	if err != nil {
		return nil, nil, err
	}
	return present, sums, nil
}

// ownedAsWritten hashes the files an earlier --into wrote, refusing one
// whose bytes are neither what the manifest records nor the earlier
// version a stopped run left (Into.Superseded).
func ownedAsWritten(ctx context.Context, dir string, present []string) ([]manifests.File, error) {
	if len(present) == 0 {
		return nil, nil
	}
	prior, err := manifests.LoadInto(dir)
	if err != nil {
		return nil, err
	}
	var out []manifests.File
	for _, f := range present {
		size, sum, err := manifests.HashFileContext(ctx, filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("--into %s: %w", dir, err)
		}
		wrote, _ := manifests.FindFile(prior.Files, f)
		old, _ := manifests.FindFile(prior.Into.Superseded, f)
		if sum != wrote.SHA256 && sum != old.SHA256 {
			// Moving the file away is no undo where the folder's index lists it
			// (an HF or MLX repo's model.safetensors.index.json).
			return nil, fmt.Errorf("--into %s: %s changed since mtpconv wrote it (sha256 %s, recorded %s); mtpconv never replaces an edited file, --force or not: put back the version mtpconv wrote, or undo the earlier --into (move what %s/ holds back over the folder's files, remove the other files %s lists in into.owned_files and the manifest itself) and run it again",
				dir, f, sum, wrote.SHA256, manifests.IntoOriginals, manifests.FileName)
		}
		out = append(out, manifests.File{Name: f, Size: size, SHA256: sum})
	}
	return out, nil
}

// intoStep is one change of the final phase of --into: a rename, or (no
// from) the removal of an old file of ours.
type intoStep struct{ from, to string }

func (s intoStep) apply() error {
	if s.from == "" {
		return os.Remove(s.to)
	}
	return os.Rename(s.from, s.to)
}

// intoChanges is what the final phase of --into changes in the folder.
type intoChanges struct {
	files   []string // the target's files, in the Intoer's order (a file after those it refers to)
	ours    []string // of files, those in the folder an earlier --into wrote: removed
	copies  []string // staged copies of originals (manifests.IntoOriginals/NAME) of the updated files
	updates []string // the folder's files replaced by their staged new version (IntoUpdates)
	early   []string // of updates, those whose new version goes in before the files
	interim []string // of updates, those given their staged interim version before the files
}

// intoSteps orders the final phase so that a kill or failure between any
// two steps leaves no mixed output and loses nothing of the folder: the new
// manifest first (it records the files as ours before any of them moves, so
// an interrupted run can be completed with --force); then the copies of
// originals (the whole manifests.IntoOriginals folder in one rename when the
// destination has none yet); then the updated files whose new (or interim)
// version must be in place before the output's files are (an HF repo's
// config.json, excluding the head from the quantization before the index
// lists it); then the old files of ours removed, referring files first (an
// old .xml never outlives its .bin); then the new files in the Intoer's
// order (a new .xml never precedes its .bin); the other updated files last,
// each replaced by one rename, the interim ones by their new version.
// A reader finds the old output, part of it with every descriptor's data
// its own, or the new one.
func intoSteps(dir, staging string, c intoChanges) []intoStep {
	steps := []intoStep{{filepath.Join(staging, manifests.FileName), filepath.Join(dir, manifests.FileName)}}
	if len(c.copies) > 0 {
		if _, err := os.Lstat(filepath.Join(dir, manifests.IntoOriginals)); err != nil {
			steps = append(steps, intoStep{filepath.Join(staging, manifests.IntoOriginals), filepath.Join(dir, manifests.IntoOriginals)})
		} else {
			for _, f := range c.copies {
				steps = append(steps, intoStep{filepath.Join(staging, f), filepath.Join(dir, f)})
			}
		}
	}
	for _, f := range c.updates {
		switch {
		case slices.Contains(c.early, f):
			steps = append(steps, intoStep{filepath.Join(staging, f), filepath.Join(dir, f)})
		case slices.Contains(c.interim, f):
			steps = append(steps, intoStep{filepath.Join(staging, intoInterim, f), filepath.Join(dir, f)})
		}
	}
	for i := len(c.files) - 1; i >= 0; i-- {
		if f := c.files[i]; slices.Contains(c.ours, f) {
			steps = append(steps, intoStep{to: filepath.Join(dir, f)})
		}
	}
	for _, f := range c.files {
		steps = append(steps, intoStep{filepath.Join(staging, f), filepath.Join(dir, f)})
	}
	for _, f := range c.updates {
		if !slices.Contains(c.early, f) {
			steps = append(steps, intoStep{filepath.Join(staging, f), filepath.Join(dir, f)})
		}
	}
	return steps
}

// recordInto completes the manifest with the Into record. Each of
// the folder's files the export updates (the plan's IntoUpdates, checked
// unchanged since they were planned) has its original kept under
// manifests.IntoOriginals and recorded, by a copy staged now (the file stays in place
// until its new version replaces it), or the original an earlier run kept.
// The files the output builds on are hashed. It returns the staged copies.
func recordInto(ctx context.Context, dir, staging string, man *manifests.Manifest, p *plan.Plan) ([]string, error) {
	prior, err := manifests.LoadInto(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(filepath.Join(dir, manifests.IntoOriginals)); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("--into %s: %s is not a folder and mtpconv did not make it; refusing to replace it", dir, manifests.IntoOriginals)
	}
	in := &manifests.Into{}
	var staged []string
	for _, x := range p.IntoUpdates {
		size, sum, err := manifests.HashFileContext(ctx, filepath.Join(dir, x.Name))
		if err != nil {
			return nil, fmt.Errorf("--into %s: %w", dir, err)
		}
		if sum != x.SHA256 {
			return nil, fmt.Errorf("--into %s: %s changed during the export; nothing was replaced", dir, x.Name)
		}
		rec, ok := prior.IntoRecord().UpdatedFile(x.Name)
		if ok && sum == rec.Original.SHA256 {
			// An interrupted run recorded the original and may have stopped
			// before its copy landed: a copy already there must be it.
			if osize, osum, err := manifests.HashFileContext(ctx, filepath.Join(dir, rec.Original.Name)); err == nil {
				if osize != size || osum != sum {
					return nil, fmt.Errorf("--into %s: %s is not the original %s mtpconv kept (its sha256 differs from the record)", dir, rec.Original.Name, x.Name)
				}
			} else {
				ok = false
			}
		}
		if !ok {
			rec = manifests.Updated{Name: x.Name, Original: manifests.File{Name: manifests.IntoOriginals + "/" + x.Name, Size: size, SHA256: sum}}
			if _, err := os.Lstat(filepath.Join(dir, rec.Original.Name)); err == nil && !isOriginal(prior.IntoRecord(), rec.Original.Name) {
				return nil, fmt.Errorf("--into %s: %s exists and mtpconv did not write it; refusing to replace it", dir, rec.Original.Name)
			}
			if err := copyRegular(filepath.Join(dir, x.Name), filepath.Join(staging, rec.Original.Name), sum); err != nil {
				return nil, fmt.Errorf("--into %s: keeping the original %s: %w", dir, x.Name, err)
			}
			staged = append(staged, rec.Original.Name)
		}
		in.Updated = append(in.Updated, rec)
		man.Files = append(man.Files, rec.Original)
	}
	// An original an earlier run kept of a file this one does not take from
	// the folder (it holds mtpconv's version, or the original again) stays
	// kept and recorded.
	if pi := prior.IntoRecord(); pi != nil {
		for _, u := range pi.Updated {
			if _, planned := in.UpdatedFile(u.Name); !planned {
				if _, err := os.Lstat(filepath.Join(dir, u.Original.Name)); err == nil {
					in.Updated = append(in.Updated, u)
					man.Files = append(man.Files, u.Original)
				}
			}
		}
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
	return staged, nil
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

// isOriginal reports whether an owned file is the copy of an original an
// earlier --into kept: a later one keeps it (never replaces it).
func isOriginal(rec *manifests.Into, name string) bool {
	if rec != nil {
		for _, u := range rec.Updated {
			if u.Original.Name == name {
				return true
			}
		}
	}
	return false
}

// keepOnly narrows a plan to the tensor files kept by --into.
func keepOnly(p *plan.Plan, keep []string) {
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
	var ts []plan.OutTensor
	for _, t := range p.Tensors {
		if k[t.File] {
			ts = append(ts, t)
		}
	}
	var other []plan.OutFile
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
