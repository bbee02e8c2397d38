package convert

import (
	"context"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// RunOptions tune execution; they never change the output bytes.
type RunOptions struct {
	Jobs       int   // parallel tensors; 0 means GOMAXPROCS
	ChunkElems int64 // elements per processing chunk; 0 means 4 Mi
	// Reuse, when set, may hand back the records of a tensor file finished by
	// an earlier, interrupted run (already checked against its hash).
	Reuse func(file string) (FileRecord, bool)
	// OnFile is called when an output file is complete.
	OnFile func(rec FileRecord)
	// Progress, when set, is called with the source bytes of each chunk read
	// (from several workers at once).
	Progress func(n int64)
	// KeepSourceCache leaves the source bytes read in the page cache even
	// when they were not there before the run.
	KeepSourceCache bool
}

// FileRecord is one finished output file and the tensors it holds.
type FileRecord struct {
	File    manifests.File
	Tensors []manifests.Tensor
	Sources []manifests.SourceTensor
	Read    int64
	hash    hash.Hash // the file's sha256 state at its end (not for reused files)
}

// Result summarises a run.
type Result struct {
	Tensors   []manifests.Tensor
	Sources   []manifests.SourceTensor // source tensors read whole
	Files     []manifests.File
	BytesRead int64
	BytesOut  int64
	hashes    map[string]hash.Hash
}

// fileHash is the sha256 state at the end of a file this run wrote, so that
// bytes appended later extend it without hashing the file again.
func (r *Result) fileHash(file string) hash.Hash {
	if r == nil {
		return nil
	}
	return r.hashes[file]
}

// Run executes a plan: reads the source rows, applies the transforms, and
// writes every file of the plan into dir, which must exist. Each tensor is
// written at its precomputed offset, so tensors run in parallel and the
// bytes do not depend on the number of jobs.
func Run(ctx context.Context, p *Plan, ck *st.Checkpoint, dir string, opt RunOptions) (*Result, error) {
	if err := p.Validate(ck); err != nil {
		return nil, err
	}
	if opt.Jobs <= 0 {
		opt.Jobs = runtime.GOMAXPROCS(0)
	}
	if opt.ChunkElems <= 0 {
		opt.ChunkElems = 4 << 20
	}
	if !opt.KeepSourceCache {
		ck.StreamUncached(p.SourceNames())
	}
	res := &Result{hashes: map[string]hash.Hash{}}
	add := func(rec FileRecord) {
		if rec.hash != nil {
			res.hashes[rec.File.Name] = rec.hash
		}
		res.Tensors = append(res.Tensors, rec.Tensors...)
		res.Sources = append(res.Sources, rec.Sources...)
		res.Files = append(res.Files, rec.File)
		res.BytesRead += rec.Read
		res.BytesOut += rec.File.Size
		if opt.OnFile != nil {
			opt.OnFile(rec)
		}
	}
	for _, file := range p.TensorFiles {
		if opt.Reuse != nil {
			if rec, ok := opt.Reuse(file); ok {
				add(rec)
				continue
			}
		}
		rec, err := runTensorFile(ctx, p, ck, dir, file, opt)
		if err != nil {
			return nil, err
		}
		add(rec)
	}
	for _, of := range p.Files {
		data := of.Contents
		if data == nil {
			var err error
			data, err = st.ReadSmallFile(ck.Source, of.CopyFrom, 1<<30)
			if err != nil {
				return nil, fmt.Errorf("copying %s: %w", of.CopyFrom, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, of.Name), data, 0o644); err != nil {
			return nil, err
		}
		add(FileRecord{File: manifests.File{Name: of.Name, Size: int64(len(data)), SHA256: manifests.SHA256(data)}})
	}
	return res, nil
}

// runTensorFile writes one safetensors file of the plan.
func runTensorFile(ctx context.Context, p *Plan, ck *st.Checkpoint, dir, file string, opt RunOptions) (FileRecord, error) {
	var rec FileRecord
	lay, err := p.Layout(file)
	if err != nil {
		return rec, err
	}
	owners, offsets := lay.Owners, lay.Offsets
	path := filepath.Join(dir, file)
	f, err := os.Create(path)
	if err != nil {
		return rec, err
	}
	if _, err := f.WriteAt(lay.Header, 0); err != nil {
		f.Close()
		return rec, fmt.Errorf("%s: %w", file, err)
	}
	if err := f.Truncate(lay.Size); err != nil { // alignment gaps read as zeros
		f.Close()
		return rec, err
	}
	fh := newFileHasher(f, lay.Size)
	fh.mark(0, int64(len(lay.Header)))
	// Alignment gaps hold their final zeros already.
	prev := int64(len(lay.Header))
	for _, e := range lay.Entries {
		fh.mark(prev, lay.Offsets[e.Name]-prev)
		prev = lay.Offsets[e.Name] + lay.Sizes[e.Name]
	}
	fh.mark(prev, lay.Size-prev)
	// Tensors in plan order, each cut into row chunks; chunks run in
	// parallel, and each writes its own byte ranges.
	var states []*tensorState
	seen := map[*OutTensor]bool{}
	for _, t := range owners {
		if !seen[t] {
			seen[t] = true
			s, err := newTensorState(ck, t, offsets, opt.ChunkElems)
			if err != nil {
				fh.stop()
				f.Close()
				return rec, fmt.Errorf("%s: tensor %s: %w", file, t.Name, err)
			}
			states = append(states, s)
		}
	}
	if err = runChunks(ctx, ck, states, f, opt, fh.mark); err != nil {
		fh.stop()
		f.Close()
		return rec, fmt.Errorf("%s: %w", file, err)
	}
	sum, err := fh.sum()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rec, fmt.Errorf("%s: hashing: %w", file, err)
	}
	rec.File = manifests.File{Name: file, Size: lay.Size, SHA256: sum}
	rec.hash = fh.h
	for _, s := range states {
		r := s.res
		rec.Tensors = append(rec.Tensors, r.record)
		rec.Sources = append(rec.Sources, r.sources...)
		rec.Read += r.read
	}
	return rec, nil
}

type tensorResult struct {
	record  manifests.Tensor
	sources []manifests.SourceTensor
	read    int64
}

// record describes an output tensor for the manifest, before execution fills in hashes and errors.
func (t *OutTensor) record() manifests.Tensor {
	r := manifests.Tensor{Name: t.Name, File: t.File, Sources: t.Sources(), RowLen: t.RowLen, Shape: t.Shape, DType: string(t.DType)}
	for _, s := range t.Segments {
		r.Segments = append(r.Segments, manifests.Segment{Source: s.Source, Row: s.Row, Rows: s.Rows})
	}
	for _, x := range t.Transforms {
		tr := manifests.Transform{Name: x}
		switch x {
		case TCast:
			tr.DType = string(t.DType)
		case TQuantize:
			tr.Mode, tr.Bits, tr.Group, tr.Rounding, tr.Sym = t.Quant.Mode, t.Quant.Bits, t.Quant.GroupSize, t.Quant.Rounding, t.Quant.Sym
		}
		r.Transforms = append(r.Transforms, tr)
	}
	for _, e := range t.Entries() {
		r.Entries = append(r.Entries, manifests.Entry{Name: e.Name, DType: string(e.DType), Shape: e.Shape})
	}
	return r
}

func grow(s []float32, n int64) []float32 {
	if int64(cap(s)) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func growBytes(s []byte, n int64) []byte {
	if int64(cap(s)) < n {
		return make([]byte, n)
	}
	return s[:n]
}
