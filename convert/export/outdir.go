package export

// --out: the destination that is a new folder (newFolder): where it may go,
// one writer at a time, written aside and renamed into place, and which
// files of an interrupted run may be reused. Nothing here depends on the
// command line.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// WriteFolder writes an output folder that no checkpoint plan describes (a
// sidecar split from a GGUF file) through the same destination as an export:
// fn fills a hidden sibling under the output's lock, renamed into place only
// when fn succeeds. keep is a file the export reads, which the folder must
// not hold; files are the names fn writes besides the manifest.
func WriteFolder(ctx context.Context, out string, force bool, keep string, files []string, fn func(dir string) error) error {
	d := &newFolder{out: out, force: force, keep: keep}
	if err := d.check(); err != nil {
		return err
	}
	if err := checkNames(d, files); err != nil {
		return err
	}
	dir, err := d.claim(ctx, nil, "")
	defer d.release()
	if err != nil {
		return err
	}
	if err := fn(dir); err != nil {
		return interrupted(ctx, d, err)
	}
	return d.commit(ctx)
}

// checkOutKeeps refuses an output folder that is, or holds, a file the
// export reads (a trunk GGUF): replacing the folder would delete it.
func checkOutKeeps(out, file string) error {
	o, err := resolveExisting(out)
	if err != nil {
		return err
	}
	f, err := resolveExisting(file)
	if err != nil {
		return err
	}
	if r := pathRelation(o, f); r == relSame || r == relContains {
		return fmt.Errorf("--out %s holds %s, which the export reads; choose another output folder", out, file)
	}
	return nil
}

// checkOutSource refuses an output folder that is the local source folder
// srcDir, contains it, or lies inside it; and one that is, or contains, the
// real folder of a file of srcDir that is a symlink (a Hugging Face cache
// snapshot links into its blobs), since replacing it would delete the
// bytes the source links to. Paths are compared absolute and cleaned, with
// the symlinks of their existing parts resolved, and existing folders also
// by identity (bind mounts, case-insensitive file systems).
func checkOutSource(out, srcDir string) error {
	o, err := resolveExisting(out)
	if err != nil {
		return err
	}
	s, err := resolveExisting(srcDir)
	if err != nil {
		return err
	}
	switch pathRelation(o, s) {
	case relSame:
		return fmt.Errorf("--out %s is the source folder %s; choose another output folder", out, srcDir)
	case relContains:
		return fmt.Errorf("--out %s contains the source folder %s; replacing it would delete the source", out, srcDir)
	case relInside:
		return fmt.Errorf("--out %s lies inside the source folder %s; choose an output folder outside the source", out, srcDir)
	}
	entries, err := os.ReadDir(s)
	if err != nil {
		return err
	}
	seen := map[string]bool{s: true}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := filepath.EvalSymlinks(filepath.Join(s, e.Name()))
		if err != nil {
			continue // dangling: nothing there to lose
		}
		if fi, err := os.Stat(target); err != nil || fi.IsDir() {
			continue
		}
		dir := filepath.Dir(target)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if r := pathRelation(o, dir); r == relSame || r == relContains {
			return fmt.Errorf("--out %s holds %s, which the source file %s links to; replacing it would delete the source", out, dir, filepath.Join(srcDir, e.Name()))
		}
	}
	return nil
}

// checkOutTarget refuses an existing --out that is not a folder, or, unless
// force, any existing --out; with force it accepts only an earlier mtpconv
// output (a folder holding our manifest), so --force never deletes anything
// else. A folder mtpconv only added its files into (--into) is refused
// with or without force: all but those files belong to another export.
func checkOutTarget(out string, force bool) error {
	if err := checkDotDot("--out", out); err != nil {
		return err
	}
	fi, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("--out %s is an existing file, not a folder; refusing to replace it", out)
	}
	kind, _ := manifests.FolderOwner(out)
	if kind == manifests.OwnerInto {
		return fmt.Errorf("--out %s is a folder mtpconv added its head into (export --into); the rest of it belongs to another export, which --out would delete. To replace the head, run the export with --into %s --force", out, out)
	}
	if !force {
		return fmt.Errorf("%s already exists; pass --force to replace it", out)
	}
	if kind != manifests.OwnerExport {
		return fmt.Errorf("--out %s exists and is not an mtpconv output (it has no %s); --force only replaces an earlier export, remove the folder yourself if you mean it", out, manifests.FileName)
	}
	return nil
}

// checkDotDot refuses a path with a ".." after a part that does not exist:
// the system cannot follow it, so the final rename would fail after all
// the work, though the path's cleaned form looks fine.
func checkDotDot(flag, p string) error {
	parts := strings.Split(filepath.ToSlash(p), "/")
	for i, part := range parts {
		if part != ".." || i == 0 {
			continue
		}
		prefix := filepath.FromSlash(strings.Join(parts[:i], "/"))
		if prefix == "" {
			continue // "/..": the root
		}
		if fi, err := os.Stat(prefix); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s %s: %s is not an existing folder, so the \"..\" after it cannot be followed; give the path without \"..\"", flag, p, prefix)
		}
	}
	return nil
}

type relation int

const (
	relNone     relation = iota
	relSame              // out is src
	relContains          // out is an ancestor of src
	relInside            // out is a descendant of src
)

// pathRelation relates two resolved absolute paths, by name and, for the
// parts that exist, by file identity.
func pathRelation(out, src string) relation {
	same := func(a, b string) bool {
		if a == b {
			return true
		}
		ai, err1 := os.Stat(a)
		bi, err2 := os.Stat(b)
		return err1 == nil && err2 == nil && os.SameFile(ai, bi)
	}
	if same(out, src) {
		return relSame
	}
	for p := filepath.Dir(src); ; p = filepath.Dir(p) {
		if same(out, p) {
			return relContains
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	for p := filepath.Dir(out); ; p = filepath.Dir(p) {
		if same(p, src) {
			return relInside
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return relNone
}

// resolveExisting makes p absolute and clean and resolves the symlinks of
// its longest existing prefix; the rest is joined on unchanged.
func resolveExisting(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		if cur == filepath.Dir(cur) {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// newFolder is the destination --out: a new folder, written into a hidden
// sibling and renamed into place only when complete, so an interrupted run
// (Ctrl-C, kill, full disk) never leaves a folder that looks complete. A
// killed run leaves the sibling behind; --resume reuses its finished files
// whose every input byte is unchanged. One export at a time writes to an
// output: a lock file beside the sibling is held for the whole run.
type newFolder struct {
	out                     string
	force, resume, withCard bool
	dryRun                  bool
	keep                    string          // a file the export reads (a --graft trunk), which the folder must not hold
	srcDir                  string          // the local source folder, which the folder must not be, hold or lie in
	source                  *st.Checkpoint  // re-read to prove a reused file's source bytes unchanged
	planned                 *plan.Plan      // the layouts of reused files (the ranges a file copies from another)
	ctx                     context.Context // the run's, for the re-reads of reuse (run.RunOptions.Reuse takes none)

	lock     *outputLock
	dir      string // the staging sibling
	planHash string
	done     bool // committed
	reused   []string
	notes    []string // files not reused, and why
}

const (
	planMarker = ".mtpconv-plan"
	doneDir    = ".mtpconv-done"
)

func newFolderFor(r Request) *newFolder {
	d := &newFolder{out: r.Dest.Dir, force: r.Force, resume: r.Resume, withCard: !r.NoCard, keep: r.Options.Graft}
	if r.Model != nil {
		d.source = r.Model.Checkpoint
		if dir, ok := r.Model.Checkpoint.Source.(source.Dir); ok {
			d.srcDir = string(dir)
		}
	}
	d.dryRun = r.DryRun
	return d
}

func (d *newFolder) String() string {
	if d.out == "" {
		return "the output folder"
	}
	return d.out
}

func (d *newFolder) check() error {
	if d.dryRun || d.out == "" {
		return nil // a dry run writes nothing, so checks nothing of --out
	}
	// The source folder (an HF cache id resolves to its snapshot) first:
	// refusing --out S for "already exists" would suggest --force.
	if d.srcDir != "" {
		if err := checkOutSource(d.out, d.srcDir); err != nil {
			return err
		}
	}
	if err := checkOutTarget(d.out, d.force); err != nil {
		return err
	}
	if d.keep != "" {
		return checkOutKeeps(d.out, d.keep)
	}
	return nil
}

func (d *newFolder) plan(t targets.Target, m *model.Model, o targets.Options) (*plan.Plan, error) {
	return t.Plan(m, o)
}

func (d *newFolder) reserved() map[string]string {
	r := map[string]string{
		manifests.FileName: "the manifest",
		planMarker:         "the marker of an interrupted run",
		doneDir:            "the records of an interrupted run's files",
	}
	if d.withCard {
		r[manifests.CardFile] = "the model card (--no-card leaves it out)"
	}
	return r
}

func (d *newFolder) card() bool { return d.withCard }

func (d *newFolder) claim(ctx context.Context, p *plan.Plan, planHash string) (string, error) {
	d.ctx, d.planned, d.planHash = ctx, p, planHash
	clean := filepath.Clean(d.out)
	parent := filepath.Dir(clean)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	lockPath := filepath.Join(parent, "."+filepath.Base(clean)+".lock")
	lock, err := lockOutput(lockPath)
	if errors.Is(err, errLocked) {
		return "", fmt.Errorf("another export is writing to %s (%s is locked); wait for it to finish or stop it", d.out, lockPath)
	}
	if err != nil {
		return "", err
	}
	d.lock = lock
	// Checked again under the lock: another run may have finished meanwhile.
	if err := checkOutTarget(d.out, d.force); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, "."+filepath.Base(clean)+".partial")
	prev, _ := manifests.ReadRegularFile(filepath.Join(dir, planMarker))
	if !d.resume || string(prev) != d.planHash {
		if err := os.RemoveAll(dir); err != nil {
			return "", err
		}
	}
	d.dir = dir // from here on ours: release removes it unless committed
	if err := os.MkdirAll(filepath.Join(dir, doneDir), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, planMarker), []byte(d.planHash), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

func (d *newFolder) record(context.Context, *manifests.Manifest, *plan.Plan) error { return nil }

// commit renames the staging folder into place; an earlier output (--force)
// is moved aside first and removed after, or put back if the rename fails.
// A signal stops the export up to the moment the renames begin.
func (d *newFolder) commit(ctx context.Context) error {
	os.Remove(filepath.Join(d.dir, planMarker))
	os.RemoveAll(filepath.Join(d.dir, doneDir))
	old := ""
	if _, err := os.Lstat(d.out); err == nil {
		if err := checkOutTarget(d.out, d.force); err != nil {
			return err
		}
		old = d.dir + ".old"
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return interrupted(ctx, d, err)
	}
	if old != "" {
		if err := os.Rename(d.out, old); err != nil {
			return err
		}
	}
	if err := os.Rename(d.dir, d.out); err != nil {
		if old != "" {
			os.Rename(old, d.out)
		}
		return err
	}
	d.done = true
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}

func (d *newFolder) release() {
	if !d.done && d.dir != "" {
		os.RemoveAll(d.dir)
	}
	d.lock.release()
}

func (d *newFolder) outcome() ([]string, []string) { return d.reused, d.notes }

// finished records a completed tensor file so a later --resume can reuse
// it. The record holds the checksums of the source bytes each of its
// tensors was made from.
func (d *newFolder) finished(rec run.FileRecord) {
	// Written aside and renamed, so a kill never leaves a half-written record.
	if b, err := json.Marshal(rec); err == nil {
		path := filepath.Join(d.dir, doneDir, rec.File.Name+".json")
		if os.WriteFile(path+".tmp", b, 0o644) == nil {
			os.Rename(path+".tmp", path)
		}
	}
}

// reuse hands back a file finished by an interrupted run if its bytes
// still hash to the record and every byte it was made from is unchanged:
// the source bytes of its tensors, and the bytes it copied from another
// file (a grafted trunk), which may change under an unchanged header.
func (d *newFolder) reuse(file string) (run.FileRecord, bool) {
	var rec run.FileRecord
	if !d.resume {
		return rec, false
	}
	recPath := filepath.Join(d.dir, doneDir, file+".json")
	b, err := manifests.ReadRegularFile(recPath)
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return rec, false
	}
	size, sum, err := manifests.HashFile(filepath.Join(d.dir, file))
	if err != nil || size != rec.File.Size || sum != rec.File.SHA256 {
		os.Remove(recPath)
		return rec, false
	}
	err = sourceUnchanged(d.source, rec)
	if err == nil {
		err = copiesUnchanged(d.ctx, d.planned, rec)
	}
	if err != nil {
		os.Remove(recPath)
		d.notes = append(d.notes, fmt.Sprintf("%s: not reused from the interrupted run, written again: %v", file, err))
		return rec, false
	}
	d.reused = append(d.reused, file)
	return rec, true
}

// copiesUnchanged re-reads the ranges a finished file copied from another
// file (a --graft trunk) and returns an error unless they still hold the
// bytes the file was made from.
func copiesUnchanged(ctx context.Context, p *plan.Plan, rec run.FileRecord) error {
	if p == nil || p.GGUFCopies[rec.File.Name] == nil {
		return nil
	}
	lay, err := p.Layout(rec.File.Name)
	if err != nil {
		return err
	}
	if len(lay.Copies) == 0 {
		return nil
	}
	if rec.Copied == "" {
		return fmt.Errorf("its record has no checksum of the bytes it copied from %s", lay.CopySource)
	}
	got, err := run.CopiedSum(ctx, lay.CopySource, lay.Copies)
	if err != nil {
		return err
	}
	if got != rec.Copied {
		return fmt.Errorf("the trunk %s changed since it was written: the tensor data it copied has CRC-32C %s, recorded %s", lay.CopySource, got, rec.Copied)
	}
	return nil
}

// sourceReadChunk bounds the memory sourceUnchanged reads with.
const sourceReadChunk = 16 << 20

// sourceUnchanged re-reads the source bytes every tensor of a finished file
// was made from (its segments' rows, in order, as the run read them) and
// returns an error naming the first whose CRC-32C differs from the record.
func sourceUnchanged(ck *st.Checkpoint, rec run.FileRecord) error {
	if ck == nil {
		return errors.New("no source to check it against")
	}
	if len(rec.Tensors) == 0 {
		return errors.New("its record lists no tensors")
	}
	for _, t := range rec.Tensors {
		for _, seg := range t.Segments {
			if err := computed.Attach(ck, []string{seg.Source}); err != nil {
				return err
			}
		}
	}
	rd := rows.NewReader(ck)
	for _, t := range rec.Tensors {
		h := manifests.NewTensorHash()
		for _, seg := range t.Segments {
			s, ok := ck.Tensors[seg.Source]
			if !ok {
				return fmt.Errorf("source tensor %s is no longer in the source", seg.Source)
			}
			size, err := s.DType.Size()
			if err != nil {
				return fmt.Errorf("source tensor %s: %w", seg.Source, err)
			}
			rowBytes := t.RowLen * size
			if rowBytes <= 0 {
				return fmt.Errorf("source tensor %s: the record has no row length", seg.Source)
			}
			if seg.Scale != "" { // hashed before the rows, as the export did
				_, raw, err := rd.Scales(seg.Scale)
				if err != nil {
					return err
				}
				h.Write(raw)
			}
			step := max(1, sourceReadChunk/rowBytes)
			for row := int64(0); row < seg.Rows; row += step {
				raw, err := rd.Raw(seg, t.RowLen, row, min(step, seg.Rows-row))
				if err != nil {
					return err
				}
				h.Write(raw)
			}
		}
		if got := manifests.TensorSum(h); got != t.SourceCRC32C {
			return fmt.Errorf("the source bytes of %s changed since it was written (CRC-32C %s, recorded %s)", t.Name, got, orNone(t.SourceCRC32C))
		}
	}
	return nil
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none"
	}
	return s
}
