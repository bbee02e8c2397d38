package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

// failingSource fails the reads that cover byte failAt of one shard.
type failingSource struct {
	source.Source
	shard  string
	failAt int64
}

type failingFile struct {
	source.File
	failAt int64
}

var errDisk = errors.New("simulated read failure")

func (s failingSource) Open(name string) (source.File, error) {
	f, err := s.Source.Open(name)
	if err != nil || name != s.shard {
		return f, err
	}
	return failingFile{f, s.failAt}, nil
}

func (f failingFile) ReadAt(p []byte, off int64) (int, error) {
	if off <= f.failAt && f.failAt < off+int64(len(p)) {
		return 0, errDisk
	}
	return f.File.ReadAt(p, off)
}

// A chunk that fails in the middle of a tensor stops the run with an error
// naming the tensor, while other chunks of that tensor wait in the ordered
// stages: none may be left waiting.
func TestRunChunkFailureDoesNotHang(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	whole := testmodel.Load(t, fixtures.Qwen36)
	// The middle of the largest head tensor: earlier chunks of it succeed.
	var big *st.Tensor
	for name, tn := range whole.Checkpoint.Tensors {
		if strings.HasPrefix(name, "mtp.") && (big == nil || tn.Bytes() > big.Bytes()) {
			big = tn
		}
	}
	m, err := model.Load(failingSource{source.Dir(dir), big.Shard.Name, big.Begin + big.Bytes()/2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	p, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	for _, jobs := range []int{1, 2, 4} {
		done := make(chan error, 1)
		go func() {
			_, err := run.Run(context.Background(), p, m.Checkpoint, t.TempDir(), run.RunOptions{Jobs: jobs, ChunkElems: 1000})
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("jobs %d: %v", jobs, err)
			if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "tensor ") {
				t.Fatalf("jobs %d: got %v, want the read failure with its tensor", jobs, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("jobs %d: run did not return after a failed chunk", jobs)
		}
	}
}

// With many chunks per tensor, every job count gives the same files and the
// same records (checksums, error statistics, overflow counts): the ordered
// stages see chunks in the same order whatever runs in parallel.
func TestRunDeterministicAcrossJobsWithManyChunks(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	mlx, err := testmodel.Plan(t, m, "mlx", targets.Options{HeadPrecision: "int4"})
	if err != nil {
		t.Fatal(err)
	}
	ov, err := testmodel.Plan(t, m, "openvino", targets.Options{HeadPrecision: "f16", LMHeadPrecision: "int8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*plan.Plan{mlx, ov} {
		var first []byte
		for _, jobs := range []int{1, 2, 5} {
			dir := t.TempDir()
			res, err := run.Run(context.Background(), p, m.Checkpoint, dir, run.RunOptions{Jobs: jobs, ChunkElems: 999})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := json.Marshal(struct {
				T any
				S any
				F any
			}{res.Tensors, res.Sources, res.Files})
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = rec
				continue
			}
			if !bytes.Equal(rec, first) {
				t.Fatalf("%s: --jobs %d records differ from --jobs 1", p.Target, jobs)
			}
		}
	}
}
