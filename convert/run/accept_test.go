package run_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// Accept sees a finished tensor file's records, the concat projection's
// halves measured, before OnFile reports it; refusing it fails the run and
// the file is never reported.
func TestRunAcceptRefusesBeforeReporting(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by the test")
	var reported []string
	halves := 0
	_, err = run.Run(context.Background(), p, m.Checkpoint, t.TempDir(), run.RunOptions{
		Accept: func(rec run.FileRecord) error {
			for _, tr := range rec.Tensors {
				if q := tr.QuantError; tr.Name == "fc.weight" && q != nil && len(q.Parts) == 2 && q.Parts[0].RelRMS > 0 && q.RelRMS > 0 {
					halves++
					return refused
				}
			}
			return nil
		},
		OnFile: func(rec run.FileRecord) { reported = append(reported, rec.File.Name) },
	})
	if !errors.Is(err, refused) || halves != 1 {
		t.Fatalf("run: %v, concat projections measured %d", err, halves)
	}
	for _, f := range reported {
		if f == "model.safetensors" {
			t.Errorf("the refused file was reported: %v", reported)
		}
	}
}

// A file reused from an interrupted run is judged too before it is
// reported: a resumed export cannot skip the check.
func TestRunAcceptJudgesReusedFiles(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by the test")
	var judged, reported []string
	_, err = run.Run(context.Background(), p, m.Checkpoint, t.TempDir(), run.RunOptions{
		Reuse: func(file string) (run.FileRecord, bool) { return run.FileRecord{}, true },
		Accept: func(rec run.FileRecord) error {
			judged = append(judged, rec.File.Name)
			return refused
		},
		OnFile: func(rec run.FileRecord) { reported = append(reported, rec.File.Name) },
	})
	if !errors.Is(err, refused) || len(judged) != 1 || len(reported) != 0 {
		t.Fatalf("run: %v, judged %v, reported %v", err, judged, reported)
	}
}
