package run

import (
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant"
)

// MLX's microscaling modes (quant/mlxfp.go).
const (
	ModeMLXMXFP4 = manifests.ModeMLXMXFP4
	ModeMLXMXFP8 = manifests.ModeMLXMXFP8
	ModeMLXNVFP4 = manifests.ModeMLXNVFP4
)

// piece is bytes for one stored entry covering some rows, which start at
// byte outRow*num/den of the entry (den is 2 for nibble-packed zero points).
type piece struct {
	name     string
	data     []byte
	num, den int64
}

func (p piece) offset(outRow int64) int64 {
	if p.den == 0 {
		return outRow * p.num
	}
	return outRow * p.num / p.den
}

// chunkQuantizer turns rows of cast values into the stored entries of one mode.
// The pieces it returns live in bufs until its next call.
type chunkQuantizer interface {
	quantize(vals []float32, rows int64, qe *quant.ErrStats, bufs *quantBufs) []piece
}

// quantBufs are one worker's quantization buffers.
type quantBufs struct {
	packed, sEnc, bEnc, codesPacked, zpsPacked []byte
	codes, zps                                 []uint8
	s, b                                       []float32
}

func newChunkQuantizer(t *plan.OutTensor) (chunkQuantizer, error) {
	base := strings.TrimSuffix(t.Name, ".weight")
	switch t.Quant.Mode {
	case plan.ModeMLXAffine:
		r, err := quant.ParseMLXRounding(t.Quant.Rounding)
		if err != nil {
			return nil, err
		}
		p := quant.MLXAffineParams{Bits: t.Quant.Bits, GroupSize: t.Quant.GroupSize, Rounding: r}
		return &mlxChunks{t: t, base: base, p: p}, p.Validate(int(t.RowLen))
	case ModeMLXMXFP4, ModeMLXMXFP8, ModeMLXNVFP4:
		r, err := quant.ParseMLXRounding(t.Quant.Rounding)
		if err != nil {
			return nil, err
		}
		mode, _ := t.Quant.Mode.MLXFP()
		p := quant.MLXFPParams{Mode: mode, Rounding: r}
		if t.Quant.Bits != p.Mode.Bits() || t.Quant.GroupSize != p.Mode.GroupSize() {
			return nil, fmt.Errorf("%s: %s is %d-bit in groups of %d, not %d-bit in groups of %d", t.Name, t.Quant.Mode,
				p.Mode.Bits(), p.Mode.GroupSize(), t.Quant.Bits, t.Quant.GroupSize)
		}
		return &mlxFPChunks{t: t, base: base, p: p}, p.Validate(int(t.RowLen))
	case plan.ModeGGML:
		qk, bs, err := quant.GGMLBlock(t.Quant.GGMLType)
		if err != nil {
			return nil, err
		}
		if t.RowLen%int64(qk) != 0 {
			return nil, fmt.Errorf("%s: rows of %d are not whole %s blocks", t.Name, t.RowLen, t.Quant.GGMLType)
		}
		return &ggmlChunks{t: t, rowBytes: t.RowLen / int64(qk) * int64(bs)}, nil
	case plan.ModeNNCF:
		p := quant.NNCFParams{Bits: t.Quant.Bits, Sym: t.Quant.Sym, GroupSize: t.Quant.GroupSize}
		return &nncfChunks{t: t, base: base, p: p}, p.Validate(int(t.RowLen))
	}
	return nil, fmt.Errorf("quantization mode %q", t.Quant.Mode)
}

// mlxChunks writes MLX affine: packed U32 codes, scales and biases in the weight dtype.
type mlxChunks struct {
	t    *plan.OutTensor
	base string
	p    quant.MLXAffineParams
}

func (m *mlxChunks) quantize(vals []float32, rows int64, qe *quant.ErrStats, q *quantBufs) []piece {
	t, p := m.t, m.p
	outSize, _ := t.DType.Size()
	q.packed, q.s, q.b = quant.QuantizeMLXAffineStats(vals, int(t.RowLen), p, q.packed[:0], q.s[:0], q.b[:0], string(t.DType), qe)
	groups := t.RowLen / int64(p.GroupSize)
	q.sEnc = growBytes(q.sEnc, int64(len(q.s))*outSize)
	q.bEnc = growBytes(q.bEnc, int64(len(q.b))*outSize)
	quant.EncodeF32(string(t.DType), q.s, q.sEnc)
	quant.EncodeF32(string(t.DType), q.b, q.bEnc)
	rowBytes := int64(p.PackedWords(int(t.RowLen)) * 4)
	return []piece{{t.Name, q.packed, rowBytes, 1}, {m.base + ".scales", q.sEnc, groups * outSize, 1}, {m.base + ".biases", q.bEnc, groups * outSize, 1}}
}

// mlxFPChunks writes MLX's microscaling modes: packed U32 codes and U8 scales.
type mlxFPChunks struct {
	t    *plan.OutTensor
	base string
	p    quant.MLXFPParams
}

func (m *mlxFPChunks) quantize(vals []float32, rows int64, qe *quant.ErrStats, q *quantBufs) []piece {
	t, p := m.t, m.p
	q.packed, q.sEnc = quant.QuantizeMLXFP(vals, int(t.RowLen), p, string(t.DType), q.packed[:0], q.sEnc[:0], qe)
	groups := t.RowLen / int64(p.Mode.GroupSize())
	return []piece{{t.Name, q.packed, int64(p.RowBytes(int(t.RowLen))), 1}, {m.base + ".scales", q.sEnc, groups, 1}}
}

// nncfChunks writes NNCF's layout: integer codes (nibble-packed for 4 bits),
// f16 scales and, for asymmetric modes, zero points of the codes' type.
type nncfChunks struct {
	t    *plan.OutTensor
	base string
	p    quant.NNCFParams
}

func (n *nncfChunks) quantize(vals []float32, rows int64, qe *quant.ErrStats, q *quantBufs) []piece {
	t, p := n.t, n.p
	q.codes, q.s, q.zps = quant.QuantizeNNCFStats(vals, int(t.RowLen), p, q.codes[:0], q.s[:0], q.zps[:0], qe)
	g := int64(p.Group(int(t.RowLen)))
	groups := t.RowLen / g
	q.sEnc = growBytes(q.sEnc, int64(2*len(q.s)))
	quant.EncodeF32("F16", q.s, q.sEnc)

	codes, zps, den := []byte(q.codes), []byte(q.zps), int64(1)
	if p.Bits == 4 {
		// Two codes per byte; the plan keeps outRow*groups even for zero points.
		q.codesPacked = quant.PackNibbles(q.codes, q.codesPacked[:0])
		q.zpsPacked = quant.PackNibbles(q.zps, q.zpsPacked[:0])
		codes, zps, den = q.codesPacked, q.zpsPacked, 2
	}
	pieces := []piece{{t.Name, codes, t.RowLen, den}, {n.base + ".scale", q.sEnc, groups * 2, 1}}
	if !p.Sym {
		pieces = append(pieces, piece{n.base + ".zero_point", zps, groups, den})
	}
	return pieces
}

// ggmlChunks writes ggml blocks (llama.cpp's Q8_0, Q4_0, ...): one entry,
// rows of blocks back to back.
type ggmlChunks struct {
	t        *plan.OutTensor
	rowBytes int64
}

func (g *ggmlChunks) quantize(vals []float32, rows int64, qe *quant.ErrStats, q *quantBufs) []piece {
	// The type and row length were checked when the quantizer was made.
	q.packed, _ = quant.QuantizeGGML(g.t.Quant.GGMLType, vals, int(g.t.RowLen), q.packed[:0], qe)
	return []piece{{g.t.Name, q.packed, g.rowBytes, 1}}
}
