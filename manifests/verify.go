package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// ReportFile is where `verify --save` records its report, for the card.
const ReportFile = "mtpconv-verify.json"

// Problem is one thing verify found wrong.
type Problem struct {
	Kind    string `json:"kind"`
	File    string `json:"file,omitempty"`
	Tensor  string `json:"tensor,omitempty"`
	Message string `json:"message"`
}

// Report is the outcome of Verify.
type Report struct {
	Out        string    `json:"out"`
	Source     string    `json:"source,omitempty"`
	OK         bool      `json:"ok"`
	Files      int       `json:"files_checked"`   // the files the manifest lists (not itself, nor the card), and those of a folder added into it records as kept
	Tensors    int       `json:"tensors"`         // the output tensors the manifest records
	Entries    int       `json:"tensors_checked"` // their stored entries (a quantized tensor is codes, scales and biases or zero points)
	Recomputed int       `json:"tensors_recomputed"`
	Problems   []Problem `json:"problems"`
	// Warnings do not fail verification: tensors that hold NaN or infinite
	// values, as the manifest records.
	Warnings []Problem `json:"warnings"`
	// Health: with a source, every quantized tensor's error against it as
	// its consumer dequantizes it (the concat projection per half).
	Health []TensorHealth `json:"health,omitempty"`
}

// TensorHealth is a quantized tensor's error against the source.
type TensorHealth struct {
	Name      string             `json:"name"`
	Component string             `json:"component,omitempty"`
	RelRMS    float64            `json:"rel_rms"`
	Parts     []health.PartError `json:"parts,omitempty"`
}

func (r *Report) add(kind, file, tensor, format string, a ...any) {
	r.Problems = append(r.Problems, Problem{kind, file, tensor, fmt.Sprintf(format, a...)})
}

// Verify checks an output folder against its manifest: every file's size and
// hash, every tensor's dtype, shape and hash, that no file holds a tensor the
// manifest does not record, and expert completeness. With a source
// checkpoint it also recomputes every output tensor from the source: float
// tensors must equal the cast source exactly (a norm lacking or doubling its
// +1 is named as such, found by comparing with the source, never by
// magnitude), quantized ones must dequantize to within one step of it. A
// source that is not the one the output was made from (fingerprint or a
// tensor's source bytes) is reported as source_mismatch and nothing is
// recomputed from it.
//
// Every file the manifest names must stay inside dir (no absolute name, ".."
// component, backslash, or symbolic link out of dir) and be a regular file;
// verify reads no other (see Report.Unsafe). It stops with ctx's error, within
// a chunk, when ctx is done.
func Verify(ctx context.Context, dir string, src *st.Checkpoint) (*Report, error) {
	m, err := Load(dir)
	if err != nil {
		return nil, err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	v := &verifier{dir: dir, root: root, m: m, r: &Report{Out: dir, Tensors: len(m.Tensors), Problems: []Problem{}, Warnings: []Problem{}},
		outs: map[string]*outFile{}, reported: map[string]bool{}}
	defer v.close()
	r := v.r
	for _, f := range m.Files {
		if err := v.checkFile(ctx, f, "file_hash", ""); err != nil {
			return nil, err
		}
	}
	if m.Into != nil {
		for _, f := range m.Into.Kept {
			if err := v.checkFile(ctx, f, "file_changed", "of the folder the head was added into"); err != nil {
				return nil, err
			}
		}
	}
	for i := range m.Tensors {
		t := &m.Tensors[i]
		o := v.open(t.File, t.Name)
		if o == nil {
			continue // reported once per file
		}
		nonfinite, counted := int64(0), false
		for _, e := range t.Entries {
			r.Entries++
			info, ok := o.h.Lookup(e.Name)
			if !ok {
				r.add("tensor_missing", t.File, e.Name, "%s: tensor %s is missing", t.File, e.Name)
				continue
			}
			if string(info.DType) != e.DType || !slices.Equal(info.Shape, e.Shape) {
				r.add("tensor_shape", t.File, e.Name, "%s: tensor %s is %s %v; the manifest records %s %v", t.File, e.Name, info.DType, info.Shape, e.DType, e.Shape)
				continue
			}
			dtype := nonFiniteDType(t, e)
			sum, n, err := entryChecksumCount(ctx, o.f, info.Begin, info.End, dtype)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil || sum != e.CRC32C {
				r.add("tensor_hash", t.File, e.Name, "%s: tensor %s does not match the manifest's CRC-32C", t.File, e.Name)
				continue
			}
			if dtype != "" {
				nonfinite, counted = n, true
			}
		}
		if counted {
			checkNonFinite(r, m, t, nonfinite)
		}
		checkExperts(r, m, t)
	}
	v.checkExtra()
	if src == nil {
		// Without a source, the export's own record of the halves' errors:
		// a head written lossy (--allow-lossy-head) still cannot draft.
		lost, degraded := m.RecordedHealth()
		for _, l := range lost {
			r.add("head_half_lost", "", "", "%s (as the manifest records the export): the head would load and draft at about 0 %%", l)
		}
		for _, d := range degraded {
			r.Warnings = append(r.Warnings, Problem{"head_half_degraded", "", "", d + " (as the manifest records the export)"})
		}
	}
	if src != nil {
		r.Source = src.Source.Name()
		cfg, err := st.ReadSmallFile(src.Source, "config.json", 16<<20)
		if err != nil {
			return nil, err
		}
		fp, err := Fingerprint(src, cfg)
		if err != nil {
			return nil, err
		}
		if d := SameSource(fp, m.Source); d != "" {
			r.add("source_mismatch", "", "", "the source is not the one this output was made from: %s; nothing was recomputed from it", d)
		} else {
			// The tensors computed from the config (rope_freqs) are
			// computed again from the recipe each one's segment names.
			for i := range m.Tensors {
				for _, seg := range m.Tensors[i].Segments {
					if err := computed.Attach(src, []string{seg.Source}); err != nil {
						return nil, err
					}
				}
			}
			if check := targetChecks[m.Target]; check != nil {
				ps, err := check(m, v.opened)
				if err != nil {
					return nil, err
				}
				r.Problems = append(r.Problems, ps...)
			}
			for i := range m.Tensors {
				t := &m.Tensors[i]
				o := v.outs[t.File]
				if o == nil {
					continue // reported above
				}
				// The tensor's own findings count only if its source bytes are
				// the ones it was made from: other bytes would make every
				// comparison fail for a reason that is not the output's.
				tr := &Report{Problems: []Problem{}}
				same, err := recompute(ctx, tr, src, o, t)
				switch {
				case ctx.Err() != nil:
					return nil, ctx.Err()
				case err != nil:
					r.add("recompute_failed", t.File, t.Name, "%v", err)
				case !same:
					r.add("source_mismatch", t.File, t.Name, "the source bytes of %s differ from those it was made from; it was not recomputed from them", t.Name)
				default:
					r.Problems = append(r.Problems, tr.Problems...)
					r.Warnings = append(r.Warnings, tr.Warnings...)
					r.Health = append(r.Health, tr.Health...)
					r.Recomputed++
				}
			}
		}
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// TargetCheck is what a target adds to verify --src for the files it
// wrote: the types its consumers' rules give each tensor, derived again
// from the file itself, so that a plan and a manifest that agree on a
// wrong type do not pass. open gives a tensor file verify opened (false
// when it could not: that is reported already).
type TargetCheck func(m *Manifest, open func(file string) (io.ReaderAt, int64, bool)) ([]Problem, error)

// opened is a tensor file verify opened, with its size.
func (v *verifier) opened(file string) (io.ReaderAt, int64, bool) {
	o := v.outs[file]
	if o == nil {
		return nil, 0, false
	}
	return o.f, o.h.FileSize, true
}

var targetChecks = map[string]TargetCheck{}

// RegisterTargetCheck adds a target's check; the target's package calls it
// from init.
func RegisterTargetCheck(target string, c TargetCheck) { targetChecks[target] = c }

// checkFile compares a file's size and sha256 with the record, reporting a
// difference as kind; whose says whose file it is, for the message. It
// returns only ctx's error.
func (v *verifier) checkFile(ctx context.Context, f File, kind, whose string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.r.Files++
	path, err := v.resolve(f.Name)
	if err != nil {
		v.fileProblem(f.Name, "", err)
		return nil
	}
	size, sum, err := HashFileContext(ctx, path)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		v.fileProblem(f.Name, "", err)
	case size != f.Size || sum != f.SHA256:
		if whose != "" {
			whose = " (a file " + whose + ")"
		}
		v.r.add(kind, f.Name, "", "%s%s: %d bytes with sha256 %s; the manifest records %d bytes with %s", f.Name, whose, size, sum, f.Size, f.SHA256)
	}
	return nil
}

// Problem kinds of a file that verify refuses to read.
const (
	KindFileOutside    = "file_outside"     // the name leaves the output folder
	KindFileNotRegular = "file_not_regular" // a FIFO, device, socket or folder
)

// Unsafe reports whether the manifest names a file outside the output folder
// or one that is not a regular file. Such a manifest is hostile or broken, and
// its report is not to be published with the output (verify --save).
func (r *Report) Unsafe() bool {
	for _, p := range r.Problems {
		if p.Kind == KindFileOutside || p.Kind == KindFileNotRegular {
			return true
		}
	}
	return false
}

// verifier holds what one Verify run has opened and reported.
type verifier struct {
	dir      string // the output folder as given
	root     string // the output folder with symbolic links resolved
	m        *Manifest
	r        *Report
	outs     map[string]*outFile // opened tensor files; nil when opening failed
	reported map[string]bool     // files whose problem is already reported
}

func (v *verifier) close() {
	for _, o := range v.outs {
		if o != nil {
			o.f.Close()
		}
	}
}

// outsideError is a manifest file name that leaves the output folder.
type outsideError struct{ name, why string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("file name %q leaves the output folder: %s", e.name, e.why)
}

// resolve returns the path of a file the manifest names, with symbolic links
// resolved, refusing any name that leaves the output folder (LinkedFile).
func (v *verifier) resolve(name string) (string, error) {
	return LinkedFile(v.root, name)
}

// LinkedFile is the one rule for the links of a folder mtpconv writes into
// or verifies (export --into and verify follow it alike): a file name stays
// inside the folder, and a symbolic link may lead only to a file inside the
// folder or, when the folder is a Hugging Face cache snapshot
// (…/models--ORG--NAME/snapshots/REV, every file a link into the repo's
// blobs), inside that repo's blob store. root is the folder with its own
// links resolved; the result is the file's real path. mtpconv reads through
// such links and never writes through one: its files replace a link's
// name (a rename), never the bytes it leads to.
func LinkedFile(root, name string) (string, error) {
	if err := st.CheckLocalName(name); err != nil {
		return "", &outsideError{name, `it is empty or absolute, or holds a backslash or a ".." component`}
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(root, real); err == nil && filepath.IsLocal(rel) {
		return real, nil
	}
	if blobs := snapshotBlobs(root); blobs != "" {
		if rel, err := filepath.Rel(blobs, real); err == nil && filepath.IsLocal(rel) {
			return real, nil
		}
	}
	return "", &outsideError{name, "through a symbolic link it resolves to " + real + ", outside the folder (and outside the blob store of the Hugging Face cache snapshot it would be)"}
}

// snapshotBlobs is the blob store of a Hugging Face cache snapshot folder
// (REPO/snapshots/REV → REPO/blobs), "" for any other folder.
func snapshotBlobs(root string) string {
	snapshots := filepath.Dir(root)
	repo := filepath.Dir(snapshots)
	if filepath.Base(snapshots) != "snapshots" || !strings.Contains(filepath.Base(repo), "--") {
		return ""
	}
	return filepath.Join(repo, "blobs")
}

// fileProblem reports, once per file, why a file could not be read.
func (v *verifier) fileProblem(name, tensor string, err error) {
	if v.reported[name] {
		return
	}
	v.reported[name] = true
	var outside *outsideError
	var notRegular *st.NotRegularError
	switch {
	case errors.As(err, &outside):
		v.r.add(KindFileOutside, name, tensor, "%v; it was not read", err)
	case errors.As(err, &notRegular):
		v.r.add(KindFileNotRegular, name, tensor, "%s is not a regular file: it is %s; it was not read", name, notRegular.What())
	case errors.Is(err, fs.ErrNotExist):
		v.r.add("file_missing", name, tensor, "%s is missing", name)
	default:
		v.r.add("file_unreadable", name, tensor, "%v", err)
	}
}

// open opens a tensor file once; it reports why it cannot (once) and returns nil.
func (v *verifier) open(name, tensor string) *outFile {
	if o, ok := v.outs[name]; ok {
		return o
	}
	o, err := v.openOut(name)
	if err != nil {
		v.fileProblem(name, tensor, err)
	}
	v.outs[name] = o
	return o
}

// checkExtra reports tensors a safetensors output file holds that the
// manifest does not record.
func (v *verifier) checkExtra() {
	recorded := map[string]map[string]bool{}
	var files []string
	for _, t := range v.m.Tensors {
		if recorded[t.File] == nil {
			recorded[t.File] = map[string]bool{}
			files = append(files, t.File)
		}
		for _, e := range t.Entries {
			recorded[t.File][e.Name] = true
		}
	}
	for _, file := range files {
		o := v.outs[file]
		if o == nil || o.placed {
			continue
		}
		for _, ti := range o.h.Tensors {
			if !recorded[file][ti.Name] {
				v.r.add("tensor_extra", file, ti.Name, "%s holds tensor %s, which the manifest does not record", file, ti.Name)
			}
		}
	}
}

// checkExperts checks that a stacked or split expert tensor holds all E experts.
func checkExperts(r *Report, m *Manifest, t *Tensor) {
	_, split := t.Has(TSplitGateUp)
	_, stack := t.Has(TStackExperts)
	if !split && !stack {
		return
	}
	e := m.Model.NumExperts
	if len(t.Shape) != 3 || t.Shape[0] != int64(e) || len(t.Segments) != e {
		r.add("experts_incomplete", t.File, t.Name, "%s holds %v experts from %d segments; the model has %d", t.Name, t.Shape, len(t.Segments), e)
	}
}

// outFile is an output tensor file: a safetensors file found by its
// header, or a headerless file (an OpenVINO .bin) whose entries the manifest places.
type outFile struct {
	f      *os.File
	h      *st.Header
	placed bool // the manifest, not a header, says where each entry lies
}

// placed reports whether the manifest places the entries of a file itself:
// a file without a header records each entry's size (and offset).
func (m *Manifest) placed(file string) bool {
	for _, t := range m.Tensors {
		if t.File != file {
			continue
		}
		for _, e := range t.Entries {
			if e.Size > 0 {
				return true
			}
		}
	}
	return false
}

func (v *verifier) openOut(name string) (*outFile, error) {
	path, err := v.resolve(name)
	if err != nil {
		return nil, err
	}
	f, stat, err := st.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	var h *st.Header
	placed := v.m.placed(name)
	if placed {
		h = &st.Header{File: name, FileSize: stat.Size()}
		for _, t := range v.m.Tensors {
			if t.File != name {
				continue
			}
			for _, e := range t.Entries {
				if e.Offset < 0 || e.Size < 0 || e.Offset+e.Size > stat.Size() {
					f.Close()
					return nil, fmt.Errorf("%s: tensor %s lies outside the %d-byte file", name, e.Name, stat.Size())
				}
				h.Tensors = append(h.Tensors, st.TensorInfo{Name: e.Name, DType: st.DType(e.DType), Shape: e.Shape, Begin: e.Offset, End: e.Offset + e.Size})
			}
		}
	} else if h, err = st.ReadHeader(f, stat.Size(), name); err != nil {
		f.Close()
		return nil, err
	}
	return &outFile{f, h, placed}, nil
}

// entryChecksumCount returns an entry's checksum and, when dtype is a float
// type, how many of its values are NaN or infinite.
func entryChecksumCount(ctx context.Context, f *os.File, begin, end int64, dtype string) (string, int64, error) {
	h := NewTensorHash()
	buf := make([]byte, hashChunk) // a multiple of every element size
	var nonfinite int64
	for off := begin; off < end; {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		n := min(int64(len(buf)), end-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return "", 0, err
		}
		h.Write(buf[:n])
		if dtype != "" {
			c, err := quant.CountNonFinite(dtype, buf[:n])
			if err != nil {
				return "", 0, err
			}
			nonfinite += int64(c)
		}
		off += n
	}
	return TensorSum(h), nonfinite, nil
}

// recompute rebuilds a tensor's values from the source, row chunk by row
// chunk, and compares them with what the output holds. It reports whether
// the source bytes are those the tensor was made from; only then do the
// problems it added to r mean anything.
func recompute(ctx context.Context, r *Report, src *st.Checkpoint, o *outFile, t *Tensor) (sameSource bool, err error) {
	if st.DType(t.DType).IsSignedInt() {
		return recomputeIndices(ctx, r, src, o, t)
	}
	_, plusOne := t.Has(TNormPlusOne)
	_, repack := t.Has(TRepackMXFP4)
	_, move8 := t.Has(TMoveMXFP8)
	if _, move := t.Has(TMoveMXFP4); repack || move || move8 {
		return recomputeMoved(ctx, r, src, o, t, repack)
	}
	if q, quantized := t.Has(TQuantize); quantized {
		return recomputeQuantized(ctx, r, src, o, t, q, plusOne)
	}
	outSize, err := st.DType(t.DType).Size()
	if err != nil {
		return false, err
	}
	main, ok := o.h.Lookup(t.Name)
	if !ok {
		return false, fmt.Errorf("entry %s is missing", t.Name)
	}
	// A tensor of the source's dtype without +1 was copied, bits and all
	// (a signalling NaN too, which arithmetic or a cast would quieten).
	copied := !plusOne
	for _, seg := range t.Segments {
		if s, ok := src.Tensors[seg.Source]; ok && string(s.DType) != t.DType {
			copied = false
		}
	}
	lacks, doubles, unexpected, differs := 0, 0, 0, 0
	sameSource, err = sourceChunks(ctx, src, t, func(v []float32, n, outRow int64) error {
		elems := n * t.RowLen
		cast := func(add float32) []float32 {
			out := make([]float32, elems)
			copy(out, v)
			if add == 0 && copied {
				return out
			}
			if add != 0 { // adding 0 would turn -0 into +0
				for i := range out {
					out[i] += add
				}
			}
			enc := make([]byte, elems*outSize)
			quant.EncodeF32(t.DType, out, enc)
			quant.DecodeF32(t.DType, enc, out)
			return out
		}
		want := cast(map[bool]float32{true: 1, false: 0}[plusOne])
		got, err := readF32(o.f, main, outRow*t.RowLen*outSize, elems, t.DType)
		if err != nil {
			return err
		}
		if !sameBits(got, want) {
			switch {
			case sameBits(got, cast(0)) && plusOne:
				lacks++
			case sameBits(got, cast(2)) && plusOne:
				doubles++
			case sameBits(got, cast(1)) && !plusOne:
				unexpected++
			default:
				differs++
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	switch {
	case lacks > 0:
		r.add("norm_missing_plus_one", t.File, t.Name, "%s: %d chunks equal the source without its +1: the zero-centred norm lacks the shift", t.Name, lacks)
	case doubles > 0:
		r.add("norm_double_plus_one", t.File, t.Name, "%s: %d chunks equal the source plus 2: the +1 was applied twice", t.Name, doubles)
	case unexpected > 0:
		r.add("norm_unexpected_plus_one", t.File, t.Name, "%s: %d chunks hold source+1 but no +1 was recorded", t.Name, unexpected)
	case differs > 0:
		r.add("values_differ", t.File, t.Name, "%s: %d chunks differ from the cast source", t.Name, differs)
	}
	return sameSource, nil
}

// recomputeQuantized has the tensor's codec check every chunk of stored
// rows against the source cast as the export cast it: an exact codec
// encodes it again and compares bytes, a bounded one dequantizes the stored
// codes to within one step.
func recomputeQuantized(ctx context.Context, r *Report, src *st.Checkpoint, o *outFile, t *Tensor, q Transform, plusOne bool) (bool, error) {
	c, err := codec.For(q.Mode)
	if err != nil {
		return false, fmt.Errorf("quantization mode %q is not one verify knows", q.Mode)
	}
	p := q.Params()
	_, storedRow, err := t.StoredRows(0)
	if err != nil {
		return false, err
	}
	if err := c.Validate(p, storedRow); err != nil {
		return false, err
	}
	outSize, err := st.DType(t.DType).Size()
	if err != nil {
		return false, err
	}
	read := func(entry string, off, n int64) ([]byte, error) {
		info, ok := o.h.Lookup(entry)
		if !ok {
			return nil, fmt.Errorf("entry %s is missing", entry)
		}
		if off < 0 || n < 0 || off+n > info.End-info.Begin {
			return nil, fmt.Errorf("entry %s holds %d bytes, not [%d, %d)", entry, info.End-info.Begin, off, off+n)
		}
		b := make([]byte, n)
		_, err := o.f.ReadAt(b, info.Begin+off)
		return b, err
	}
	differs, beyond := 0, 0
	var worst float64
	var last codec.Result
	var parts []health.Part
	if q := t.QuantError; q != nil && storedRow == t.RowLen {
		for _, pe := range q.Parts {
			parts = append(parts, pe.Part)
		}
	}
	hs := health.NewStats(parts, false)
	sameSource, err := sourceChunks(ctx, src, t, func(v []float32, n, outRow int64) error {
		// Groups run along the stored rows (a transposed block's columns).
		rows, _, err := t.StoredRows(n)
		if err != nil {
			return err
		}
		at, _, err := t.StoredRows(outRow)
		if err != nil {
			return err
		}
		k := codec.Chunk{Name: t.Name, RowLen: storedRow, DType: st.DType(t.DType), P: p,
			Want: castAsExported(v, plusOne, t.DType, outSize), Rows: rows, OutRow: at}
		res, err := c.Check(k, read)
		if err != nil {
			return err
		}
		// What the consumer computes with, against the source: the head's health.
		got, err := c.Dequantize(k, read)
		if err != nil {
			return err
		}
		hs.Add(got, k.Want, storedRow)
		if res.Differs {
			differs++
		}
		beyond += res.Beyond
		worst = max(worst, res.Worst)
		last = res
		return nil
	})
	if err != nil {
		return false, err
	}
	if differs > 0 {
		r.add("values_differ", t.File, t.Name, "%s: %d chunks differ from the source quantized again%s", t.Name, differs, last.Again)
	}
	if beyond > 0 {
		r.add("quant_bound", t.File, t.Name, "%s: %d values dequantize further than one step from the source (worst %g)", t.Name, beyond, worst)
	}
	if last.RecordsError && t.QuantError != nil && worst > t.QuantError.MaxAbs*1.0001+1e-9 {
		r.add("quant_error_record", t.File, t.Name, "%s: recomputed max error %g exceeds the recorded %g", t.Name, worst, t.QuantError.MaxAbs)
	}
	if sameSource {
		th := TensorHealth{Name: t.Name, Component: t.Component, RelRMS: health.RelError(hs.ErrSq, hs.RefSq), Parts: hs.PartErrors()}
		r.Health = append(r.Health, th)
		v := health.JudgeErrors(t.Name, th.Parts)
		for _, l := range v.Lost {
			r.add("head_half_lost", t.File, t.Name, "%s: the head would load and draft at about 0 %%", l)
		}
		for _, d := range v.Degraded {
			r.Warnings = append(r.Warnings, Problem{"head_half_degraded", t.File, t.Name, d})
		}
	}
	return sameSource, nil
}

// recomputeMoved checks a tensor whose FP4 codes and scales were moved
// unchanged (into ggml MXFP4 blocks, repack, or as MLX mxfp4's words and
// scales): every stored byte is the source's, placed as the move places
// it, segment by segment; the source bytes are hashed as the export read
// them (each segment's scales, then its rows).
func recomputeMoved(ctx context.Context, r *Report, src *st.Checkpoint, o *outFile, t *Tensor, repack bool) (bool, error) {
	h := NewTensorHash()
	rd := rows.NewReader(src)
	entry := func(name string) (st.TensorInfo, error) {
		e, ok := o.h.Lookup(name)
		if !ok {
			return e, fmt.Errorf("entry %s is missing", name)
		}
		return e, nil
	}
	main, err := entry(t.Name)
	if err != nil {
		return false, err
	}
	var scalesEntry st.TensorInfo
	var group int64 // an mx move's: a scale per group values
	for _, x := range t.Transforms {
		if x.Name == TMoveMXFP4 || x.Name == TMoveMXFP8 {
			group = int64(x.Group)
		}
	}
	if !repack {
		if len(t.Entries) != 2 {
			return false, fmt.Errorf("%s: %d entries for an mxfp4 move", t.Name, len(t.Entries))
		}
		other := t.Entries[0].Name
		if other == t.Name {
			other = t.Entries[1].Name
		}
		if scalesEntry, err = entry(other); err != nil {
			return false, err
		}
	}
	compare := func(e st.TensorInfo, off int64, want []byte) (bool, error) {
		if off < 0 || e.Begin+off+int64(len(want)) > e.End {
			return false, fmt.Errorf("tensor %s is shorter than its manifest says", e.Name)
		}
		got := make([]byte, len(want))
		if _, err := o.f.ReadAt(got, e.Begin+off); err != nil {
			return false, err
		}
		return bytes.Equal(got, want), nil
	}
	differs := 0
	outRow := int64(0)
	for _, seg := range t.Segments {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		err := rows.Check(src, seg, t.RowLen)
		if err == nil && seg.Packed == "" {
			err = rows.BlockMovable(src, seg, t.RowLen, group)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %s is not FP4, MX fp8 or block FP8 codes the move can have read: %v", t.Name, seg.Source, err)
		}
		_, sraw, err := rd.Scales(seg.Scale)
		if err != nil {
			return false, err
		}
		h.Write(sraw)
		raw, err := rd.Raw(seg, t.RowLen, 0, seg.Rows)
		if err != nil {
			return false, err
		}
		h.Write(raw)
		per := t.RowLen / seg.Block[1]
		var same bool
		if repack {
			if (seg.Row+seg.Rows)*per > int64(len(sraw)) {
				return false, fmt.Errorf("%s: no scale for row %d", seg.Scale, seg.Row+seg.Rows-1)
			}
			scales := sraw[seg.Row*per : (seg.Row+seg.Rows)*per]
			want := make([]byte, int64(len(scales))*quant.MXFP4BlockBytes)
			if err := quant.RepackMXFP4(raw, scales, want); err != nil {
				return false, err
			}
			same, err = compare(main, outRow*per*quant.MXFP4BlockBytes, want)
		} else {
			var scales []byte
			if scales, err = seg.MXScales(sraw, t.RowLen, group, 0, seg.Rows, nil); err != nil {
				return false, err
			}
			same, err = compare(main, outRow*seg.RowBytesOf(t.RowLen), raw)
			if err == nil && same {
				same, err = compare(scalesEntry, outRow*(t.RowLen/group), scales)
			}
		}
		if err != nil {
			return false, err
		}
		if !same {
			differs++
		}
		outRow += seg.Rows
	}
	sameSource := TensorSum(h) == t.SourceCRC32C
	if sameSource && differs > 0 {
		r.add("values_differ", t.File, t.Name, "%s: %d of %d segments are not the source's FP4 or FP8 codes and scales as moved", t.Name, differs, len(t.Segments))
	}
	return sameSource, nil
}

// sourceChunks streams a tensor's source rows, in segment order as the
// export read them, in chunks of verifyChunkRows rows (an even count)
// decoded to float32, so memory stays bounded however large the tensor; it
// then reports whether the source bytes match the manifest's checksum. It
// stops with ctx's error when ctx is done.
// recomputeIndices checks an integer index buffer (kept, or narrowed by
// TNarrowInt) against its source values, bytes for bytes.
func recomputeIndices(ctx context.Context, r *Report, src *st.Checkpoint, o *outFile, t *Tensor) (bool, error) {
	main, ok := o.h.Lookup(t.Name)
	if !ok {
		return false, fmt.Errorf("entry %s is missing", t.Name)
	}
	size, err := st.DType(t.DType).Size()
	if err != nil {
		return false, err
	}
	differs := 0
	same, err := sourceRows(ctx, src, t, func(c sourceChunk) error {
		want := c.raw
		if in := src.Tensors[c.seg.Source].DType; string(in) != t.DType {
			want = make([]byte, c.rows*t.RowLen*size)
			if err := quant.Narrow(string(in), t.DType, c.raw, want); err != nil {
				return err
			}
		}
		off := c.outRow * t.RowLen * size
		if off+int64(len(want)) > main.End-main.Begin {
			return fmt.Errorf("tensor %s is shorter than its manifest says", t.Name)
		}
		got := make([]byte, len(want))
		if _, err := o.f.ReadAt(got, main.Begin+off); err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			differs++
		}
		return nil
	})
	if err == nil && differs > 0 {
		r.add("values_differ", t.File, t.Name, "%s: %d chunks differ from the source's indices", t.Name, differs)
	}
	return same, err
}

// sourceChunks gives fn each chunk of the tensor's source rows decoded to
// float32, in order, and reports whether the source bytes are those the
// tensor was made from.
func sourceChunks(ctx context.Context, src *st.Checkpoint, t *Tensor, fn func(vals []float32, rows, outRow int64) error) (bool, error) {
	_, transposed := t.Has(TTranspose)
	return sourceRows(ctx, src, t, func(c sourceChunk) error {
		n := c.rows
		v := make([]float32, n*t.RowLen)
		if err := c.rd.Decode(c.seg, t.RowLen, c.row, n, c.raw, v); err != nil {
			return err
		}
		if transposed {
			tr := make([]float32, len(v))
			for r := int64(0); r < n; r++ {
				for c := int64(0); c < t.RowLen; c++ {
					tr[c*n+r] = v[r*t.RowLen+c]
				}
			}
			v = tr
		}
		return fn(v, n, c.outRow)
	})
}

// sourceRows gives fn each chunk of the tensor's source rows as stored, in
// order (a transposed segment whole), and reports whether the source bytes
// (block scales first) are those the tensor was made from.
func sourceRows(ctx context.Context, src *st.Checkpoint, t *Tensor, fn func(c sourceChunk) error) (bool, error) {
	h := NewTensorHash()
	rd := rows.NewReader(src)
	outRow := int64(0)
	for _, seg := range t.Segments {
		if err := rows.Check(src, seg, t.RowLen); err != nil {
			return false, err
		}
		for _, name := range seg.ScaleNames() { // hashed before the rows, as the export did
			_, sraw, err := rd.Scales(name)
			if err != nil {
				return false, err
			}
			h.Write(sraw)
		}
		_, transposed := t.Has(TTranspose)
		chunkRows := int64(verifyChunkRows)
		if transposed { // stored whole, [RowLen, rows]
			chunkRows = seg.Rows
		}
		for row := int64(0); row < seg.Rows; row += chunkRows {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			n := min(chunkRows, seg.Rows-row)
			raw, err := rd.Raw(seg, t.RowLen, row, n)
			if err != nil {
				return false, err
			}
			h.Write(raw)
			if err := fn(sourceChunk{rd: rd, seg: seg, row: row, rows: n, outRow: outRow, raw: raw}); err != nil {
				return false, err
			}
			outRow += n
		}
	}
	return TensorSum(h) == t.SourceCRC32C, nil
}

// sourceChunk is rows [row, row+rows) of a segment's source as stored,
// landing at output row outRow, and the reader that read them.
type sourceChunk struct {
	rd                *rows.Reader
	seg               Segment
	row, rows, outRow int64
	raw               []byte
}

const verifyChunkRows = 1024

func readF32(f *os.File, e st.TensorInfo, off, elems int64, dtype string) ([]float32, error) {
	size, err := st.DType(dtype).Size()
	if err != nil {
		return nil, err
	}
	if off < 0 || e.Begin+off+elems*size > e.End {
		return nil, fmt.Errorf("tensor %s is shorter than its manifest says", e.Name)
	}
	b := make([]byte, elems*size)
	if _, err := f.ReadAt(b, e.Begin+off); err != nil {
		return nil, err
	}
	out := make([]float32, elems)
	return out, quant.DecodeF32(dtype, b, out)
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// castAsExported is what a quantizer saw of source values: the norm's +1
// (if any), then the cast to the output dtype. v is not changed.
func castAsExported(v []float32, plusOne bool, dtype string, size int64) []float32 {
	out := make([]float32, len(v))
	copy(out, v)
	if plusOne {
		for i := range out {
			out[i]++
		}
	}
	enc := make([]byte, int64(len(out))*size)
	quant.EncodeF32(dtype, out, enc)
	quant.DecodeF32(dtype, enc, out)
	return out
}
