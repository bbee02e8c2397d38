package convert

import (
	"fmt"
	"math"
	"strings"

	ov "github.com/mtpconv/mtpconv/formats/openvino"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// OpenVINO contract: names of the MTP layer's inputs, output and state.
const (
	OVInputsEmbeds   = "inputs_embeds"
	OVHiddenStates   = "hidden_states"
	OVAttentionMask  = "attention_mask"
	OVPositionIDs    = "position_ids"
	OVBeamIdx        = "beam_idx"
	OVLastHidden     = "last_hidden_state"
	OVLogits         = "logits"
	OVKeyVariable    = "mtp.layers.0.self_attn.key_cache"
	OVValueVariable  = "mtp.layers.0.self_attn.value_cache"
	OVNormConvention = "zero-centred RMSNorm weights baked as 1+w into f32 constants"
)

var ovTypes = map[st.DType]ov.ElemType{st.F32: ov.F32, st.F16: ov.F16, "U8": ov.U8, "I8": ov.I8, "U4": ov.U4, "I4": ov.I4}

// ovWeights finds each planned tensor's regions in its .bin.
type ovWeights struct {
	byName  map[string]*OutTensor
	layouts map[string]*FileLayout
}

func newOVWeights(p *Plan) (*ovWeights, error) {
	w := &ovWeights{byName: map[string]*OutTensor{}, layouts: map[string]*FileLayout{}}
	for i := range p.Tensors {
		w.byName[p.Tensors[i].Name] = &p.Tensors[i]
	}
	for _, f := range p.TensorFiles {
		lay, err := p.Layout(f)
		if err != nil {
			return nil, err
		}
		w.layouts[f] = lay
	}
	return w, nil
}

func (w *ovWeights) region(t *OutTensor, entry string) *ov.Region {
	lay := w.layouts[t.File]
	for _, e := range lay.Entries {
		if e.Name == entry {
			return &ov.Region{Type: ovTypes[e.DType], Shape: e.Shape, Offset: lay.Offsets[entry], Size: lay.Sizes[entry]}
		}
	}
	return nil
}

// weight describes a planned linear weight for the graph builder.
func (w *ovWeights) weight(name string) (ov.Weight, error) {
	t, ok := w.byName[name]
	if !ok {
		return ov.Weight{}, fmt.Errorf("openvino graph: weight %s was not planned", name)
	}
	out := ov.Weight{Name: name, Shape: t.Shape}
	if t.Quant == nil {
		out.Plain = w.region(t, name)
		return out, nil
	}
	base := strings.TrimSuffix(name, ".weight")
	out.Q, out.Scale, out.ZP = w.region(t, name), w.region(t, base+".scale"), w.region(t, base+".zero_point")
	return out, nil
}

func (w *ovWeights) norm(name string) ov.Region {
	return *w.region(w.byName[name], name)
}

// OpenVINOGraphs builds the two IR graphs over the weights a plan laid out:
// the MTP layer (stateful, MoE in the fusable tiled form) and the lm_head.
func OpenVINOGraphs(m *Model, p *Plan, info []ov.Attr) (layer, head *ov.Graph, err error) {
	w, err := newOVWeights(p)
	if err != nil {
		return nil, nil, err
	}
	c := m.Config
	H, nH, nKV, D := int64(c.HiddenSize), int64(c.NumAttentionHeads), int64(c.NumKeyValueHeads), int64(c.HeadDim)
	eps := float32(c.RMSNormEps)
	must := func(name string) ov.Weight {
		if err != nil {
			return ov.Weight{}
		}
		var x ov.Weight
		x, err = w.weight(name)
		return x
	}

	g := ov.New("mtp_layer")
	g.RtInfo = info
	emb := g.Parameter(OVInputsEmbeds, ov.F32, ov.Dynamic, ov.Dynamic, H)
	hid := g.Parameter(OVHiddenStates, ov.F32, ov.Dynamic, ov.Dynamic, H)
	mask := g.Parameter(OVAttentionMask, ov.I64, ov.Dynamic, ov.Dynamic)
	pos := g.Parameter(OVPositionIDs, ov.I64, ov.Dynamic, ov.Dynamic)
	beam := g.Parameter(OVBeamIdx, ov.I32, ov.Dynamic)

	e := g.RMSNorm("mtp.pre_fc_norm_embedding", emb, w.norm("mtp.pre_fc_norm_embedding.weight"), eps)
	h := g.RMSNorm("mtp.pre_fc_norm_hidden", hid, w.norm("mtp.pre_fc_norm_hidden.weight"), eps)
	x := g.Concat("mtp.fc/concat", -1, []int64{ov.Dynamic, ov.Dynamic, 2 * H}, e, h) // embedding first
	u := g.Linear("mtp.fc", x, must("mtp.fc.weight"))

	// Gated full attention with its own KV cache.
	p0 := "mtp.layers.0."
	a := g.RMSNorm(p0+"input_layernorm", u, w.norm(p0+"input_layernorm.weight"), eps)
	sa := p0 + "self_attn."
	qg := g.Reshape(sa+"q_proj/heads", g.Linear(sa+"q_proj", a, must(sa+"q_proj.weight")),
		g.ConstI64(sa+"q_proj/heads_shape", 0, 0, nH, 2*D), true, []int64{ov.Dynamic, ov.Dynamic, nH, 2 * D})
	qgate := g.VariadicSplit(sa+"q_proj/split_gate", qg, 3, D, D) // per head: [q ; gate]
	q := g.RMSNorm(sa+"q_norm", qgate[0], w.norm(sa+"q_norm.weight"), eps)
	k := g.Reshape(sa+"k_proj/heads", g.Linear(sa+"k_proj", a, must(sa+"k_proj.weight")),
		g.ConstI64(sa+"k_proj/heads_shape", 0, 0, nKV, D), true, []int64{ov.Dynamic, ov.Dynamic, nKV, D})
	k = g.RMSNorm(sa+"k_norm", k, w.norm(sa+"k_norm.weight"), eps)
	v := g.Reshape(sa+"v_proj/heads", g.Linear(sa+"v_proj", a, must(sa+"v_proj.weight")),
		g.ConstI64(sa+"v_proj/heads_shape", 0, 0, nKV, D), true, []int64{ov.Dynamic, ov.Dynamic, nKV, D})
	qT := g.Transpose(sa+"q/transpose", q, 0, 2, 1, 3)
	kT := g.Transpose(sa+"k/transpose", k, 0, 2, 1, 3)
	vT := g.Transpose(sa+"v/transpose", v, 0, 2, 1, 3)
	rot := int64(c.RotaryDim())
	cos, sin := g.RopeTables(sa+"rope", pos, rot, c.RopeTheta)
	qR := g.Rope(sa+"q/rope", qT, cos, sin, rot, D)
	kR := g.Rope(sa+"k/rope", kT, cos, sin, rot, D)
	kc := g.KVCache(OVKeyVariable, kR, emb, beam, nKV, D)
	vc := g.KVCache(OVValueVariable, vT, emb, beam, nKV, D)
	kE := g.RepeatKV(sa+"k/repeat", kc, nH/nKV, nKV, D)
	vE := g.RepeatKV(sa+"v/repeat", vc, nH/nKV, nKV, D)
	am := g.AttentionMask(sa+"mask", mask, emb)
	att := g.SDPA(sa+"sdpa", qR, kE, vE, am, g.ScalarF32(sa+"scale", float32(1/math.Sqrt(float64(D)))), false)
	att = g.Reshape(sa+"merge_heads", g.Transpose(sa+"sdpa/transpose", att, 0, 2, 1, 3),
		g.ConstI64(sa+"merge_heads/shape", 0, 0, nH*D), true, []int64{ov.Dynamic, ov.Dynamic, nH * D})
	gate := g.Reshape(sa+"gate/merge_heads", qgate[1], g.ConstI64(sa+"gate/shape", 0, 0, nH*D), true, []int64{ov.Dynamic, ov.Dynamic, nH * D})
	att = g.Multiply(sa+"output_gate", att, g.Sigmoid(sa+"gate/sigmoid", gate))
	u = g.Add(p0+"attention_residual", u, g.Linear(sa+"o_proj", att, must(sa+"o_proj.weight")))

	// Sparse MoE (only the top-k experts run once fused) plus the gated shared expert.
	b := g.RMSNorm(p0+"post_attention_layernorm", u, w.norm(p0+"post_attention_layernorm.weight"), eps)
	mp := p0 + "mlp."
	normTopK := c.NormTopkProb == nil || *c.NormTopkProb
	routed := g.TiledMoE(mp+"experts", b, must(mp+"gate.weight"), must(mp+"switch_mlp.gate_proj.weight"),
		must(mp+"switch_mlp.up_proj.weight"), must(mp+"switch_mlp.down_proj.weight"),
		int64(c.NumExperts), int64(c.NumExpertsPerTok), H, normTopK)
	se := mp + "shared_expert."
	sh := g.Multiply(se+"swiglu", g.Swish(se+"swish", g.Linear(se+"gate_proj", b, must(se+"gate_proj.weight"))),
		g.Linear(se+"up_proj", b, must(se+"up_proj.weight")))
	sh = g.Linear(se+"down_proj", sh, must(se+"down_proj.weight"))
	sh = g.Multiply(mp+"shared_expert_gated", g.Sigmoid(mp+"shared_expert_gate/sigmoid", g.Linear(mp+"shared_expert_gate", b, must(mp+"shared_expert_gate.weight"))), sh)
	u = g.Add(p0+"mlp_residual", u, g.Add(mp+"sum", routed, sh))
	g.Result(OVLastHidden, g.RMSNorm("mtp.norm", u, w.norm("mtp.norm.weight"), eps))

	hg := ov.New("mtp_lm_head")
	hg.RtInfo = info
	hs := hg.Parameter(OVHiddenStates, ov.F32, ov.Dynamic, ov.Dynamic, H)
	hg.Result(OVLogits, hg.Linear("lm_head", hs, must("lm_head.weight")))
	if err != nil {
		return nil, nil, err
	}
	return g, hg, nil
}
