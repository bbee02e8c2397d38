package gguf

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

var _ targets.FileInspector = target{}

// IsInspectedFile: a regular .gguf file (ours or anyone's).
func (target) IsInspectedFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && strings.HasSuffix(strings.ToLower(path), ".gguf")
}

// FileReport is what inspect says of a GGUF file: architecture, blocks, MTP
// layers, tensor types, the command that adds a head it lacks, and the
// health of the head it holds.
type FileReport struct {
	*gg.Summary
	ProblemCount int            `json:"problem_count"` // every problem; Problems is capped as for checkpoints
	HeadHealth   *health.Report `json:"head_health,omitempty"`
	problems     []string
}

// InspectFile describes a GGUF file; a file of a split set describes the set
// (its first file's metadata, every file's tensors).
func (target) InspectFile(ctx context.Context, path string) (targets.Inspection, error) {
	f, size, err := gg.OpenContext(ctx, path)
	if err != nil {
		return nil, err
	}
	s := gg.Summarize(filepath.Base(path), size, f)
	if gg.IsSplit(f) {
		if set, err := gg.OpenSet(path); err != nil {
			s.Problems = append(s.Problems, err.Error())
		} else {
			f = set.Merged()
			s = gg.Summarize(filepath.Base(set.Members[0].Path), set.Size(), f)
			s.SplitFiles = len(set.Members)
		}
	}
	s.AddHead = addHeadCommand(path, f, s)
	r := &FileReport{Summary: s, ProblemCount: len(s.Problems), problems: s.Problems}
	if s.MTPHead || s.MTPOnly {
		if r.HeadHealth, err = headHealth(path, f, s); err != nil {
			return nil, err
		}
	}
	s.Problems = model.CapList(s.Problems, "problems")
	return r, nil
}

// WriteText prints the report for people.
func (r *FileReport) WriteText(w io.Writer) {
	r.Summary.WriteText(w)
	if r.HeadHealth != nil {
		r.HeadHealth.WriteText(w)
	}
}

// Strict fails on the file's problems, then on its head's health.
func (r *FileReport) Strict() error {
	if len(r.problems) > 0 {
		return fmt.Errorf("%d problems: %s", len(r.problems), strings.Join(r.problems, "; "))
	}
	if r.HeadHealth != nil {
		return r.HeadHealth.Err()
	}
	return nil
}
