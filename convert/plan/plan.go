// Package plan is the export as pure data: every output tensor as row
// segments of source tensors with its transforms, precision and file
// (Plan), the byte layout of each output file, and the Planner that applies
// the fixes every target needs from a family's roles. No I/O.
package plan

import (
	"fmt"
	"slices"
	"sort"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/rows"
	"github.com/mtpconv/mtpconv/formats/gguf"
	ov "github.com/mtpconv/mtpconv/formats/openvino"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// Transform names a step applied to an output tensor; the manifest records it.
type Transform = manifests.TransformName

// The transforms, in the order they apply.
const (
	TNormPlusOne    = manifests.TNormPlusOne
	TConv1dRelayout = manifests.TConv1dRelayout
	TSplitGateUp    = manifests.TSplitGateUp
	TStackExperts   = manifests.TStackExperts
	TCast           = manifests.TCast
	TNarrowInt      = manifests.TNarrowInt
	TQuantize       = manifests.TQuantize
	TDequantFP8     = manifests.TDequantFP8
	TTranspose      = manifests.TTranspose
	TDequantFP4     = manifests.TDequantFP4
	TRepackMXFP4    = manifests.TRepackMXFP4
	TConcatColumns  = manifests.TConcatColumns
	TMoveMXFP4      = manifests.TMoveMXFP4
	TDequantMXFP8   = manifests.TDequantMXFP8
	TMoveMXFP8      = manifests.TMoveMXFP8
)

// Segment is a run of rows of a source tensor viewed as [rows, RowLen],
// with, for an FP8 weight, the block scales it is read with.
type Segment = rows.Segment

// Quant describes how an output tensor is quantized.
type Quant struct {
	Mode      QuantMode `json:"mode"`
	Bits      int       `json:"bits"`
	GroupSize int       `json:"group_size"`          // nncf: <= 0 per output channel
	Rounding  string    `json:"rounding,omitempty"`  // mlx_affine: "gpu" or "cpu"
	Sym       bool      `json:"sym,omitempty"`       // nncf
	GGMLType  string    `json:"ggml_type,omitempty"` // ggml: the block type (Q8_0, Q4_K, ...)
}

// QuantMode names a quantization scheme; its codec (quant/codec) is
// everything the mode means.
type QuantMode = codec.Mode

// Params are the quantization's parameters as its codec takes them.
func (q *Quant) Params() codec.Params {
	return codec.Params{Bits: q.Bits, Group: q.GroupSize, Sym: q.Sym, Rounding: q.Rounding, GGMLType: q.GGMLType}
}

// Codec is the quantization's codec (planned modes are known ones).
func (q *Quant) Codec() codec.Codec {
	c, err := codec.For(q.Mode)
	if err != nil {
		panic("plan: " + err.Error()) // targets plan only the modes of codec
	}
	return c
}

// OutTensor is one output tensor: where its rows come from, what is done to
// them, and what is written. A quantized tensor named X.weight is written as
// X.weight (U32 packed), X.scales and X.biases (DType).
type OutTensor struct {
	Name      string    `json:"name"`
	Component string    `json:"component"`
	File      string    `json:"file"`
	Segments  []Segment `json:"segments"`
	RowLen    int64     `json:"row_len"`
	// StoredRowLen is the length of the rows as stored, which quantization
	// groups, when it is not RowLen: a transposed tensor stores each
	// segment's [rows, RowLen] block as [RowLen, rows], so its stored rows
	// are as long as a segment is high. 0 means RowLen.
	StoredRowLen int64       `json:"stored_row_len,omitempty"`
	Shape        []int64     `json:"shape"`
	DType        st.DType    `json:"dtype"`
	Transforms   []Transform `json:"transforms"`
	Quant        *Quant      `json:"quant,omitempty"`
	// Parts are input columns whose quantization error is measured on
	// their own: the embedding and hidden halves of the concat projection.
	Parts []health.Part `json:"parts,omitempty"`
}

// Rows is the number of rows of the output.
func (t *OutTensor) Rows() int64 {
	var n int64
	for _, s := range t.Segments {
		n += s.Rows
	}
	return n
}

// StoredRow is the length of the tensor's stored rows.
func (t *OutTensor) StoredRow() int64 {
	if t.StoredRowLen > 0 {
		return t.StoredRowLen
	}
	return t.RowLen
}

// Sources lists the distinct source tensors in order, block scales after their weight.
func (t *OutTensor) Sources() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Segments {
		for _, n := range []string{s.Source, s.Scale} {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// SourceNames lists every source tensor the plan reads, once each.
func (p *Plan) SourceNames() []string {
	var out []string
	seen := map[string]bool{}
	for i := range p.Tensors {
		for _, s := range p.Tensors[i].Sources() {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Has reports whether the tensor carries a transform.
func (t *OutTensor) Has(transform Transform) bool {
	for _, x := range t.Transforms {
		if x == transform {
			return true
		}
	}
	return false
}

// Entries are the safetensors entries the tensor becomes.
func (t *OutTensor) Entries() []st.Entry {
	if t.Quant == nil {
		return []st.Entry{{Name: t.Name, DType: t.DType, Shape: t.Shape}}
	}
	return t.Quant.Codec().Entries(t.Name, t.Shape, t.DType, t.Quant.Params())
}

// OutFile is a file of the output folder that is not a tensor file.
type OutFile struct {
	Name     string `json:"name"`
	Contents []byte `json:"-"`      // written as is, when set
	CopyFrom string `json:"source"` // else copied from the source checkpoint
}

// FileFormat is how a tensor file lays out its entries.
type FileFormat string

const (
	// FormatSafetensors: a safetensors header, then the entries in name order.
	FormatSafetensors FileFormat = ""
	// FormatOpenVINOBin: an OpenVINO weights .bin, entries back to back at the
	// format's alignment, placed by the manifest (no header).
	FormatOpenVINOBin FileFormat = "openvino_bin"
	// FormatGGUF: a GGUF header (Plan.GGUF metadata, tensor infos in plan
	// order), then the tensors at the format's alignment; the manifest places
	// each entry.
	FormatGGUF FileFormat = "gguf"
)

// GGUFCopy makes a GGUF tensor file hold another GGUF file's tensors, their
// bytes copied unchanged, next to the planned ones: Order lists every tensor
// of the file in file order, and those the plan does not hold come from
// Source, whose size and header hash the plan was made from. Metadata, when
// set, is the file's own (a member of a split set: each file has its
// split.no), in place of the plan's GGUF.
type GGUFCopy struct {
	Source       string    `json:"source"`
	Size         int64     `json:"size"`
	HeaderSHA256 string    `json:"header_sha256"`
	Order        []string  `json:"order"`
	Metadata     []gguf.KV `json:"metadata,omitempty"`
}

// Plan is a whole export, decided before any tensor byte is read.
type Plan struct {
	Target      string                `json:"target"`
	Options     map[string]string     `json:"options"`
	Tensors     []OutTensor           `json:"tensors"`
	TensorFiles []string              `json:"tensor_files"`
	Formats     map[string]FileFormat `json:"formats,omitempty"` // of tensor files not in safetensors
	Metadata    map[string]string     `json:"metadata"`          // safetensors __metadata__
	GGUF        []gguf.KV             `json:"gguf,omitempty"`    // GGUF files' metadata
	GGUFCopies  map[string]*GGUFCopy  `json:"gguf_copies,omitempty"`
	Files       []OutFile             `json:"files"`
	Notes       []string              `json:"notes"` // what the user should know (printed by export)

	// --into by an IntoPlanner: the folder's own files among Files (each
	// planned from the bytes IntoBase read), and the folder's files the
	// output builds on, recorded so verify can tell they are unchanged.
	IntoUpdates []IntoUpdate `json:"into_updates,omitempty"`
	IntoKept    []string     `json:"into_kept,omitempty"`
}

// IntoUpdate is a file of the --into folder that the plan rewrites; SHA256
// is the file's as it was when planned, so a change made meanwhile is
// refused rather than lost.
type IntoUpdate struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// Interim, when set, is what the file holds while the output's files
	// move in: it replaces the folder's file before any of them, and the
	// planned version replaces it after all of them (once, first, when the
	// two are equal). An HF repo's config.json excludes the head from the
	// quantization before the index lists it, so that a run stopped at any
	// step leaves a repo that builds whatever head it lists unquantized.
	Interim []byte `json:"-"`
}

// FileEntries returns the entries of a tensor file, sorted by name, and the
// output tensor each belongs to.
func (p *Plan) FileEntries(file string) ([]st.Entry, []*OutTensor) {
	type pair struct {
		e st.Entry
		t *OutTensor
	}
	var pairs []pair
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.File != file {
			continue
		}
		for _, e := range t.Entries() {
			pairs = append(pairs, pair{e, t})
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].e.Name < pairs[j].e.Name })
	es := make([]st.Entry, len(pairs))
	ts := make([]*OutTensor, len(pairs))
	for i, pr := range pairs {
		es[i], ts[i] = pr.e, pr.t
	}
	return es, ts
}

// Validate checks the plan against the source inventory: every segment in
// range, rows consistent with shapes, names unique.
func (p *Plan) Validate(ck *st.Checkpoint) error {
	seen := map[string]bool{}
	for _, t := range p.Tensors {
		for _, e := range t.Entries() {
			key := t.File + "\x00" + e.Name
			if seen[key] {
				return fmt.Errorf("plan: %s: tensor %s twice", t.File, e.Name)
			}
			seen[key] = true
		}
		elems := int64(1)
		for _, d := range t.Shape {
			elems *= d
		}
		if t.RowLen <= 0 || t.Rows()*t.RowLen != elems {
			return fmt.Errorf("plan: %s: %d rows of %d do not make shape %v", t.Name, t.Rows(), t.RowLen, t.Shape)
		}
		for _, s := range t.Segments {
			src, ok := ck.Tensors[s.Source]
			if !ok {
				return fmt.Errorf("plan: %s: source %s is not in the checkpoint", t.Name, s.Source)
			}
			if err := rows.Check(ck, s, t.RowLen); err != nil {
				return fmt.Errorf("plan: %s: %w", t.Name, err)
			}
			if src.DType == st.F8E4M3 && s.Scale == "" && (t.DType != st.F8E4M3 || len(t.Transforms) > 0 || t.Quant != nil) {
				return fmt.Errorf("plan: %s: FP8 weight %s is read without its block scale, so its codes can only be copied as they are", t.Name, s.Source)
			}
			if err := t.checkRepack(s); err != nil {
				return fmt.Errorf("plan: %s: %w", t.Name, err)
			}
			if t.Has(TMoveMXFP8) && s.Packed == "" {
				if err := rows.BlockMovable(ck, s, t.RowLen, int64(t.Quant.GroupSize)); err != nil {
					return fmt.Errorf("plan: %s: an mxfp8 move of block FP8: %w", t.Name, err)
				}
			}
			if n := s.SourceRows(src, t.RowLen); len(s.Then) == 0 && s.Values(src)%t.RowLen != 0 || s.Row < 0 || s.Rows < 0 || s.Row+s.Rows > n {
				return fmt.Errorf("plan: %s: rows [%d, %d) of %s (shape %v) out of range", t.Name, s.Row, s.Row+s.Rows, s.Source, src.Shape)
			}
		}
		stored := t.StoredRow()
		if err := t.checkStoredRows(); err != nil {
			return fmt.Errorf("plan: %s: %w", t.Name, err)
		}
		if t.Quant != nil && t.Quant.GroupSize > 0 && stored%int64(t.Quant.GroupSize) != 0 {
			return fmt.Errorf("plan: %s: stored row length %d not a multiple of group size %d", t.Name, stored, t.Quant.GroupSize)
		}
		if q := t.Quant; q != nil {
			c, err := codec.For(q.Mode)
			if err != nil {
				return fmt.Errorf("plan: %s: %w", t.Name, err)
			}
			for _, sg := range t.Segments {
				if err := c.SegmentRows(q.Params(), stored, sg.Rows*t.RowLen/stored); err != nil {
					return fmt.Errorf("plan: %s: %w", t.Name, err)
				}
			}
		}

	}
	return nil
}

// checkRepack refuses a raw MXFP4 transfer of anything but whole rows of
// FP4 codes stored as they are, and FP4 codes read without a decoder.
func (t *OutTensor) checkRepack(s Segment) error {
	repack, move, move8 := t.Has(TRepackMXFP4), t.Has(TMoveMXFP4), t.Has(TMoveMXFP8)
	raw := func(x Transform) bool {
		return x != TRepackMXFP4 && x != TMoveMXFP4 && x != TMoveMXFP8 && x != TStackExperts
	}
	switch {
	case move8 && (t.Quant == nil || t.Quant.Mode != codec.ModeMLXMXFP8 || len(s.Block) != 2 ||
		s.Packed == rows.PackedMXE4M3 && int64(t.Quant.GroupSize) != s.Block[1] || s.Packed == "" && (s.Scale == "" || s.Block[1]%int64(t.Quant.GroupSize) != 0) ||
		s.Packed != "" && s.Packed != rows.PackedMXE4M3):
		return fmt.Errorf("an mxfp8 move stores MX fp8 codes with a scale per group, or block FP8 codes with a scale per whole groups, as MLX's mxfp8 of that group; %s is not such a tensor, or the tensor is not mxfp8 of its group", s.Source)
	case move8 && slices.ContainsFunc(t.Transforms, raw):
		return fmt.Errorf("an mxfp8 move stores the codes as they are, with no transform on values")
	case s.Packed == rows.PackedMXE4M3 && !move8 && !t.Has(TDequantMXFP8):
		return fmt.Errorf("%s is MX fp8 codes: read only decoded with its scales or moved as MLX mxfp8", s.Source)
	case move && (s.Packed != rows.PackedE2M1 || len(s.Block) != 2 || t.Quant == nil || t.Quant.Mode != codec.ModeMLXMXFP4 || int64(t.Quant.GroupSize) != s.Block[1]):
		return fmt.Errorf("an mxfp4 move stores FP4 codes with a scale per group as MLX's mxfp4 of that group; %s is not such a tensor, or the tensor is not mxfp4 of its group", s.Source)
	case move && slices.ContainsFunc(t.Transforms, raw):
		return fmt.Errorf("an mxfp4 move stores the codes as they are, with no transform on values")
	case repack && (s.Packed != rows.PackedE2M1 || len(s.Block) != 2 || s.Block[1] != 32):
		return fmt.Errorf("an MXFP4 repack moves FP4 codes with a scale per 32 values; %s is not such a tensor", s.Source)
	case repack && (t.Quant != nil || t.DType != DTypeMXFP4 || slices.ContainsFunc(t.Transforms, raw)):
		return fmt.Errorf("an MXFP4 repack is stored %s as it is, with no transform on values", DTypeMXFP4)
	case !repack && t.DType == DTypeMXFP4:
		return fmt.Errorf("%s is only written by an MXFP4 repack of FP4 codes", DTypeMXFP4)
	}
	return nil
}

// DTypeMXFP4 is the stored type of a raw MXFP4 transfer (ggml's MXFP4 blocks).
const DTypeMXFP4 st.DType = "MXFP4"

// checkStoredRows refuses stored rows the executor could not fill exactly:
// rows as long as the shape's last dimension, and, for a transposed tensor,
// each segment's block exactly one segment high (its stored rows).
func (t *OutTensor) checkStoredRows() error {
	stored := t.StoredRow()
	transposed := t.Has(TTranspose)
	if !transposed {
		if stored != t.RowLen {
			return fmt.Errorf("stored row length %d differs from the row length %d of a tensor that is not transposed", stored, t.RowLen)
		}
		return nil
	}
	if len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] != stored {
		return fmt.Errorf("stored row length %d is not the last dimension of shape %v", stored, t.Shape)
	}
	for _, s := range t.Segments {
		if s.Rows != stored {
			return fmt.Errorf("a transposed segment of %d rows of %s does not make stored rows of %d", s.Rows, s.Source, stored)
		}
	}
	return nil
}

// SourceRanges lists, per shard, the byte ranges [begin, end) the plan reads,
// so a remote source can fetch exactly those.
func (p *Plan) SourceRanges(ck *st.Checkpoint) map[string][][2]int64 {
	out := map[string][][2]int64{}
	for _, t := range p.Tensors {
		for _, s := range t.Segments {
			src := ck.Tensors[s.Source]
			rb, _ := s.RowBytes(src, t.RowLen)
			b := src.Begin + s.Row*rb
			out[src.Shard.Name] = append(out[src.Shard.Name], [2]int64{b, b + s.Rows*rb})
			for _, c := range s.Then {
				pt := ck.Tensors[c.Source]
				size, _ := pt.DType.Size()
				b := pt.Begin + s.Row*c.Cols*size
				out[pt.Shard.Name] = append(out[pt.Shard.Name], [2]int64{b, b + s.Rows*c.Cols*size})
				if sc, ok := ck.Tensors[c.Scale]; ok && c.Scale != "" {
					out[sc.Shard.Name] = append(out[sc.Shard.Name], [2]int64{sc.Begin, sc.End})
				}
			}
			if sc, ok := ck.Tensors[s.Scale]; ok && s.Scale != "" {
				out[sc.Shard.Name] = append(out[sc.Shard.Name], [2]int64{sc.Begin, sc.End})
			}
		}
	}
	return out
}

// FileLayout is where every entry of a tensor file goes.
type FileLayout struct {
	Entries []st.Entry
	Owners  []*OutTensor
	Offsets map[string]int64
	Sizes   map[string]int64
	Header  []byte // safetensors header; empty for a raw OpenVINO .bin
	Size    int64  // bytes of tensor data and header
	// Copies are byte ranges of CopySource copied into the file unchanged.
	Copies     []gguf.Copy
	CopySource string
}

// Layout places the entries of a tensor file: after a safetensors header, or
// as its format package places them.
func (p *Plan) Layout(file string) (*FileLayout, error) {
	entries, owners := p.FileEntries(file)
	lay := &FileLayout{Entries: entries, Owners: owners, Offsets: map[string]int64{}, Sizes: map[string]int64{}}
	if p.Formats[file] == FormatGGUF {
		return p.layoutGGUF(file, lay)
	}
	if p.Formats[file] == FormatOpenVINOBin {
		sizes := make([]int64, len(entries))
		for i, e := range entries {
			sizes[i] = EntryBytes(e)
		}
		offsets, total := ov.PlaceWeights(sizes)
		for i, e := range entries {
			lay.Offsets[e.Name], lay.Sizes[e.Name] = offsets[i], sizes[i]
		}
		lay.Size = total
		return lay, nil
	}
	hdr, sizes, err := st.EncodeHeader(entries, p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	lay.Header = hdr
	off := int64(len(hdr))
	for i, e := range entries {
		lay.Offsets[e.Name], lay.Sizes[e.Name] = off, sizes[i]
		off += sizes[i]
	}
	lay.Size = off
	return lay, nil
}

// EntryBytes is the stored size of an entry; U4 and I4 pack two per byte.
func EntryBytes(e st.Entry) int64 {
	n := int64(1)
	for _, d := range e.Shape {
		n *= d
	}
	switch e.DType {
	case "U4", "I4":
		return (n + 1) / 2
	}
	if gt, ok := gguf.ParseType(string(e.DType)); ok && gt.Quantized() {
		b, _ := gt.RowBytes(n)
		return b
	}
	size, _ := e.DType.Size()
	return n * size
}

// layoutGGUF places a GGUF file: the header (the plan's GGUF metadata and one
// tensor info per entry, in plan order), then each entry at the alignment.
// Shapes are written innermost first, as ggml counts dimensions.
func (p *Plan) layoutGGUF(file string, lay *FileLayout) (*FileLayout, error) {
	var entries []st.Entry
	var owners []*OutTensor
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.File != file {
			continue
		}
		for _, e := range t.Entries() {
			entries = append(entries, e)
			owners = append(owners, t)
		}
	}
	lay.Entries, lay.Owners = entries, owners
	sizes := make([]int64, len(entries))
	infos := make([]gguf.TensorInfo, len(entries))
	for i, e := range entries {
		sizes[i] = EntryBytes(e)
		gt, ok := gguf.ParseType(string(e.DType))
		if !ok {
			return nil, fmt.Errorf("%s: tensor %s: %s is not a ggml type", file, e.Name, e.DType)
		}
		dims := make([]int64, len(e.Shape))
		for j, d := range e.Shape {
			dims[len(e.Shape)-1-j] = d
		}
		infos[i] = gguf.TensorInfo{Name: e.Name, Dims: dims, Type: gt}
	}
	if c := p.GGUFCopies[file]; c != nil {
		return p.assembleGGUF(file, c, infos, lay)
	}
	offs, total := gguf.Place(sizes, gguf.DefaultAlignment)
	for i := range infos {
		infos[i].Offset = offs[i]
	}
	hdr, err := gguf.EncodeHeader(p.GGUF, infos)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	lay.Header = hdr
	for i, e := range entries {
		lay.Offsets[e.Name], lay.Sizes[e.Name] = int64(len(hdr))+offs[i], sizes[i]
	}
	lay.Size = int64(len(hdr)) + total
	return lay, nil
}

// assembleGGUF places a GGUF file that holds a source GGUF's tensors
// (copied) and the planned ones, in the order the plan gives.
func (p *Plan) assembleGGUF(file string, c *GGUFCopy, planned []gguf.TensorInfo, lay *FileLayout) (*FileLayout, error) {
	src, err := OpenGGUFCopySource(c)
	if err != nil {
		return nil, err
	}
	ours := map[string]gguf.TensorInfo{}
	for _, t := range planned {
		ours[t.Name] = t
	}
	theirs := map[string]gguf.TensorInfo{}
	for _, t := range src.Tensors {
		theirs[t.Name] = t
	}
	parts := make([]gguf.Part, 0, len(c.Order))
	for _, n := range c.Order {
		if t, ok := ours[n]; ok {
			parts = append(parts, gguf.Part{Info: t})
		} else if t, ok := theirs[n]; ok {
			parts = append(parts, gguf.Part{Info: t, Copied: true, From: t.Offset})
		} else {
			return nil, fmt.Errorf("%s: tensor %s is neither planned nor in %s", file, n, c.Source)
		}
	}
	if len(parts) != len(c.Order) || len(ours) > len(c.Order) {
		return nil, fmt.Errorf("%s: the tensor order does not list every planned tensor", file)
	}
	kvs := p.GGUF
	if c.Metadata != nil {
		kvs = c.Metadata
	}
	a, err := gguf.Assemble(kvs, parts, src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	lay.Header, lay.Size, lay.Copies, lay.CopySource = a.Header, a.Size, a.Copies, c.Source
	for _, e := range lay.Entries {
		lay.Offsets[e.Name], lay.Sizes[e.Name] = a.Offsets[e.Name], a.Sizes[e.Name]
	}
	return lay, nil
}

// OpenGGUFCopySource reads the header of a GGUF file the plan copies
// tensors from, refusing it when it is not the file the plan was made from.
func OpenGGUFCopySource(c *GGUFCopy) (*gguf.File, error) {
	f, size, sum, err := gguf.OpenFingerprint(c.Source)
	if err != nil {
		return nil, err
	}
	if size != c.Size || sum != c.HeaderSHA256 {
		return nil, fmt.Errorf("%s changed since the export was planned", c.Source)
	}
	return f, nil
}
