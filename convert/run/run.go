// Package run executes a plan: it streams the source rows (rows), applies
// the transforms and the quantization of each tensor in chunks over a worker
// pool, writes every file at the offsets its layout fixes, checks
// non-finite values and records hashes. It decides nothing.
package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// RunOptions tune execution; they never change the output bytes.
type RunOptions struct {
	Jobs       int   // chunks processed at once; 0 means GOMAXPROCS
	ChunkElems int64 // elements per processing chunk; 0 means defaultChunkElems
	// Reuse, when set, may hand back the records of a tensor file finished by
	// an earlier, interrupted run (already checked against its hash).
	Reuse func(file string) (FileRecord, bool)
	// OnFile is called when an output file is complete.
	OnFile func(rec FileRecord)
	// Accept, when set, judges a finished tensor file before OnFile reports
	// it (the export's head-health policy): an error fails the run.
	Accept func(rec FileRecord) error
	// Progress, when set, is called with the source bytes of each chunk read
	// (from several workers at once).
	Progress func(n int64)
	// KeepSourceCache leaves the source bytes read in the page cache even
	// when they were not there before the run.
	KeepSourceCache bool
}

// defaultChunkElems is RunOptions.ChunkElems when unset.
const defaultChunkElems = 4 << 20

// FileRecord is one finished output file and the tensors it holds.
type FileRecord struct {
	File    manifests.File
	Tensors []manifests.Tensor
	Sources []manifests.SourceTensor
	Read    int64
	// Copied is the CRC-32C of the file's bytes copied from another file
	// (a grafted trunk), in file order; empty when none are.
	Copied string `json:",omitempty"`
	// ZeroSources are the tensors written whose source values are all
	// zero (an FP8 weight whose block scales are 0, a rigged fixture's):
	// said by the export, not recorded (a reused file has none).
	ZeroSources []string  `json:"-"`
	hash        hash.Hash // the file's sha256 state at its end (not for reused files)
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

// FileHash is the sha256 state at the end of a file this run wrote, so that
// bytes appended later extend it without hashing the file again.
func (r *Result) FileHash(file string) hash.Hash {
	if r == nil {
		return nil
	}
	return r.hashes[file]
}

// Run executes a plan: reads the source rows, applies the transforms, and
// writes every file of the plan into dir, which must exist. Each chunk is
// written at its precomputed offset, so chunks run in parallel and the
// bytes do not depend on the number of jobs.
func Run(ctx context.Context, p *plan.Plan, ck *st.Checkpoint, dir string, opt RunOptions) (*Result, error) {
	if err := computed.Attach(ck, p.SourceNames()); err != nil {
		return nil, err
	}
	if err := p.Validate(ck); err != nil {
		return nil, err
	}
	if opt.Jobs <= 0 {
		opt.Jobs = runtime.GOMAXPROCS(0)
	}
	if opt.ChunkElems <= 0 {
		opt.ChunkElems = defaultChunkElems
	}
	if !opt.KeepSourceCache {
		ck.StreamUncached(p.SourceNames())
	}
	res := &Result{hashes: map[string]hash.Hash{}}
	// Every tensor file runs at once (chunks are still started in plan
	// order): each file's sha256 is a serial chain, and two files' chains
	// run on two cores.
	var runs []*fileRun
	var onFile sync.Mutex
	notify := func(rec FileRecord) {
		if opt.OnFile != nil {
			onFile.Lock()
			opt.OnFile(rec)
			onFile.Unlock()
		}
	}
	report := func(rec FileRecord) error {
		if opt.Accept != nil {
			if err := opt.Accept(rec); err != nil {
				return err
			}
		}
		notify(rec)
		return nil
	}
	recs := make([]*FileRecord, len(p.TensorFiles))
	var states []*tensorState
	for i, file := range p.TensorFiles {
		if opt.Reuse != nil {
			if rec, ok := opt.Reuse(file); ok {
				recs[i] = &rec
				if err := report(rec); err != nil {
					for _, r := range runs {
						r.abandon()
					}
					return nil, err
				}
				continue
			}
		}
		fr, err := openFileRun(ck, p, dir, file, opt.ChunkElems, report)
		if err != nil {
			for _, r := range runs {
				r.abandon()
			}
			return nil, err
		}
		runs = append(runs, fr)
		states = append(states, fr.states...)
	}
	// Ranges copied from another file (a grafted trunk) are copied by the
	// kernel while the planned tensors are computed; the files' hashes follow both.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	copied := make(chan error, 1)
	go func() {
		var err error
		for _, r := range runs {
			if err = r.copyIn(cctx); err != nil {
				cancel()
				break
			}
		}
		copied <- err
	}()
	err := runChunks(cctx, ck, states, opt)
	if err != nil {
		cancel()
	}
	if cerr := <-copied; cerr != nil && (err == nil || ctx.Err() == nil && errors.Is(err, context.Canceled)) {
		err = cerr
	}
	if err != nil {
		for _, r := range runs {
			r.fh.stop() // a file whose copy did not finish is never hashed whole
			r.abandon()
		}
		return nil, explainNonFinite(ck, err)
	}
	for _, r := range runs {
		<-r.done
		if r.err != nil {
			return nil, r.err
		}
	}
	for i, r := 0, 0; i < len(recs); i++ {
		if recs[i] == nil {
			recs[i] = &runs[r].rec
			r++
		}
		rec := *recs[i]
		if rec.hash != nil {
			res.hashes[rec.File.Name] = rec.hash
		}
		res.Tensors = append(res.Tensors, rec.Tensors...)
		res.Sources = append(res.Sources, rec.Sources...)
		res.Files = append(res.Files, rec.File)
		res.BytesRead += rec.Read
		res.BytesOut += rec.File.Size
	}
	for _, of := range p.Files {
		var f manifests.File
		var err error
		if of.Contents != nil {
			err = os.WriteFile(filepath.Join(dir, of.Name), of.Contents, 0o644)
			f = manifests.File{Name: of.Name, Size: int64(len(of.Contents)), SHA256: manifests.SHA256(of.Contents)}
		} else if f, err = copySourceFile(ck.Source, of.CopyFrom, dir, of.Name); err != nil {
			err = fmt.Errorf("copying %s: %w", of.CopyFrom, err)
		}
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, f)
		res.BytesOut += f.Size
		notify(FileRecord{File: f})
	}
	return res, nil
}

// copySourceFile copies a file of the source (a tokenizer, a template) into
// dir as name, streamed and hashed on the way: however large it is, it never
// sits in memory whole.
func copySourceFile(src st.Opener, from, dir, name string) (manifests.File, error) {
	in, err := src.Open(from)
	if err != nil {
		return manifests.File{}, err
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return manifests.File{}, err
	}
	h := sha256.New()
	// Large reads: a remote source answers each with one ranged request.
	n, err := io.CopyBuffer(io.MultiWriter(out, h), io.NewSectionReader(in, 0, in.Size()), make([]byte, min(in.Size(), 8<<20)+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != in.Size() {
		err = fmt.Errorf("%s: read %d of its %d bytes", from, n, in.Size())
	}
	if err != nil {
		return manifests.File{}, err
	}
	return manifests.File{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// fileRun is one tensor file of the plan being written.
type fileRun struct {
	name    string
	f       *os.File
	fh      *fileHasher
	size    int64
	states  []*tensorState
	left    atomic.Int64           // tensors not yet finished
	started atomic.Bool            // finalize has begun
	report  func(FileRecord) error // accepts and announces the finished file
	rec     FileRecord
	err     error
	done    chan struct{}
	// copies are ranges of copySource copied into the file unchanged.
	copies     []gguf.Copy
	copySource string
}

// CopiedRanges are the file ranges copies fill, sorted by offset.
func CopiedRanges(copies []gguf.Copy) [][2]int64 {
	var rs [][2]int64
	for _, c := range copies {
		if c.Len > 0 {
			rs = append(rs, [2]int64{c.Dst, c.Dst + c.Len})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	return rs
}

// CopiedSum is the CRC-32C of the bytes copies take from src, in the
// order of their place in the file: a file's FileRecord.Copied when src
// still holds the bytes it was made from.
func CopiedSum(ctx context.Context, src string, copies []gguf.Copy) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	cs := slices.Clone(copies)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Dst < cs[j].Dst })
	h := manifests.NewTensorHash()
	buf := make([]byte, 8<<20)
	for _, c := range cs {
		for off := int64(0); off < c.Len; {
			if err := ctx.Err(); err != nil {
				return "", err
			}
			n := min(int64(len(buf)), c.Len-off)
			if _, err := f.ReadAt(buf[:n], c.Src+off); err != nil {
				return "", fmt.Errorf("%s: %w", src, err)
			}
			h.Write(buf[:n])
			off += n
		}
	}
	return manifests.TensorSum(h), nil
}

// copyPiece is how much of a copied range one kernel call moves: the
// file's hash follows piece by piece, and an interrupt is seen between them.
const copyPiece = 256 << 20

// copyIn copies the file's ranges of another file, by the kernel where it
// can, marking each piece for the hasher as it lands.
func (fr *fileRun) copyIn(ctx context.Context) error {
	if len(fr.copies) == 0 {
		return nil
	}
	src, err := os.Open(fr.copySource)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, c := range fr.copies {
		for off := int64(0); off < c.Len; off += copyPiece {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := gguf.Copy{Src: c.Src + off, Dst: c.Dst + off, Len: min(copyPiece, c.Len-off)}
			if err := gguf.CopyRange(fr.f, src, p); err != nil {
				return fmt.Errorf("%s: copying from %s: %w", fr.name, fr.copySource, err)
			}
			fr.fh.mark(p.Dst, p.Len)
		}
	}
	return nil
}

// openFileRun creates the file with its header and size, starts its hasher
// and cuts its tensors into chunks.
func openFileRun(ck *st.Checkpoint, p *plan.Plan, dir, file string, chunkElems int64, report func(FileRecord) error) (*fileRun, error) {
	lay, err := p.Layout(file)
	if err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(lay.Header, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := f.Truncate(lay.Size); err != nil { // alignment gaps read as zeros
		f.Close()
		return nil, err
	}
	fr := &fileRun{name: file, f: f, fh: newFileHasher(f, lay.Size, CopiedRanges(lay.Copies)), size: lay.Size, report: report, done: make(chan struct{})}
	fr.fh.mark(0, int64(len(lay.Header)))
	// Alignment gaps hold their final zeros already; the tensors written and
	// the ranges copied are marked as they land.
	filled := make([][2]int64, 0, len(lay.Entries)+len(lay.Copies))
	for _, e := range lay.Entries {
		filled = append(filled, [2]int64{lay.Offsets[e.Name], lay.Offsets[e.Name] + lay.Sizes[e.Name]})
	}
	for _, c := range lay.Copies {
		filled = append(filled, [2]int64{c.Dst, c.Dst + c.Len})
	}
	sort.Slice(filled, func(i, j int) bool { return filled[i][0] < filled[j][0] })
	prev := int64(len(lay.Header))
	for _, r := range filled {
		fr.fh.mark(prev, r[0]-prev)
		prev = max(prev, r[1])
	}
	fr.fh.mark(prev, lay.Size-prev)
	fr.copies, fr.copySource = lay.Copies, lay.CopySource
	// Tensors in plan order, each cut into row chunks.
	seen := map[*plan.OutTensor]bool{}
	for _, t := range lay.Owners {
		if !seen[t] {
			seen[t] = true
			s, err := newTensorState(ck, t, lay, chunkElems)
			if err != nil {
				fr.abandon()
				return nil, fmt.Errorf("%s: tensor %s: %w", file, t.Name, err)
			}
			s.raw = p.Formats[file] == plan.FormatOpenVINOBin || p.Formats[file] == plan.FormatGGUF
			s.out = fr
			fr.states = append(fr.states, s)
		}
	}
	fr.left.Store(int64(len(fr.states)))
	if len(fr.states) == 0 {
		fr.started.Store(true)
		go fr.finalize()
	}
	return fr, nil
}

// tensorDone is called once per finished tensor; the last one finalizes the file.
func (fr *fileRun) tensorDone() {
	if fr.left.Add(-1) == 0 {
		fr.started.Store(true)
		go fr.finalize()
	}
}

// finalize waits for the file's hash, closes it and reports its record.
func (fr *fileRun) finalize() {
	defer close(fr.done)
	sum, err := fr.fh.sum()
	if cerr := fr.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fr.err = fmt.Errorf("%s: hashing: %w", fr.name, err)
		return
	}
	rec := &fr.rec
	rec.File = manifests.File{Name: fr.name, Size: fr.size, SHA256: sum}
	rec.hash = fr.fh.h
	rec.Copied = fr.fh.copiedSum()
	for _, s := range fr.states {
		r := s.res
		rec.Tensors = append(rec.Tensors, r.record)
		if r.zeroSource {
			rec.ZeroSources = append(rec.ZeroSources, r.record.Name)
		}
		rec.Sources = append(rec.Sources, r.sources...)
		rec.Read += r.read
	}
	fr.err = fr.report(*rec)
}

// abandon stops a file after a failure (the caller removes the folder).
func (fr *fileRun) abandon() {
	if fr.started.Load() {
		<-fr.done
		return
	}
	fr.fh.stop()
	fr.f.Close()
}

type tensorResult struct {
	record     manifests.Tensor
	sources    []manifests.SourceTensor
	read       int64
	zeroSource bool // every source value read for it is zero
}

// record describes an output tensor for the manifest, before execution fills in hashes and errors.
func record(t *plan.OutTensor) manifests.Tensor {
	r := manifests.Tensor{Name: t.Name, Component: t.Component, File: t.File, Sources: t.Sources(), RowLen: t.RowLen, StoredRowLen: t.StoredRowLen, Shape: t.Shape, DType: string(t.DType)}
	r.Segments = append(r.Segments, t.Segments...)
	for _, x := range t.Transforms {
		tr := manifests.Transform{Name: x}
		switch x {
		case plan.TCast, plan.TNarrowInt:
			tr.DType = string(t.DType)
		case plan.TQuantize, plan.TMoveMXFP4, plan.TMoveMXFP8:
			tr.Mode, tr.Bits, tr.Group, tr.Rounding, tr.Sym, tr.GGMLType = t.Quant.Mode, t.Quant.Bits, t.Quant.GroupSize, t.Quant.Rounding, t.Quant.Sym, t.Quant.GGMLType
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

// EstimatePeakMemory estimates the export's peak memory: per worker, one
// chunk of rows as source bytes, float32 values, encoded output and packed
// codes, plus the inventory and the plan.
func EstimatePeakMemory(m *model.Model, p *plan.Plan, jobs int) int64 {
	perWorker := int64(defaultChunkElems) * (2 + 4 + 4 + 2 + 1)
	inventory := int64(len(m.Checkpoint.Names)) * 512
	var segs int64
	for _, t := range p.Tensors {
		segs += int64(len(t.Segments))
	}
	const runtime = 32 << 20 // Go runtime, binary, buffers
	return int64(jobs)*perWorker + inventory + segs*64 + runtime
}
