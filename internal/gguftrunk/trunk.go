// Package gguftrunk writes the trunk of a Qwen hybrid fixture as the bf16
// GGUF llama.cpp's reference converter writes without the MTP head, for the
// tests that pair it with an mtpconv sidecar. Test tooling: it names the
// Qwen hybrids' trunk tensors, which no target does.
package gguftrunk

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/quant"
)

// WriteTrunk writes the trunk of a checkpoint (a family whose trunk tensors
// all have names in its GGUF table, or a Qwen3.5/3.6 (MoE or dense) or Qwen3-Next one)
// as a bf16 GGUF without its MTP head, as convert_hf_to_gguf.py --no-mtp
// lays it out (Qwen3.5: linear-attention V heads reordered to tiled order;
// Qwen3-Next: in_proj_qkvz split into attn_qkv and attn_gate, in_proj_ba as
// ssm_ba; both: A_log as -exp(A_log), conv1d squeezed, norms shifted; a
// dense MLP as ffn_gate, ffn_up, ffn_down), for
// the interop tests that pair it with a sidecar. It holds every tensor in memory: it is meant for the tiny
// fixtures, not for real checkpoints.
func WriteTrunk(m *model.Model, path string) error {
	if m.Family.GGUF.Arch == "" {
		return fmt.Errorf("WriteTrunk: family %s is not supported", m.Family)
	}
	next := m.Family.Name == "qwen3_next"
	layerNames := m.Family.GGUF.Layer
	if err := m.TrunkError(); err != nil {
		return err
	}
	h, vocab, err := hparamsAndVocab(m)
	if err != nil {
		return err
	}
	c := m.Config
	tp := m.TextPrefix
	type tensor struct {
		name  string
		shape []int64 // PyTorch order
		typ   gg.GGMLType
		data  []byte
	}
	var out []tensor
	read := func(name string) ([]float32, []int64, error) {
		t, ok := m.Checkpoint.Tensors[name]
		if !ok {
			return nil, nil, fmt.Errorf("%s is missing", name)
		}
		raw, err := m.Checkpoint.ReadTensor(t, nil)
		if err != nil {
			return nil, nil, err
		}
		vals := make([]float32, t.Elements())
		if err := quant.DecodeF32(string(t.DType), raw, vals); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return vals, append([]int64{}, t.Shape...), nil
	}
	emit := func(name string, vals []float32, shape []int64) {
		typ := gg.BF16
		if len(shape) <= 1 || strings.HasSuffix(name, "_norm.weight") || !strings.HasSuffix(name, ".weight") ||
			strings.Contains(name, "ffn_gate_inp") || strings.Contains(name, "ssm_conv1d") {
			typ = gg.F32
		}
		var data []byte
		if typ == gg.F32 {
			data = make([]byte, 4*len(vals))
			quant.EncodeF32("F32", vals, data)
		} else {
			data = make([]byte, 2*len(vals))
			quant.EncodeF32("BF16", vals, data)
		}
		out = append(out, tensor{name, shape, typ, data})
	}
	plain := func(src, name string, plusOne bool) error {
		vals, shape, err := read(src)
		if err != nil {
			return err
		}
		if plusOne {
			for i := range vals {
				vals[i]++
			}
		}
		emit(name, vals, shape)
		return nil
	}
	// The tensors the converter computes from the config (rope_freqs) first, as it writes them.
	if cs := m.Family.GGUF.Computed; cs != nil {
		for _, ct := range cs(m) {
			if err := computed.Attach(m.Checkpoint, []string{ct.Source}); err != nil {
				return err
			}
			if err := plain(ct.Source, ct.Name.In(-1), false); err != nil {
				return err
			}
		}
	}
	if err := plain(tp+"embed_tokens.weight", "token_embd.weight", false); err != nil {
		return err
	}
	shiftFinal := false
	for _, w := range m.Spec.TrunkTop {
		shiftFinal = shiftFinal || w.Suffix == "norm.weight" && w.Role&model.RoleZeroCentredNorm != 0
	}
	if err := plain(tp+"norm.weight", "output_norm.weight", shiftFinal); err != nil {
		return err
	}
	if m.Spec.LMHead != nil {
		if err := plain(m.Spec.LMHead.Suffix, "output.weight", false); err != nil {
			return err
		}
	}
	// experts stacks the routed experts of the layer under lp as block b's.
	experts := func(lp, b string) error {
		moe := m.Spec.MoE
		var blk *model.ExpertBlock
		for k := range m.TrunkExperts {
			if m.TrunkExperts[k].Prefix == lp+moe.Experts {
				blk = &m.TrunkExperts[k]
			}
		}
		if blk == nil {
			return fmt.Errorf("%s: no routed experts", lp)
		}
		e, hs, is := c.NumExperts, c.HiddenSize, c.MoeIntermediateSize
		var gate, up, down []float32
		if blk.Layout == model.Fused {
			gu, _, err := read(blk.Prefix + moe.FusedGateUp)
			if err != nil {
				return err
			}
			for x := 0; x < e; x++ {
				base := x * 2 * is * hs
				gate = append(gate, gu[base:base+is*hs]...)
				up = append(up, gu[base+is*hs:base+2*is*hs]...)
			}
			if down, _, err = read(blk.Prefix + moe.FusedDown); err != nil {
				return err
			}
		} else {
			for x := 0; x < e; x++ {
				for k, dst := range []*[]float32{&gate, &up, &down} {
					v, _, err := read(blk.Prefix + strconv.Itoa(x) + "." + moe.PerExpert[k])
					if err != nil {
						return err
					}
					*dst = append(*dst, v...)
				}
			}
		}
		emit(b+"ffn_gate_exps.weight", gate, []int64{int64(e), int64(is), int64(hs)})
		emit(b+"ffn_up_exps.weight", up, []int64{int64(e), int64(is), int64(hs)})
		emit(b+"ffn_down_exps.weight", down, []int64{int64(e), int64(hs), int64(is)})
		return nil
	}
	nk, nv := c.LinearNumKeyHeads, c.LinearNumValueHeads
	kd, hv := c.LinearNumKeyHeads*c.LinearKeyHeadDim, c.LinearValueHeadDim
	reorder := func(vals []float32, rowLen, firstRow, headDim int) {
		if nk == nv || next { // Qwen3-Next keeps the grouped V order
			return
		}
		v := vals[firstRow*rowLen:]
		perm := make([]float32, len(v))
		per := nv / nk
		block := headDim * rowLen
		for k := 0; k < nk; k++ {
			for j := 0; j < per; j++ {
				copy(perm[(j*nk+k)*block:(j*nk+k+1)*block], v[(k*per+j)*block:(k*per+j+1)*block])
			}
		}
		copy(v, perm)
	}
	// A family whose every trunk tensor has a name in its table is written
	// by the table (its zero-centred norms shifted); the Qwen hybrids'
	// linear attention is rearranged below.
	// Multi-head latent attention's kv_b_proj (its suffix under a layer, as
	// the head's forward names it) is split into attn_k_b and attn_v_b.
	var mla *model.Attention
	for _, at := range m.MLAKVB() {
		mla = &at
	}
	kvbSuffix := ""
	if mla != nil {
		kvbSuffix = strings.TrimPrefix(mla.KVB, m.HeadLayerPrefix(0))
	}
	byTable := true
	for i := 0; i < c.NumHiddenLayers; i++ {
		for _, w := range m.Spec.TrunkLayer(i) {
			if _, ok := layerNames[w.Suffix]; !ok && w.Suffix != kvbSuffix {
				byTable = false
			}
		}
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		lp := tp + "layers." + strconv.Itoa(i) + "."
		b := "blk." + strconv.Itoa(i) + "."
		if byTable {
			for _, w := range m.Spec.TrunkLayer(i) {
				if _, ok := m.Checkpoint.Tensors[lp+w.Suffix]; !ok && w.Role&model.RoleOptional != 0 {
					continue
				}
				if w.Suffix == kvbSuffix {
					kvb, _, err := read(lp + w.Suffix)
					if err != nil {
						return err
					}
					nope, v, heads, kl := mla.QKNopeHeadDim, mla.VHeadDim, mla.Heads, mla.KVLoraRank
					kb := make([]float32, 0, heads*kl*nope)
					vb := make([]float32, 0, heads*v*kl)
					for h := 0; h < heads; h++ {
						base := h * (nope + v) * kl
						for col := 0; col < kl; col++ {
							for r := 0; r < nope; r++ {
								kb = append(kb, kvb[base+r*kl+col])
							}
						}
						vb = append(vb, kvb[base+nope*kl:base+(nope+v)*kl]...)
					}
					emit(gg.Weight(gg.KindAttnKB).In(i), kb, []int64{int64(heads), int64(kl), int64(nope)})
					emit(gg.Weight(gg.KindAttnVB).In(i), vb, []int64{int64(heads), int64(v), int64(kl)})
					continue
				}
				if err := plain(lp+w.Suffix, layerNames[w.Suffix].In(i), w.Role&model.RoleZeroCentredNorm != 0); err != nil {
					return err
				}
			}
			if m.Spec.MoE == nil || (m.Spec.MoELayer != nil && !m.Spec.MoELayer(i)) {
				continue
			}
			if err := experts(lp, b); err != nil {
				return err
			}
			continue
		}
		for _, n := range []string{"input_layernorm.weight", "post_attention_layernorm.weight"} {
			if err := plain(lp+n, layerNames[n].In(i), true); err != nil {
				return err
			}
		}
		if m.LayerTypes[i] == model.FullAttention {
			for _, n := range []string{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight"} {
				if err := plain(lp+n, layerNames[n].In(i), strings.HasSuffix(n, "norm.weight")); err != nil {
					return err
				}
			}
		} else {
			la := lp + "linear_attn."
			type lin struct {
				src, dst     string
				firstRow, hd int
			}
			if next {
				// in_proj_qkvz rows are grouped per key head [q, k, v.., z..]; llama.cpp
				// wants attn_qkv = [all q; all k; all v] and attn_gate = [all z].
				w, shape, err := read(la + "in_proj_qkvz.weight")
				if err != nil {
					return err
				}
				h := int(shape[1])
				hk, r := c.LinearKeyHeadDim, nv/nk
				group := 2*hk + 2*r*hv
				var q, k, v, z []float32
				for g := 0; g < nk; g++ {
					base := g * group * h
					q = append(q, w[base:base+hk*h]...)
					k = append(k, w[base+hk*h:base+2*hk*h]...)
					v = append(v, w[base+2*hk*h:base+(2*hk+r*hv)*h]...)
					z = append(z, w[base+(2*hk+r*hv)*h:base+group*h]...)
				}
				qkv := append(append(q, k...), v...)
				emit(b+"attn_qkv.weight", qkv, []int64{int64(len(qkv) / h), int64(h)})
				emit(b+"attn_gate.weight", z, []int64{int64(len(z) / h), int64(h)})
				if err := plain(la+"in_proj_ba.weight", b+"ssm_ba.weight", false); err != nil {
					return err
				}
			}
			lins := []lin{{"in_proj_qkv.weight", "attn_qkv.weight", 2 * kd, hv}, {"in_proj_z.weight", "attn_gate.weight", 0, hv},
				{"in_proj_b.weight", "ssm_beta.weight", 0, 1}, {"in_proj_a.weight", "ssm_alpha.weight", 0, 1}}
			if next {
				lins = nil
			}
			for _, l := range lins {
				vals, shape, err := read(la + l.src)
				if err != nil {
					return err
				}
				reorder(vals, int(shape[1]), l.firstRow, l.hd)
				emit(b+l.dst, vals, shape)
			}
			conv, shape, err := read(la + "conv1d.weight")
			if err != nil {
				return err
			}
			shape = []int64{shape[0], shape[2]} // squeeze [C,1,K]
			reorder(conv, int(shape[1]), 2*kd, hv)
			emit(b+"ssm_conv1d.weight", conv, shape)
			dt, shape, err := read(la + "dt_bias")
			if err != nil {
				return err
			}
			reorder(dt, 1, 0, 1)
			emit(b+"ssm_dt.bias", dt, shape)
			a, shape, err := read(la + "A_log")
			if err != nil {
				return err
			}
			reorder(a, 1, 0, 1)
			for j := range a {
				a[j] = float32(-math.Exp(float64(a[j])))
			}
			emit(b+"ssm_a", a, shape)
			if err := plain(la+"norm.weight", b+"ssm_norm.weight", false); err != nil {
				return err
			}
			o, shape, err := read(la + "out_proj.weight")
			if err != nil {
				return err
			}
			// Columns are V heads: reorder within each row.
			if nk != nv {
				rows, cols := int(shape[0]), int(shape[1])
				per := nv / nk
				tmp := make([]float32, cols)
				for r := 0; r < rows; r++ {
					row := o[r*cols : (r+1)*cols]
					for k := 0; k < nk; k++ {
						for j := 0; j < per; j++ {
							copy(tmp[(j*nk+k)*hv:(j*nk+k+1)*hv], row[(k*per+j)*hv:(k*per+j+1)*hv])
						}
					}
					copy(row, tmp)
				}
			}
			emit(b+"ssm_out.weight", o, shape)
		}
		if c.Dense() {
			for _, n := range []string{"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"} {
				if err := plain(lp+n, layerNames[n].In(i), false); err != nil {
					return err
				}
			}
			continue
		}
		for _, n := range []string{"mlp.gate.weight", "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight", "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight"} {
			if err := plain(lp+n, layerNames[n].In(i), false); err != nil {
				return err
			}
		}
		if err := experts(lp, b); err != nil {
			return err
		}
	}
	name := strings.TrimSuffix(path, ".gguf")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	kvs, err := trunkMetadata(m, h, name, vocab)
	if err != nil {
		return err
	}
	sizes := make([]int64, len(out))
	for i, t := range out {
		sizes[i] = int64(len(t.data))
	}
	offs, total := gg.Place(sizes, gg.DefaultAlignment)
	infos := make([]gg.TensorInfo, len(out))
	for i, t := range out {
		dims := make([]int64, len(t.shape))
		for j, d := range t.shape {
			dims[len(t.shape)-1-j] = d
		}
		infos[i] = gg.TensorInfo{Name: t.name, Dims: dims, Type: t.typ, Offset: offs[i]}
	}
	hdr, err := gg.EncodeHeader(kvs, infos)
	if err != nil {
		return err
	}
	buf := make([]byte, int64(len(hdr))+total)
	copy(buf, hdr)
	for i, t := range out {
		copy(buf[int64(len(hdr))+offs[i]:], t.data)
	}
	return os.WriteFile(path, buf, 0o644)
}

// hparamsAndVocab reads the configuration and the vocabulary metadata.
func hparamsAndVocab(m *model.Model) (model.Hparams, []gg.KV, error) {
	h, err := m.Config.Hparams()
	if err != nil {
		return nil, nil, err
	}
	vocab, err := gguf.VocabMetadata(m, h)
	return h, vocab, err
}

// trunkMetadata is the sidecar's metadata without the head: n_layer blocks,
// no nextn layers (what the reference converter writes with --no-mtp).
func trunkMetadata(m *model.Model, h model.Hparams, name string, vocab []gg.KV) ([]gg.KV, error) {
	var kvs []gg.KV
	a := m.Family.GGUF.Arch
	n := m.Config.NumHiddenLayers
	all, err := gguf.Metadata(m, h, gg.FileBF16, name, vocab)
	if err != nil {
		return nil, err
	}
	for _, kv := range all {
		switch kv.Key {
		case a + ".nextn_predict_layers":
			continue
		case a + ".block_count":
			kv.Value = gg.U32(uint32(n))
		}
		if v := reflect.ValueOf(kv.Value.V); kv.Value.Type == gg.TypeArray && kv.Value.Elem != gg.TypeString && v.Len() == n+m.MTPDepth {
			// A per-layer array (recurrent_layers, Step-3.5's head counts): the trunk's layers only.
			kv.Value.V = v.Slice(0, n).Interface()
		}
		kvs = append(kvs, kv)
	}
	return kvs, nil
}

// TrunkMetadata is the metadata of a trunk GGUF of m without its head, for
// tools that write one (the benchmark's real-size synthetic trunk).
func TrunkMetadata(m *model.Model, name string) ([]gg.KV, error) {
	if m.Family.GGUF.Arch == "" {
		return nil, fmt.Errorf("family %s is not supported", m.Family)
	}
	h, vocab, err := hparamsAndVocab(m)
	if err != nil {
		return nil, err
	}
	return trunkMetadata(m, h, name, vocab)
}
