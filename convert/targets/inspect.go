package targets

// What inspect says of the files a runtime loads: each kind of file or
// folder is described by the target whose consumer reads it, found through
// these interfaces, so that the command names no target.

import (
	"context"
	"fmt"
	"io"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
)

// Inspection is a target's description of a file or folder: printed for
// people by WriteText, marshalled as JSON as it is, and judged by --strict.
type Inspection interface {
	WriteText(w io.Writer)
	// Strict is --strict's verdict: an error when the file has problems or
	// its head could not draft.
	Strict() error
}

// FileInspector is a target that describes a file of its consumer's format
// that anyone wrote (gguf: a .gguf file, alone or of a split set).
type FileInspector interface {
	// IsInspectedFile reports, from its name and kind alone, whether path is such a file.
	IsInspectedFile(path string) bool
	InspectFile(ctx context.Context, path string) (Inspection, error)
}

// FolderInspector is a target that describes a folder of its consumer's
// format that mtpconv did not write (mlx: an MLX model folder: does it hold
// an MTP head? if not, the command that adds one).
type FolderInspector interface {
	// IsInspectedFolder reports, from its config and headers, whether dir is such a folder.
	IsInspectedFolder(dir string) bool
	InspectFolder(dir string) (Inspection, error)
}

// HeadJudge is a target whose output folder's head inspect judges from
// its stored values, as its runtime dequantizes them (mlx, combined).
type HeadJudge interface {
	// HeadHealth is nil for a folder without a head.
	HeadHealth(dir string) (*health.Report, error)
}

// RepoInspector is a target whose runtimes serve the head from a repo they
// read whole, trunk and head (hf: vLLM and SGLang): inspect reads any
// checkpoint, and an output of the target, as they do, and reports how
// they would serve its head.
type RepoInspector interface {
	// LoadRepo describes src as the runtimes read it.
	LoadRepo(src source.Source) (*model.Model, error)
	// Serving judges how the runtimes build m's head, for the runtime
	// --runtime names ("" for every one; another value is a UsageError).
	Serving(m *model.Model, runtime string) (ServingReport, error)
	// ServingWithoutFamily judges a repo whose family LoadRepo does not read
	// by its MTP class's rule for the whole head (LongCat-Flash's
	// disable_quant_module): ok false when no such rule is ported.
	ServingWithoutFamily(src source.Source, runtime string) (r ServingReport, ok bool, err error)
}

// ServingReport is how the runtimes would serve a repo's head.
type ServingReport interface {
	WriteText(w io.Writer)
	// Err is --strict's verdict: every problem, then how to mend them.
	Err() error
	// JudgedHead reports whether the report judged a head the repo holds.
	JudgedHead() bool
}

// FileInspectorFor is the target that describes the file at path, nil when none does.
func FileInspectorFor(path string) FileInspector {
	for _, n := range TargetNames() {
		if fi, ok := targets[n].(FileInspector); ok && fi.IsInspectedFile(path) {
			return fi
		}
	}
	return nil
}

// FolderInspectorFor is the target that describes the folder dir, nil when none does.
func FolderInspectorFor(dir string) FolderInspector {
	for _, n := range TargetNames() {
		if fi, ok := targets[n].(FolderInspector); ok && fi.IsInspectedFolder(dir) {
			return fi
		}
	}
	return nil
}

// HeadHealthOf judges the head of an output folder of the named target:
// nil when the target judges none (or this build does not know it).
func HeadHealthOf(target, dir string) (*health.Report, error) {
	if j, ok := targets[target].(HeadJudge); ok {
		return j.HeadHealth(dir)
	}
	return nil, nil
}

// ReadAsRepo reports whether the named target's outputs are repos that
// RepoInspector describes (an hf output), rather than summarized from
// their manifest.
func ReadAsRepo(target string) bool {
	_, ok := targets[target].(RepoInspector)
	return ok
}

// Repos is the target that reads checkpoints and repos as their serving
// runtimes do.
func Repos() (RepoInspector, error) {
	for _, n := range TargetNames() {
		if ri, ok := targets[n].(RepoInspector); ok {
			return ri, nil
		}
	}
	return nil, fmt.Errorf("no target of this build reads a repo as its runtimes do")
}
