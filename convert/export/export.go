package export

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/manifests"
)

// Request is one export: the described model, the target and its options,
// and where and how to write.
type Request struct {
	Model   *model.Model
	Target  string
	Options targets.Options

	Dest            Dest
	Force           bool // replace an existing mtpconv output (into a folder: the files the target places there)
	Resume          bool // reuse the finished files of an interrupted run into a new folder
	DryRun          bool // plan and size everything, write nothing
	Jobs            int  // chunks converted at once; 0: all cores
	KeepSourceCache bool
	NoCard          bool   // no README.md model card
	Timestamp       bool   // record the time in the manifest
	BaseModel       string // Hub id of the source model, for the model files and the card; default from the source (Model.Origin)
	License         string // for the card; default from the source README
	RepoID          string // the Hub id the output is published as, for the card's snippets
	Version         string // the tool's version, recorded in the outputs
	AllowLossyHead  bool   // write a head whose quantization loses a half of its concat projection

	// Fetcher, for a remote source, fetches the plan's byte ranges up front
	// and counts what it received.
	Fetcher Fetcher
	// OnFile is called as each output file is complete; Progress with the
	// source bytes of each chunk read.
	OnFile   func(rec run.FileRecord)
	Progress func(n int64)
}

// Fetcher is a remote source that can fetch byte ranges ahead of the run.
type Fetcher interface {
	Prefetch(ranges map[string][][2]int64) error
	BytesFetched() int64
	TotalBytes() int64
}

// PlannedFile is one file of the output folder and its size.
type PlannedFile struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// Outcome is what an export did (or, for a dry run, would do).
type Outcome struct {
	Plan         *plan.Plan
	Files        []manifests.File // every file of the output folder, manifest and card included
	Planned      []PlannedFile    // dry run: every file but the manifest and card, with its exact size
	Tensors      int
	BytesRead    int64
	BytesOut     int64
	BytesFetched int64
	SourceTotal  int64
	Reused       []string
	Notes        []string
	Warnings     []string // what the card leaves out and why, head weights whose source is all zero
	PeakMemory   int64    // dry run: the estimate for Jobs
}

// Export plans the request's target for its destination (a new folder,
// --out, or an addition to an existing one, --into), then (unless a dry
// run) claims the destination, runs the plan into its staging folder,
// records the manifest and commits: the output is whole or absent, and a
// resumed run reuses only files whose every input byte is proven unchanged.
func Export(ctx context.Context, r Request) (*Outcome, error) {
	t, err := targets.LookupTarget(r.Target)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	d, err := newDestination(r, t)
	if err != nil {
		return nil, err
	}
	if err := targets.CheckOptions(t, r.Options); err != nil {
		return nil, targets.UsageError{Err: err}
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	m := r.Model
	if model.IsHubID(r.BaseModel) {
		m.BaseModel = r.BaseModel
	}
	desc := describeModel(r)
	opts := r.Options
	opts.Force = r.Force
	// Planning evaluates the repo's config against every head module (an
	// --into HF repo with thousands of re: entries): an interruption returns
	// at once.
	p, err := run.Interruptible(ctx, func() (*plan.Plan, error) { return d.plan(t, m, opts) })
	if err != nil {
		return nil, interrupted(ctx, d, err)
	}
	if err := checkNames(d, plannedNames(p)); err != nil {
		return nil, err
	}
	if r.Jobs <= 0 {
		r.Jobs = runtime.GOMAXPROCS(0)
	}
	prov := targets.Provenance{Version: r.Version, Source: desc.origin.Name()}
	oc := &Outcome{Plan: p, Tensors: len(p.Tensors), Notes: append([]string{}, p.Notes...), Reused: []string{}}
	if r.DryRun {
		oc.Planned, err = plannedFiles(t, m, p, prov)
		oc.PeakMemory = run.EstimatePeakMemory(m, p, r.Jobs)
		return oc, err
	}
	fingerprint, err := manifests.Fingerprint(m.Checkpoint, m.Config.Raw)
	if err != nil {
		return nil, err
	}
	if r.Fetcher != nil {
		if err := r.Fetcher.Prefetch(p.SourceRanges(m.Checkpoint)); err != nil {
			return nil, err
		}
	}
	dir, err := d.claim(ctx, p, planHash(r.Version, p, fingerprint))
	defer d.release()
	if err != nil {
		return nil, err
	}
	hc := &headCheck{allow: r.AllowLossyHead}
	res, err := runTarget(ctx, r, t, p, dir, d, prov, hc)
	if err != nil {
		return nil, interrupted(ctx, d, err)
	}
	notes, warnings := hc.ordered(p.TensorFiles)
	oc.Notes = append(oc.Notes, notes...)
	oc.Warnings = append(oc.Warnings, warnings...)
	if err := checkNames(d, fileNames(res.Files)); err != nil {
		return nil, err
	}
	man := newManifest(r, desc, p, fingerprint, res)
	if err := d.record(ctx, man, p); err != nil {
		return nil, interrupted(ctx, d, err)
	}
	if err := writeRecords(r, desc, t, d, dir, man, res, oc); err != nil {
		return nil, interrupted(ctx, d, err)
	}
	if err := d.commit(ctx); err != nil {
		return nil, err
	}
	reused, notes := d.outcome()
	oc.Reused = append(oc.Reused, reused...)
	oc.Notes = append(oc.Notes, notes...)
	return oc, nil
}

// interrupted names what an error before the commit left: nothing.
func interrupted(ctx context.Context, d destination, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; nothing was written to %s: %w", d, ctx.Err())
	}
	return err
}

// runTarget runs the plan into dir and lets the target finish its files.
// Files a Finisher completes are announced once final, so the sizes the
// caller prints are those on disk.
func runTarget(ctx context.Context, r Request, t targets.Target, p *plan.Plan, dir string, d destination, prov targets.Provenance, hc *headCheck) (*run.Result, error) {
	m := r.Model
	fin, finishes := t.(targets.Finisher)
	var held []run.FileRecord
	opts := run.RunOptions{
		Jobs: r.Jobs, KeepSourceCache: r.KeepSourceCache, Reuse: d.reuse, Progress: r.Progress, Accept: hc.accept,
		OnFile: func(rec run.FileRecord) {
			d.finished(rec)
			switch {
			case finishes:
				held = append(held, rec)
			case r.OnFile != nil:
				r.OnFile(rec)
			}
		},
	}
	res, err := run.Run(ctx, p, m.Checkpoint, dir, opts)
	if err != nil {
		return nil, err
	}
	if finishes {
		files, err := fin.Finish(dir, m, p, prov, res)
		if err != nil {
			return nil, err
		}
		res.Files = replaceFiles(res.Files, files)
		final := map[string]manifests.File{}
		for _, f := range res.Files {
			final[f.Name] = f
		}
		for _, rec := range held {
			rec.File = final[rec.File.Name]
			if r.OnFile != nil {
				r.OnFile(rec)
			}
		}
		for _, f := range files {
			if r.OnFile != nil && !heldFile(held, f.Name) {
				r.OnFile(run.FileRecord{File: f})
			}
		}
	}
	res.BytesOut = 0
	for _, f := range res.Files {
		res.BytesOut += f.Size
	}
	return res, nil
}

// newManifest is the manifest of a run; the destination completes it.
func newManifest(r Request, desc described, p *plan.Plan, fingerprint manifests.Source, res *run.Result) *manifests.Manifest {
	model := desc.model
	model.NormConvention = p.NormConvention(r.Model)
	man := &manifests.Manifest{
		Schema: manifests.SchemaVersion, Tool: manifests.Tool{Name: "mtpconv", Version: r.Version},
		Source: fingerprint, Target: p.Target, Options: p.Options, Model: model,
		Tensors: res.Tensors, Files: res.Files, BytesRead: res.BytesRead,
	}
	man.Source.Tensors = res.Sources
	if o := desc.origin; o.Repo != "" {
		man.Source.Repo, man.Source.Revision = o.Repo, o.Revision
	}
	if r.Fetcher != nil {
		man.Source.BytesFetched = r.Fetcher.BytesFetched()
	}
	if r.Timestamp {
		man.CreatedAt = time.Now().UTC().Format(time.RFC3339)
	}
	return man
}

// writeRecords writes the manifest and, where the destination takes one,
// the model card into dir, and fills the outcome.
func writeRecords(r Request, desc described, t targets.Target, d destination, dir string, man *manifests.Manifest, res *run.Result, oc *Outcome) error {
	if err := man.Write(dir); err != nil {
		return err
	}
	oc.Files = append(oc.Files, res.Files...)
	if mf, err := fileRecord(dir, manifests.FileName); err == nil {
		oc.Files = append(oc.Files, mf)
	}
	if d.card() {
		oc.Warnings = append(oc.Warnings, desc.notes...)
		card := manifests.Card(man, t.Card(man), nil)
		if err := os.WriteFile(filepath.Join(dir, manifests.CardFile), card, 0o644); err != nil {
			return err
		}
		oc.Files = append(oc.Files, manifests.File{Name: manifests.CardFile, Size: int64(len(card)), SHA256: manifests.SHA256(card)})
	}
	if r.Fetcher != nil {
		oc.BytesFetched, oc.SourceTotal = r.Fetcher.BytesFetched(), r.Fetcher.TotalBytes()
	}
	oc.BytesRead = res.BytesRead
	for _, f := range oc.Files {
		oc.BytesOut += f.Size // every file of the folder, manifest and card included
	}
	oc.Notes = append(oc.Notes, valueNotes(res.Tensors)...)
	return nil
}

// plannedNames are the names of the files a plan writes before any
// Finisher adds its own.
func plannedNames(p *plan.Plan) []string {
	names := slices.Clone(p.TensorFiles)
	for _, f := range p.Files {
		names = append(names, f.Name)
	}
	return names
}

func fileNames(files []manifests.File) []string {
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	return names
}

// plannedFiles sizes every file the export writes but the manifest and card,
// with the code that writes them: tensor files from their layout, files the
// target finishes from the target itself, plain files from their contents.
func plannedFiles(t targets.Target, m *model.Model, p *plan.Plan, prov targets.Provenance) ([]PlannedFile, error) {
	var out []PlannedFile
	for _, f := range p.TensorFiles {
		lay, err := p.Layout(f)
		if err != nil {
			return nil, err
		}
		out = append(out, PlannedFile{f, lay.Size})
	}
	if fin, ok := t.(targets.Finisher); ok {
		files, err := fin.Finish("", m, p, prov, nil)
		if err != nil {
			return nil, err
		}
		idx := map[string]int{}
		for i, f := range out {
			idx[f.Name] = i
		}
		for _, f := range files {
			if i, ok := idx[f.Name]; ok {
				out[i].Bytes = f.Size
			} else {
				out = append(out, PlannedFile{f.Name, f.Size})
			}
		}
	}
	for _, f := range p.Files {
		n := int64(len(f.Contents))
		if f.Contents == nil {
			src, err := m.Checkpoint.Source.Open(f.CopyFrom)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.CopyFrom, err)
			}
			n = src.Size()
			src.Close()
		}
		out = append(out, PlannedFile{f.Name, n})
	}
	return out, nil
}

func fileRecord(dir, name string) (manifests.File, error) {
	size, sum, err := manifests.HashFile(filepath.Join(dir, name))
	return manifests.File{Name: name, Size: size, SHA256: sum}, err
}

// described is the request's model as the outputs record it, described
// once: where it comes from, the manifest's model section, and the notes
// that say what the card leaves out and why.
type described struct {
	origin model.Origin
	model  manifests.Model
	notes  []string
}

// describeModel reads the source's provenance (its model card, once) and
// fills the manifest's model section.
func describeModel(r Request) described {
	m := r.Model
	prov := m.Provenance(r.License)
	var notes []string
	base := prov.Origin.Repo
	switch {
	case r.BaseModel != "" && !model.IsHubID(r.BaseModel):
		notes = append(notes, fmt.Sprintf("--base-model %q is not a Hub id ORG/NAME: ignored", r.BaseModel))
		if base == "" {
			notes = append(notes, "the source names no Hub model: the card names no base model")
		}
	case base == "":
		notes = append(notes, "the source names no Hub model: the card names no base model (pass --base-model ORG/NAME)")
	}
	// The experts the card and verify speak of are those of the blocks the
	// family stores as expert blocks: none where it stores none (Inkling's
	// dense MTP depths, its trunk's interleaved experts read by no target).
	experts, perTok := m.Config.NumExperts, m.Config.NumExpertsPerTok
	if len(m.MTPExperts) == 0 && len(m.TrunkExperts) == 0 && !m.Spec.ExpertsAsTensors {
		experts, perTok = 0, 0
	}
	return described{origin: prov.Origin, notes: notes, model: manifests.Model{Name: prov.Origin.Name(), Family: m.Family.Name,
		ModelType: m.Config.ModelType, BaseModel: base, License: prov.License, LicenseName: prov.LicenseName, LicenseLink: prov.LicenseLink,
		RepoID: r.RepoID, HiddenSize: m.Config.HiddenSize, NumExperts: experts, ExpertsPerTok: perTok,
		MTPDepth: m.MTPDepth}}
}

// planHash identifies a plan over a source, so a resumed run only reuses
// files of the same export.
func planHash(version string, p *plan.Plan, s manifests.Source) string {
	var files []string
	for _, f := range p.Files {
		files = append(files, f.Name+":"+manifests.SHA256(f.Contents)+":"+f.CopyFrom)
	}
	b, _ := json.Marshal(struct {
		Version string
		Plan    *plan.Plan
		Files   []string
		Source  manifests.Source
	}{version, p, files, s})
	return manifests.SHA256(b)
}

// replaceFiles swaps in the final records of files rewritten after Run and appends new ones.
func replaceFiles(files []manifests.File, final []manifests.File) []manifests.File {
	idx := map[string]int{}
	for i, f := range files {
		idx[f.Name] = i
	}
	for _, f := range final {
		if i, ok := idx[f.Name]; ok {
			files[i] = f
		} else {
			files = append(files, f)
		}
	}
	return files
}

// CheckDest refuses a destination that cannot be written, from its path
// alone: a folder --into does not add into, or an --out that is a file or
// (without force, or when it is not an mtpconv output) a folder. Export
// checks it too; a caller checks it before reading the source (over the
// network for hf://), so nothing is read for an export that cannot land.
func CheckDest(r Request) error {
	switch {
	case r.Dest.Into:
		return CheckIntoFolder(r.Dest.Dir)
	case r.DryRun:
		return nil // a dry run writes nothing
	default:
		return checkOutTarget(r.Dest.Dir, r.Force)
	}
}

func heldFile(recs []run.FileRecord, name string) bool {
	for _, r := range recs {
		if r.File.Name == name {
			return true
		}
	}
	return false
}
