package convert

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
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
}

// FileRecord is one finished output file and the tensors it holds.
type FileRecord struct {
	File    manifests.File
	Tensors []manifests.Tensor
	Sources []manifests.SourceTensor
	Read    int64
}

// Result summarises a run.
type Result struct {
	Tensors   []manifests.Tensor
	Sources   []manifests.SourceTensor // source tensors read whole
	Files     []manifests.File
	BytesRead int64
	BytesOut  int64
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
	res := &Result{}
	add := func(rec FileRecord) {
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
	// Tensors in plan order; each task writes its own byte ranges.
	var tensors []*OutTensor
	seen := map[*OutTensor]bool{}
	for _, t := range owners {
		if !seen[t] {
			seen[t] = true
			tensors = append(tensors, t)
		}
	}
	done := make([]*tensorResult, len(tensors))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Jobs)
	for i, t := range tensors {
		i, t := i, t
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			r, err := execTensor(gctx, ck, t, f, offsets, opt.ChunkElems, opt.Progress, fh.mark)
			if err != nil {
				return fmt.Errorf("%s: tensor %s: %w", file, t.Name, err)
			}
			done[i] = r
			return nil
		})
	}
	if err = g.Wait(); err != nil {
		fh.stop()
		f.Close()
		return rec, err
	}
	sum, err := fh.sum()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rec, fmt.Errorf("%s: hashing: %w", file, err)
	}
	rec.File = manifests.File{Name: file, Size: lay.Size, SHA256: sum}
	for _, r := range done {
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

// execTensor streams one output tensor in row chunks.
func execTensor(ctx context.Context, ck *st.Checkpoint, t *OutTensor, f *os.File, offsets map[string]int64, chunkElems int64, progress func(int64), written func(off, n int64)) (*tensorResult, error) {
	res := &tensorResult{record: t.record()}
	var f16Overflows int64
	srcHash := sha256.New()
	entryHash := map[string]hash.Hash{}
	for _, e := range res.record.Entries {
		entryHash[e.Name] = sha256.New()
	}
	// A tensor copied through unchanged (same dtype, no transform on values)
	// has the bytes of its source: one hash serves both.
	copyThrough := t.Quant == nil && !t.Has(TNormPlusOne)
	for _, seg := range t.Segments {
		copyThrough = copyThrough && ck.Tensors[seg.Source].DType == t.DType
	}
	write := func(name string, data []byte, off int64) error {
		if !copyThrough {
			entryHash[name].Write(data)
		}
		if _, err := f.WriteAt(data, off); err != nil {
			return err
		}
		written(off, int64(len(data)))
		return nil
	}
	chunkRows := max(1, chunkElems/t.RowLen)
	outSize, _ := t.DType.Size()
	plusOne := t.Has(TNormPlusOne)
	var qz chunkQuantizer
	if t.Quant != nil {
		var err error
		if qz, err = newChunkQuantizer(t); err != nil {
			return nil, err
		}
		chunkRows = max(2, chunkRows&^1) // nibble-packed zero points need even row counts
	}
	var (
		raw, enc []byte
		vals     []float32
		qe       quant.ErrStats
	)
	outRow := int64(0)
	for _, seg := range t.Segments {
		src := ck.Tensors[seg.Source]
		inSize, _ := src.DType.Size()
		// A segment that covers its whole source tensor fingerprints that tensor.
		// (With a single segment that is the tensor's own source hash.)
		var whole hash.Hash
		isWhole := seg.Row == 0 && seg.Rows*t.RowLen == src.Elements()
		if isWhole && len(t.Segments) > 1 {
			whole = sha256.New()
		}
		for r := int64(0); r < seg.Rows; r += chunkRows {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n := min(chunkRows, seg.Rows-r)
			elems := n * t.RowLen
			var err error
			raw, err = ck.ReadRange(src, (seg.Row+r)*t.RowLen*inSize, elems*inSize, raw)
			if err != nil {
				return nil, err
			}
			res.read += int64(len(raw))
			if progress != nil {
				progress(int64(len(raw)))
			}
			srcHash.Write(raw)
			if whole != nil {
				whole.Write(raw)
			}
			if copyThrough {
				if err := write(t.Name, raw, offsets[t.Name]+outRow*t.RowLen*outSize); err != nil {
					return nil, err
				}
				outRow += n
				continue
			}
			vals = grow(vals, elems)
			if err := quant.DecodeF32(string(src.DType), raw, vals); err != nil {
				return nil, fmt.Errorf("%s: %w", seg.Source, err)
			}
			if plusOne {
				for i := range vals {
					vals[i] += 1
				}
			}
			var pieces []piece
			if qz != nil && src.DType == t.DType && !plusOne {
				// The cast is the identity: quantize the decoded values directly.
				pieces = qz.quantize(vals, n, &qe)
			} else {
				// Cast: round to the output dtype once; quantization sees the cast values.
				enc = growBytes(enc, elems*outSize)
				of, err := quant.EncodeF32(string(t.DType), vals, enc)
				if err != nil {
					return nil, err
				}
				f16Overflows += int64(of)
				pieces = []piece{{t.Name, enc, t.RowLen * outSize, 1}}
				if qz != nil {
					if err := quant.DecodeF32(string(t.DType), enc, vals); err != nil {
						return nil, err
					}
					pieces = qz.quantize(vals, n, &qe)
				}
			}
			for _, pc := range pieces {
				if err := write(pc.name, pc.data, offsets[pc.name]+pc.offset(outRow)); err != nil {
					return nil, err
				}
			}
			outRow += n
		}
		switch {
		case whole != nil:
			res.sources = append(res.sources, manifests.SourceTensor{Name: seg.Source, SHA256: hex.EncodeToString(whole.Sum(nil))})
		case isWhole:
			res.sources = append(res.sources, manifests.SourceTensor{Name: seg.Source, SHA256: hex.EncodeToString(srcHash.Sum(nil))})
		}
	}
	rec := &res.record
	rec.SourceSHA256 = hex.EncodeToString(srcHash.Sum(nil))
	if copyThrough {
		entryHash[t.Name] = srcHash
	}
	rec.F16Overflows = f16Overflows
	if t.Quant != nil {
		rec.QuantError = &manifests.QuantError{MaxAbs: qe.Max, RMS: qe.RMS()}
	}
	for i := range rec.Entries {
		e := &rec.Entries[i]
		e.SHA256 = hex.EncodeToString(entryHash[e.Name].Sum(nil))
		if strings.HasSuffix(t.File, ".bin") { // no header to find it by
			e.Offset = offsets[e.Name]
			e.Size = entryBytes(st.Entry{Name: e.Name, DType: st.DType(e.DType), Shape: e.Shape})
		}
	}
	return res, nil
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
