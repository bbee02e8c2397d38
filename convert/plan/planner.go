package plan

import (
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/rows"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// Planner accumulates the output tensors of one file, applying the fixes
// every target needs from the family's roles: the +1 of zero-centred norms,
// the conv1d relayout, dtypes kept as stored. Targets choose names, files,
// dtypes and quantization.
type Planner struct {
	M         *model.Model
	File      string
	Component string // of the tensors added next: ComponentTrunk, ComponentHead or ComponentLMHead
	// NormsStored writes zero-centred norms as stored (w), for a consumer
	// that applies 1+w itself.
	NormsStored bool
	// IndexDType, when set, is the signed integer dtype the kept integer
	// buffers (RoleKeepDType) are written as (mlx-vlm casts them to int32).
	IndexDType st.DType
	Out        []OutTensor
}

// Components of an output, as cards and summaries group tensors.
const (
	ComponentTrunk  = "trunk"
	ComponentHead   = "head"
	ComponentLMHead = "lm_head"
)

// QuantRule decides the quantization of a linear weight (src the source
// tensor, name the output, in its row length), or nil to keep it float.
type QuantRule func(src, name string, in int64) *Quant

// Plain plans a one-source tensor, renamed, as dtype (quantized by rule when
// it is a linear weight and rule says so).
func (pl *Planner) Plain(src, name string, dtype st.DType, rule QuantRule) {
	t := pl.M.Checkpoint.Tensors[src]
	shape := append([]int64{}, t.Shape...)
	rowLen := int64(1)
	if len(shape) > 0 {
		rowLen = shape[len(shape)-1]
	}
	var transforms []Transform
	if pl.M.Is(src, model.RoleZeroCentredNorm) && len(shape) == 1 && !pl.NormsStored {
		transforms = append(transforms, TNormPlusOne)
	}
	conv := pl.M.Is(src, model.RoleConv1d)
	if conv && len(shape) == 3 && shape[1] == 1 {
		shape = []int64{shape[0], shape[2], 1}
		rowLen = 1 // element order is unchanged; rows are single elements
		transforms = append(transforms, TConv1dRelayout)
	}
	if pl.M.Is(src, model.RoleKeepDType) {
		dtype = t.DType
		if pl.IndexDType != "" && t.DType.IsSignedInt() {
			dtype = pl.IndexDType
		}
	}
	var q *Quant
	if rule != nil && len(shape) >= 2 && strings.HasSuffix(name, ".weight") && !conv {
		q = rule(src, name, rowLen)
	}
	segs := []Segment{pl.Segment(src, 0, t.Elements()/rowLen)}
	if r := pl.M.RowShards(src); r != nil {
		// A tensor-parallel-sharded FP8 weight: part by part, shard by shard.
		segs = segs[:0]
		var off int64
		for _, p := range r.Parts {
			for s := range r.Shards {
				segs = append(segs, pl.Segment(src, s*r.Rows()+off, p))
			}
			off += p
		}
	}
	pl.Add(OutTensor{Name: name, Segments: segs, RowLen: rowLen, Shape: shape, DType: dtype, Transforms: transforms}, q)
}

// SplitKVB plans a multi-head latent attention kv_b_proj [heads × (nope +
// v), kv_lora] as its two halves, given to add to be typed and added: kName,
// each head's key rows transposed ([heads, kv_lora, nope], stored rows of
// nope), and vName, each head's value rows ([heads, v, kv_lora]).
func (pl *Planner) SplitKVB(src string, at model.Attention, kName, vName string, add func(OutTensor)) {
	nope, v, heads, kl := int64(at.QKNopeHeadDim), int64(at.VHeadDim), int64(at.Heads), int64(at.KVLoraRank)
	var ks, vs []Segment
	for h := range heads {
		ks = append(ks, pl.Segment(src, h*(nope+v), nope))
		vs = append(vs, pl.Segment(src, h*(nope+v)+nope, v))
	}
	add(OutTensor{Name: kName, Segments: ks, RowLen: kl, StoredRowLen: nope, Shape: []int64{heads, kl, nope}, Transforms: []Transform{TTranspose}})
	add(OutTensor{Name: vName, Segments: vs, RowLen: kl, Shape: []int64{heads, v, kl}})
}

// Segment is rows of a source tensor; an FP8 weight is read with its block
// scales (the family's checkpoint says which: Model.BlockScale).
func (pl *Planner) Segment(src string, row, rows int64) Segment {
	if seg, ok := pl.M.FP4Segment(src, row, rows); ok {
		return seg
	}
	if seg, ok := pl.M.MXFP8Segment(src, row, rows); ok {
		return seg
	}
	seg := Segment{Source: src, Row: row, Rows: rows}
	if scale, block, ok := pl.M.BlockScale(src); ok {
		seg.Scale, seg.Block, seg.ShardRows = scale, block, pl.M.ShardRows(src)
	}
	return seg
}

// Add appends a planned tensor, recording its cast and quantization.
func (pl *Planner) Add(t OutTensor, q *Quant) {
	t.File = pl.File
	t.Component = pl.Component
	for _, s := range t.Segments {
		if s.Packed == rows.PackedMXE4M3 && q != nil && q.Mode == codec.ModeMLXMXFP8 && int64(q.GroupSize) == s.Block[1] && pl.whole(t) {
			// A whole MX fp8 tensor asked as MLX mxfp8 of its own group:
			// the codes and scales already are that, exactly
			// (plan.TMoveMXFP8). Parts of one (kv_b_proj's halves) are
			// decoded and quantized again, as mlx-vlm's sanitize does.
			t.Transforms = append(t.Transforms, TMoveMXFP8)
			t.Quant, q = q, nil
			break
		}
		if s.Packed == rows.PackedMXE4M3 { // MX fp8 codes decoded with their scales first
			t.Transforms = append([]Transform{TDequantMXFP8}, t.Transforms...)
			break
		}
		if s.Packed != "" && t.DType == DTypeMXFP4 { // FP4 codes stored as ggml MXFP4: moved, not decoded
			t.Transforms = append(t.Transforms, TRepackMXFP4)
			break
		}
		if s.Packed != "" && q != nil && q.Mode == codec.ModeMLXMXFP4 && int64(q.GroupSize) == s.Block[1] {
			// FP4 asked as MLX mxfp4 of its own group: the codes and scales
			// already are that, exactly; requantizing the decoded values
			// could pick other scales.
			t.Transforms = append(t.Transforms, TMoveMXFP4)
			t.Quant, q = q, nil
			break
		}
		if s.Packed != "" { // FP4 codes decoded with their scales first
			t.Transforms = append([]Transform{TDequantFP4}, t.Transforms...)
			break
		}
		if s.Scale != "" && s.Packed == "" && q != nil && q.Mode == codec.ModeMLXMXFP8 && pl.whole(t) &&
			rows.BlockMovable(pl.M.Checkpoint, s, t.RowLen, int64(q.GroupSize)) == nil {
			// A whole block-FP8 tensor (ue8m0 scales, whole blocks) asked as
			// MLX mxfp8: its codes are mxfp8's, each block's scale repeated
			// over its groups (rows.Segment.MXScales), exactly as mlx-vlm's
			// DeepSeek-V4 sanitize keeps them.
			t.Transforms = append(t.Transforms, TMoveMXFP8)
			t.Quant, q = q, nil
			break
		}
		if s.Scale != "" && s.Packed == "" { // read with its block scales: dequantized first
			t.Transforms = append([]Transform{TDequantFP8}, t.Transforms...)
			break
		}
	}
	for _, s := range t.Segments {
		if len(s.Then) > 0 {
			t.Transforms = append([]Transform{TConcatColumns}, t.Transforms...)
			break
		}
	}
	if in := pl.M.Checkpoint.Tensors[t.Segments[0].Source].DType; t.DType != in && !t.Has(TRepackMXFP4) && !t.Has(TMoveMXFP4) && !t.Has(TMoveMXFP8) {
		cast := TCast
		if in.IsSignedInt() && t.DType.IsSignedInt() {
			cast = TNarrowInt
		}
		t.Transforms = append(t.Transforms, cast)
	}
	if q != nil {
		t.Quant = q
		t.Transforms = append(t.Transforms, TQuantize)
	}
	if emb, ok := pl.M.Concat(t.Segments[0].Source); ok && len(t.Segments) == 1 && !t.Has(TTranspose) && t.RowLen%2 == 0 {
		t.Parts = health.ConcatParts(t.RowLen, emb)
	}
	pl.Out = append(pl.Out, t)
}

// whole reports whether t is one source tensor's rows, all of them, in
// order and untransformed.
func (pl *Planner) whole(t OutTensor) bool {
	if len(t.Segments) != 1 || len(t.Transforms) > 0 {
		return false
	}
	s := t.Segments[0]
	src := pl.M.Checkpoint.Tensors[s.Source]
	return s.Row == 0 && len(s.Then) == 0 && s.Rows*t.RowLen == src.Elements()
}

// Experts plans the routed experts of blk as the family's stacked
// [E, out, in] gate, up and down weights under outLayer.
func (pl *Planner) Experts(blk model.ExpertBlock, outLayer string, dtype st.DType, rule QuantRule) {
	c, moe := pl.M.Config, pl.M.Spec.MoE
	e, h, i := int64(c.NumExperts), moe.ExpertWidth(c), int64(c.MoeIntermediateSize)
	proj := [3]struct{ out, in int64 }{{i, h}, {i, h}, {h, i}}
	for _, k := range moe.Projections() {
		p := proj[k]
		var segs []Segment
		var tr Transform
		switch {
		case blk.Layout == model.Fused && k == 2:
			segs = []Segment{pl.Segment(blk.Prefix+moe.FusedDown, 0, e*h)}
		case blk.Layout == model.Fused && moe.NoGate: // the fused tensor is the up projections alone
			segs = []Segment{pl.Segment(blk.Prefix+moe.FusedGateUp, 0, e*i)}
		case blk.Layout == model.Fused:
			tr = TSplitGateUp
			for x := int64(0); x < e; x++ {
				segs = append(segs, pl.Segment(blk.Prefix+moe.FusedGateUp, x*2*i+int64(k)*i, i))
			}
		default:
			tr = TStackExperts
			for x := 0; x < int(e); x++ {
				segs = append(segs, pl.Segment(blk.Prefix+strconv.Itoa(x)+"."+moe.PerExpert[k], 0, p.out))
			}
		}
		name := outLayer + moe.Stacked[k]
		t := OutTensor{Name: name, Segments: segs, RowLen: p.in, Shape: []int64{e, p.out, p.in}, DType: dtype}
		if tr != "" {
			t.Transforms = []Transform{tr}
		}
		var q *Quant
		if rule != nil {
			q = rule(blk.Prefix, name, p.in)
		}
		pl.Add(t, q)
	}
}

// Head plans every tensor of the MTP head, renamed by rename (applied to
// its HeadRelative name), experts stacked.
func (pl *Planner) Head(rename func(string) string, dtype st.DType, rule QuantRule, keep func(string) bool) {
	pl.Component = ComponentHead
	for _, n := range pl.M.HeadTensors() {
		if keep != nil && !keep(n) {
			continue
		}
		pl.Plain(n, rename(pl.M.HeadRelative(n)), dtype, rule)
	}
	for j, blk := range pl.M.MTPExperts {
		pl.Experts(blk, rename("layers."+strconv.Itoa(j)+"."), dtype, rule)
	}
}
