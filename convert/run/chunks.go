package run

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sync"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
	"golang.org/x/sync/errgroup"
)

// A tensor is processed as row chunks that run in parallel: the three
// expert tensors of the real head hold most of its bytes, so parallel
// tensors alone leave cores idle. What must see the bytes in order (the
// source and entry hashes, the error sums) happens in two ordered stages per
// tensor; chunk boundaries depend only on the tensor, never on the number of
// jobs, so the output and the manifest are the same for any --jobs.

// tensorState is one output tensor's execution: its chunks and what the
// ordered stages accumulate.
type tensorState struct {
	t           *plan.OutTensor
	offsets     map[string]int64 // where each entry starts in the file
	sizes       map[string]int64 // each entry's planned bytes
	storedRow   int64            // the plan's stored row length, which pieces count rows of
	chunks      []chunk
	wholeSeg    []bool // segment i covers its whole source tensor
	copyThrough bool
	narrow      bool // a signed integer buffer narrowed (TNarrowInt)
	plusOne     bool
	transposed  bool // each segment stored transposed, whole (TTranspose)
	repack      bool // FP4 codes and scales moved into MXFP4 blocks (TRepackMXFP4)
	move        bool // FP4 or MX fp8 codes and scales stored as they are, MLX mxfp4 / mxfp8 (TMoveMXFP4, TMoveMXFP8)
	raw         bool // the file has no header: the manifest places each entry
	outSize     int64
	qz          codec.Encoder
	out         *fileRun

	res          *tensorResult
	srcHash      hash.Hash32
	whole        hash.Hash32            // the current segment's own checksum, when the tensor has several
	entryHash    map[string]hash.Hash32 // CRC-32C per stored entry
	entryNext    map[string]int64       // bytes of each entry stored so far, in chunk order
	qe           quant.ErrStats
	refSq        float64       // Σ of the squared cast values quantized, for the relative error
	parts        *health.Stats // the parts' errors (a tensor with Parts)
	f16Overflows int64
	nonfinite    int64
	negScales    int64
	nonzero      bool // a source value read for it is not zero
	srcNext      int  // next chunk for the source stage
	outNext      int  // next chunk for the output stage
}

// chunk is rows [row, row+rows) of one segment's source tensor, landing at
// stored row outRow (a transposed segment's stored rows are its columns).
type chunk struct {
	seg         int
	row, rows   int64
	outRow      int64
	first, last bool // first and last chunk of its segment
}

func newTensorState(ck *st.Checkpoint, t *plan.OutTensor, lay *plan.FileLayout, chunkElems int64) (*tensorState, error) {
	s := &tensorState{t: t, offsets: lay.Offsets, sizes: lay.Sizes, storedRow: t.StoredRow(), res: &tensorResult{record: record(t)},
		srcHash: manifests.NewTensorHash(), entryHash: map[string]hash.Hash32{}, entryNext: map[string]int64{}}
	for _, e := range s.res.record.Entries {
		s.entryHash[e.Name] = manifests.NewTensorHash()
		if _, ok := lay.Sizes[e.Name]; !ok {
			return nil, fmt.Errorf("entry %s has no place in the file", e.Name)
		}
	}
	// A tensor copied through unchanged (same dtype, no transform on values)
	// stores its source bytes as they are, in segment order: its entry
	// checksum is its source checksum.
	s.plusOne = t.Has(plan.TNormPlusOne)
	s.transposed = t.Has(plan.TTranspose)
	s.narrow = t.Has(plan.TNarrowInt)
	s.repack, s.move = t.Has(plan.TRepackMXFP4), t.Has(plan.TMoveMXFP4) || t.Has(plan.TMoveMXFP8)
	s.copyThrough = t.Quant == nil && !s.plusOne && !s.transposed && !s.repack
	for _, seg := range t.Segments {
		s.copyThrough = s.copyThrough && ck.Tensors[seg.Source].DType == t.DType
	}
	s.outSize, _ = t.DType.Size()
	chunkRows := max(1, chunkElems/t.RowLen)
	if t.Quant != nil && !s.move {
		var err error
		if s.qz, err = t.Quant.Codec().Encoder(t.Name, s.storedRow, t.DType, t.Quant.Params()); err != nil {
			return nil, err
		}
		chunkRows = max(2, chunkRows&^1) // nibble-packed zero points need even row counts
	}
	outRow := int64(0)
	for i, seg := range t.Segments {
		s.wholeSeg = append(s.wholeSeg, len(seg.Then) == 0 && seg.Row == 0 && seg.Rows*t.RowLen == seg.Values(ck.Tensors[seg.Source]))
		segChunk := chunkRows
		if s.transposed { // a transposed block is stored whole
			segChunk = seg.Rows
		}
		for r := int64(0); r < seg.Rows; r += segChunk {
			n := min(segChunk, seg.Rows-r)
			s.chunks = append(s.chunks, chunk{seg: i, row: r, rows: n, outRow: outRow, first: r == 0, last: r+n == seg.Rows})
			outRow += n * t.RowLen / s.storedRow
		}
	}
	return s, nil
}

// scratch is one worker's reader and buffers, reused from chunk to chunk.
type scratch struct {
	rd   *rows.Reader
	enc  []byte
	vals []float32
	tmp  []float32 // a transposed block
	// moved is an mx move's scales, a block's repeated per group (rows.Segment.MXScales)
	moved []byte
	q     codec.Bufs
	// The current chunk's error sums (encode), merged in order.
	refSq    float64
	parts    *health.Stats
	partsErr error
}

// stages orders the per-tensor stages of chunks running in parallel. One
// lock serves all tensors: stages are short next to a chunk's work.
type stages struct {
	mu      sync.Mutex
	cond    *sync.Cond
	aborted bool
	cause   error // the failure that aborted the run
}

var errAborted = errors.New("aborted")

// enter waits until *next == i, runs fn and advances *next. fn runs
// without the lock: only the chunk whose turn it is can be in that stage.
func (sg *stages) enter(next *int, i int, fn func() error) error {
	sg.mu.Lock()
	for *next != i && !sg.aborted {
		sg.cond.Wait()
	}
	aborted := sg.aborted
	sg.mu.Unlock()
	if aborted {
		return errAborted
	}
	err := fn()
	sg.mu.Lock()
	*next++
	sg.cond.Broadcast()
	sg.mu.Unlock()
	return err
}

// abort wakes every waiting chunk; the first real failure is kept, since
// woken chunks may reach the errgroup before it.
func (sg *stages) abort(cause error) {
	sg.mu.Lock()
	if !sg.aborted && !errors.Is(cause, errAborted) {
		sg.cause = cause
	}
	sg.aborted = true
	sg.cond.Broadcast()
	sg.mu.Unlock()
}

// runChunks executes every chunk of the tensors, of every file, with
// opt.Jobs workers.
// Chunks start in order, and a chunk only waits for earlier chunks of its
// own tensor, so the ordered stages cannot deadlock.
func runChunks(ctx context.Context, ck *st.Checkpoint, states []*tensorState, opt RunOptions) error {
	sg := &stages{}
	sg.cond = sync.NewCond(&sg.mu)
	pool := make(chan *scratch, opt.Jobs)
	for range opt.Jobs {
		pool <- &scratch{rd: rows.NewReader(ck)}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Jobs)
	for _, s := range states {
		if len(s.chunks) == 0 {
			s.finish()
			s.out.tensorDone()
			continue
		}
		for i := range s.chunks {
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				sc := <-pool
				defer func() { pool <- sc }()
				if err := s.runChunk(gctx, ck, i, sc, sg, opt.Progress); err != nil {
					if !errors.Is(err, errAborted) {
						err = fmt.Errorf("%s: tensor %s: %w", s.out.name, s.t.Name, err)
					}
					sg.abort(err)
					return err
				}
				return nil
			})
		}
	}
	err := g.Wait()
	if sg.cause != nil {
		return sg.cause
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// runChunk reads, transforms and writes one chunk.
func (s *tensorState) runChunk(ctx context.Context, ck *st.Checkpoint, i int, sc *scratch, sg *stages, progress func(int64)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, c := s.t, s.chunks[i]
	seg := t.Segments[c.seg]
	src := ck.Tensors[seg.Source]
	elems := c.rows * t.RowLen
	raw, err := sc.rd.Raw(seg, t.RowLen, c.row, c.rows)
	if err != nil {
		return err
	}
	var scaleRaws [][]byte // each of seg.ScaleNames(), whole
	var negScales, scaleBytes int64
	if c.first {
		for k, name := range seg.ScaleNames() {
			scales, sraw, err := sc.rd.Scales(name)
			if err != nil {
				return err
			}
			if k == 0 {
				negScales = rows.NegativeScales(scales, seg, t.RowLen)
			}
			scaleRaws = append(scaleRaws, slices.Clone(sraw))
			scaleBytes += int64(len(sraw))
		}
	}
	if progress != nil {
		progress(int64(len(raw)) + scaleBytes)
	}
	if err := sg.enter(&s.srcNext, i, func() error { s.hashSource(c, raw, scaleRaws); return nil }); err != nil {
		return err
	}
	var pieces []codec.Piece
	var qe quant.ErrStats
	var overflows int
	sc.refSq, sc.parts, sc.partsErr = 0, nil, nil
	nonzero := seg.Scale != "" || nonZeroBytes(src.DType, raw) // a scaled segment: judged on its values below
	var nonfinite int64
	switch {
	case s.copyThrough:
		pieces = []codec.Piece{{Name: t.Name, Data: raw, Num: s.storedRow * s.outSize, Den: 1}}
	case s.narrow:
		sc.enc = growBytes(sc.enc, elems*s.outSize)
		if err := quant.Narrow(string(src.DType), string(t.DType), raw, sc.enc); err != nil {
			return fmt.Errorf("%s: %w", seg.Source, err)
		}
		pieces = []codec.Piece{{Name: t.Name, Data: sc.enc, Num: s.storedRow * s.outSize, Den: 1}}
	case s.repack || s.move:
		// The release's bytes, moved: no value is decoded or changed.
		_, sraw, err := sc.rd.Scales(seg.Scale)
		if err != nil {
			return err
		}
		per, group := t.RowLen/seg.Block[1], seg.Block[1]
		abs := seg.Row + c.row
		if (abs+c.rows)*per > int64(len(sraw)) && !s.move {
			return fmt.Errorf("%s: no scale for row %d", seg.Scale, abs+c.rows-1)
		}
		var scales []byte
		if s.move { // MLX mxfp4 / mxfp8: the codes as its words, a scale per group (a block's repeated)
			group = int64(t.Quant.GroupSize)
			per = t.RowLen / group
			if sc.moved, err = seg.MXScales(sraw, t.RowLen, group, c.row, c.rows, sc.moved); err != nil {
				return err
			}
			scales = sc.moved
			es := s.res.record.Entries
			w := slices.IndexFunc(es, func(e manifests.Entry) bool { return e.Name == t.Name })
			if len(es) != 2 || w < 0 {
				return fmt.Errorf("%d entries for an mx move: %s", len(es), disagree)
			}
			pieces = []codec.Piece{{Name: t.Name, Data: raw, Num: seg.RowBytesOf(t.RowLen), Den: 1}, {Name: es[1-w].Name, Data: scales, Num: per, Den: 1}}
		} else {
			scales = sraw[abs*per : (abs+c.rows)*per]
			sc.enc = growBytes(sc.enc, int64(len(scales))*quant.MXFP4BlockBytes)
			if err := quant.RepackMXFP4(raw, scales, sc.enc); err != nil {
				return fmt.Errorf("%s with %s: %w", seg.Source, seg.Scale, err)
			}
			pieces = []codec.Piece{{Name: t.Name, Data: sc.enc, Num: per * quant.MXFP4BlockBytes, Den: 1}}
		}
		nonzero = slices.ContainsFunc(raw, func(b byte) bool { return b&0x77 != 0 })
		if src.DType == st.F8E4M3 { // one E4M3 code a byte; S.1111.111 is its NaN
			nonzero = slices.ContainsFunc(raw, func(b byte) bool { return b&0x7F != 0 })
			for _, b := range raw {
				if b&0x7F == 0x7F {
					nonfinite++
				}
			}
		}
		for _, e := range scales {
			if e == 0xFF { // OCP MX's NaN scale: its whole block is NaN
				nonfinite += group
			}
		}
	case seg.Scale != "":
		// Dequantized through the shared row reader, then the usual path from float32.
		sc.vals = grow(sc.vals, elems)
		if err := sc.rd.Decode(seg, t.RowLen, c.row, c.rows, raw, sc.vals); err != nil {
			return err
		}
		nonzero = slices.ContainsFunc(sc.vals[:elems], func(v float32) bool { return v != 0 })
		s.transpose(sc, sc.vals, c.rows)
		if pieces, overflows, err = s.transformValues(sc, sc.vals, elems, &qe); err != nil {
			return fmt.Errorf("%s: %w", seg.Source, err)
		}
	default:
		if pieces, overflows, err = s.transform(sc, src.DType, raw, elems, c.rows, &qe); err != nil {
			return fmt.Errorf("%s: %w", seg.Source, err)
		}
	}
	if !s.repack && !s.move {
		if nonfinite, err = s.checkFinite(src.DType, raw, pieces, overflows, &qe); err != nil {
			return fmt.Errorf("%s: %w", seg.Source, err)
		}
	}
	refSq, parts := sc.refSq, sc.parts
	for _, pc := range pieces {
		if err := s.checkPiece(pc, c.outRow); err != nil {
			return err
		}
	}
	if sc.partsErr != nil { // the pieces fill their entries, yet do not decode
		return sc.partsErr
	}
	for _, pc := range pieces {
		off := s.offsets[pc.Name] + pc.Offset(c.outRow)
		if _, err := s.out.f.WriteAt(pc.Data, off); err != nil {
			return err
		}
		s.out.fh.mark(off, int64(len(pc.Data)))
	}
	return sg.enter(&s.outNext, i, func() error {
		if err := s.advanceEntries(pieces, c.outRow, i == len(s.chunks)-1); err != nil {
			return err
		}
		if !s.copyThrough {
			for _, pc := range pieces {
				s.entryHash[pc.Name].Write(pc.Data)
			}
		}
		s.f16Overflows += int64(overflows)
		s.nonfinite += nonfinite
		s.negScales += negScales
		s.nonzero = s.nonzero || nonzero
		s.qe.Max = max(s.qe.Max, qe.Max)
		s.qe.SumSq += qe.SumSq
		s.qe.N += qe.N
		s.refSq += refSq
		if parts != nil {
			if s.parts == nil {
				s.parts = health.NewStats(s.t.Parts, false)
			}
			s.parts.Merge(parts)
		}
		if i == len(s.chunks)-1 {
			s.finish()
			s.out.tensorDone()
		}
		return nil
	})
}

// disagree ends the errors of a tensor whose bytes do not fill its planned
// entries exactly, which only an inconsistent plan or encoder can cause.
const disagree = "the encoder and the plan disagree on the tensor's layout"

// checkPiece refuses a piece that would land outside its planned entry:
// the encoder and the plan disagree on the tensor's bytes.
func (s *tensorState) checkPiece(pc codec.Piece, outRow int64) error {
	size, ok := s.sizes[pc.Name]
	if _, own := s.entryHash[pc.Name]; !ok || !own {
		return fmt.Errorf("produced an entry %s that is not planned: %s", pc.Name, disagree)
	}
	if off := pc.Offset(outRow); off < 0 || off+int64(len(pc.Data)) > size {
		return fmt.Errorf("entry %s: produced bytes [%d, %d), beyond its planned %d bytes: %s", pc.Name, off, off+int64(len(pc.Data)), size, disagree)
	}
	return nil
}

// advanceEntries checks, in chunk order, that each chunk's pieces continue
// their entries exactly where the previous chunk ended, and that the last
// chunk ends every entry at its planned size: holes would leave the file's
// hash waiting for bytes no chunk writes.
func (s *tensorState) advanceEntries(pieces []codec.Piece, outRow int64, last bool) error {
	for _, pc := range pieces {
		if off := pc.Offset(outRow); off != s.entryNext[pc.Name] {
			return fmt.Errorf("entry %s: produced bytes at %d, after %d bytes stored: %s", pc.Name, off, s.entryNext[pc.Name], disagree)
		}
		s.entryNext[pc.Name] += int64(len(pc.Data))
	}
	if !last {
		return nil
	}
	for _, e := range s.res.record.Entries {
		if got, want := s.entryNext[e.Name], s.sizes[e.Name]; got != want {
			return fmt.Errorf("entry %s: produced %d bytes, planned %d: %s", e.Name, got, want, disagree)
		}
	}
	return nil
}

// hashSource feeds a chunk's source bytes, in order, to the tensor's source
// hash and to its segment's own hash; a segment's block scales, read whole
// with its first chunk, are recorded as a source tensor of their own.
func (s *tensorState) hashSource(c chunk, raw []byte, scaleRaws [][]byte) {
	seg := s.t.Segments[c.seg]
	for k, name := range seg.ScaleNames()[:len(scaleRaws)] {
		// The scales are part of what the tensor is made from: its source
		// checksum covers them, before the segment's rows.
		h := manifests.NewTensorHash()
		h.Write(scaleRaws[k])
		s.res.read += int64(len(scaleRaws[k]))
		s.res.sources = append(s.res.sources, manifests.SourceTensor{Name: name, CRC32C: manifests.TensorSum(h)})
		s.srcHash.Write(scaleRaws[k])
	}
	s.res.read += int64(len(raw))
	s.srcHash.Write(raw)
	multi := len(s.t.Segments) > 1
	if multi && c.first {
		s.whole = manifests.NewTensorHash()
	}
	if multi {
		s.whole.Write(raw)
	}
	if !c.last {
		return
	}
	// A segment that covers its whole source tensor fingerprints that tensor.
	// (With a single segment that is the tensor's own source hash.)
	if !s.wholeSeg[c.seg] {
		return
	}
	h := s.srcHash
	if multi {
		h = s.whole
	}
	s.res.sources = append(s.res.sources, manifests.SourceTensor{Name: seg.Source, CRC32C: manifests.TensorSum(h)})
}

// transform decodes a chunk, applies the value transforms and the cast or
// quantization, and returns the bytes to store.
func (s *tensorState) transform(sc *scratch, inType st.DType, raw []byte, elems, rows int64, qe *quant.ErrStats) ([]codec.Piece, int, error) {
	t := s.t
	if inType == st.BF16 && t.DType == st.F16 && !s.plusOne && !s.transposed && s.qz == nil {
		// The common cast in one pass, without a float32 buffer.
		sc.enc = growBytes(sc.enc, elems*2)
		overflows, err := quant.CastBF16ToF16(raw, sc.enc)
		return []codec.Piece{{Name: t.Name, Data: sc.enc, Num: s.storedRow * 2, Den: 1}}, overflows, err
	}
	sc.vals = grow(sc.vals, elems)
	vals := sc.vals
	if err := quant.DecodeF32(string(inType), raw, vals); err != nil {
		return nil, 0, err
	}
	s.transpose(sc, vals, rows)
	if inType != t.DType || s.plusOne || s.qz == nil {
		return s.transformValues(sc, vals, elems, qe)
	}
	// The cast is the identity: quantize the decoded values directly.
	return s.encode(sc, vals, elems, qe), 0, nil
}

// transpose stores a whole segment's [rows, RowLen] values as [RowLen, rows].
func (s *tensorState) transpose(sc *scratch, vals []float32, rows int64) {
	if !s.transposed {
		return
	}
	n := s.t.RowLen
	sc.tmp = grow(sc.tmp, rows*n)
	for r := int64(0); r < rows; r++ {
		for c := int64(0); c < n; c++ {
			sc.tmp[c*rows+r] = vals[r*n+c]
		}
	}
	copy(vals, sc.tmp[:rows*n])
}

// transformValues applies the value transforms to decoded source values,
// then the cast or quantization, and returns the bytes to store.
func (s *tensorState) transformValues(sc *scratch, vals []float32, elems int64, qe *quant.ErrStats) ([]codec.Piece, int, error) {
	t := s.t
	if s.plusOne {
		for i := range vals {
			vals[i] += 1
		}
	}
	// Cast: round to the output dtype once; quantization sees the cast values.
	sc.enc = growBytes(sc.enc, elems*s.outSize)
	overflows, err := quant.EncodeF32(string(t.DType), vals, sc.enc)
	if err != nil {
		return nil, 0, err
	}
	if s.qz == nil {
		return []codec.Piece{{Name: t.Name, Data: sc.enc, Num: s.storedRow * s.outSize, Den: 1}}, overflows, nil
	}
	if err := quant.DecodeF32(string(t.DType), sc.enc, vals); err != nil {
		return nil, 0, err
	}
	return s.encode(sc, vals, elems, qe), overflows, nil
}

// encode quantizes cast values, measuring on the way what the relative
// error divides by (the values' sum of squares) and, for a tensor with
// parts, each part's error from the stored pieces decoded again (the
// consumer's values, not the kernel's).
func (s *tensorState) encode(sc *scratch, vals []float32, elems int64, qe *quant.ErrStats) []codec.Piece {
	for _, v := range vals {
		sc.refSq += float64(v) * float64(v)
	}
	if len(s.t.Parts) == 0 {
		return s.qz.Encode(vals, elems/s.storedRow, qe, &sc.q)
	}
	want := append([]float32(nil), vals...)
	rows := elems / s.storedRow
	pieces := s.qz.Encode(vals, rows, qe, &sc.q)
	byName := map[string][]byte{}
	for _, pc := range pieces {
		byName[pc.Name] = pc.Data
	}
	read := func(entry string, off, n int64) ([]byte, error) {
		b, ok := byName[entry]
		if !ok || off < 0 || off+n > int64(len(b)) {
			return nil, fmt.Errorf("%s: the encoder stored no bytes [%d, %d) of %s", s.t.Name, off, off+n, entry)
		}
		return b[off : off+n], nil
	}
	got, err := s.t.Quant.Codec().Dequantize(codec.Chunk{Name: s.t.Name, RowLen: s.storedRow, DType: s.t.DType, P: s.t.Quant.Params(), Rows: rows}, read)
	if err != nil {
		sc.partsErr = err
		return pieces
	}
	sc.parts = health.NewStats(s.t.Parts, false)
	sc.parts.Add(got, want, s.storedRow)
	return pieces
}

// finish completes the tensor's manifest record once its last chunk is stored.
func (s *tensorState) finish() {
	t, rec := s.t, &s.res.record
	rec.SourceCRC32C = manifests.TensorSum(s.srcHash)
	if s.copyThrough {
		s.entryHash[t.Name] = s.srcHash
	}
	rec.F16Overflows = s.f16Overflows
	rec.NonFinite = s.nonfinite
	rec.NegativeScales = s.negScales
	s.res.zeroSource = !s.nonzero && len(s.chunks) > 0
	if t.Quant != nil {
		rec.QuantError = &manifests.QuantError{MaxAbs: s.qe.Max, RMS: s.qe.RMS(), RelRMS: health.RelError(s.qe.SumSq, s.refSq)}
		if s.parts != nil {
			rec.QuantError.Parts = s.parts.PartErrors()
		}
	}
	for i := range rec.Entries {
		e := &rec.Entries[i]
		e.CRC32C = manifests.TensorSum(s.entryHash[e.Name])
		if s.raw { // no header to find it by
			e.Offset = s.offsets[e.Name]
			e.Size = plan.EntryBytes(st.Entry{Name: e.Name, DType: st.DType(e.DType), Shape: e.Shape})
		}
	}
}

// nonZeroBytes reports whether raw values of a float dtype hold a value
// other than ±0 (every bit but the sign clear); any other dtype counts as
// non-zero (not judged).
func nonZeroBytes(dtype st.DType, raw []byte) bool {
	size, err := dtype.Size()
	switch {
	case err != nil, dtype != st.BF16 && dtype != st.F16 && dtype != st.F32 && dtype != st.F8E4M3:
		return true
	}
	for i, b := range raw {
		if i%int(size) == int(size)-1 {
			b &= 0x7f // little-endian: the sign is the last byte's top bit
		}
		if b != 0 {
			return true
		}
	}
	return false
}
