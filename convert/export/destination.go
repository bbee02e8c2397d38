package export

// Where an export writes. A destination is one of two kinds: a new folder
// (--out: newFolder, outdir.go), written aside and renamed into place, or an
// addition to a folder another export made (--into: addition, into.go),
// staged inside it and moved in file by file. Export drives either the same
// way: check → plan → claim → run into the staging folder → record →
// commit → release. What may be written where (the names an output file
// may not take, the links never written through) is decided here, once.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/manifests"
)

// destination is where an export writes, in the order Export calls it.
type destination interface {
	// String names it in messages ("out/x", "--into x").
	String() string
	// check refuses a destination that cannot be written, before anything
	// is planned or read (a dry run checks it too, where it reads only).
	check() error
	// plan plans the target's export for the destination: everything the
	// target writes in a new folder, or only the files it adds into one.
	plan(t targets.Target, m *model.Model, o targets.Options) (*plan.Plan, error)
	// reserved are the names the destination writes or keeps in the
	// folder itself (manifest, card, staging, lock, resume records), each
	// with what it is: no output file may take one (checkNames).
	reserved() map[string]string
	// claim takes the destination's lock, checks again under it that it may
	// be written, and returns the empty (or, resumed, the kept) staging
	// folder the run writes into. release undoes it whatever happened.
	claim(ctx context.Context, p *plan.Plan, planHash string) (staging string, err error)
	// reuse may hand back a file an interrupted run finished, every input
	// byte of it proven unchanged; finished records one as it completes.
	reuse(file string) (run.FileRecord, bool)
	finished(rec run.FileRecord)
	// record completes the manifest before it is written into the staging
	// folder (an addition: which files of the folder are ours, the
	// originals it keeps of the files it replaces).
	record(ctx context.Context, man *manifests.Manifest, p *plan.Plan) error
	// card reports whether a model card goes with the output.
	card() bool
	// commit moves the staged output into place: after its first change
	// the output is complete or completed by running the export again.
	// An interruption before that leaves nothing.
	commit(ctx context.Context) error
	release()
	// outcome lists the files reused and what the user should know.
	outcome() (reused, notes []string)
}

// Dest is where a request writes: a new folder (--out) or a folder of the
// same model that the target's files are added into (--into).
type Dest struct {
	Dir  string
	Into bool
}

// Out is a new folder, Into a folder added into.
func Out(dir string) Dest  { return Dest{Dir: dir} }
func Into(dir string) Dest { return Dest{Dir: dir, Into: true} }

// DestOf is the destination --out and --into name, with the rules of the
// two flags: they are exclusive, and one of them is required but for a
// dry run (which writes nothing).
func DestOf(out, into string, dryRun bool) (Dest, error) {
	if out != "" && into != "" {
		return Dest{}, targets.UsageError{Err: errors.New("--into and --out are exclusive")}
	}
	d := Out(out)
	if into != "" {
		d = Into(into)
	}
	return d, d.required(dryRun)
}

func (d Dest) required(dryRun bool) error {
	if d.Dir == "" && !dryRun {
		return targets.UsageError{Err: errors.New("--out (or --into) is required")}
	}
	return nil
}

// newDestination is the request's destination (usage errors only: the
// folder is read by check).
func newDestination(r Request, t targets.Target) (destination, error) {
	if err := r.Dest.required(r.DryRun); err != nil {
		return nil, err
	}
	if r.Dest.Into {
		return newAddition(r, t)
	}
	return newFolderFor(r), nil
}

// checkNames refuses an output whose file names collide: two files of one
// name, or a file named as one the destination writes or keeps itself (a
// --graft trunk named README.md would be overwritten by the card). Names
// are compared ignoring case, as the file systems of macOS and Windows do.
func checkNames(d destination, names []string) error {
	seen := map[string]string{}
	for name, what := range d.reserved() {
		seen[strings.ToLower(name)] = fmt.Sprintf("%s, %s", name, what)
	}
	for _, n := range names {
		key := strings.ToLower(n)
		if other, ok := seen[key]; ok {
			return fmt.Errorf("%s: the output file %s clashes with %s, which the export also writes there; refusing to overwrite one with the other (rename the file it is named after, such as the --graft trunk)", d, n, other)
		}
		seen[key] = fmt.Sprintf("%s, another output file", n)
	}
	return nil
}
