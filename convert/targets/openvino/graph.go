package openvino

import (
	"fmt"
	"math"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	ov "github.com/mtpconv/mtpconv/formats/openvino"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The IR contract: names of the MTP layer's inputs and output.
const (
	InputsEmbeds  = "inputs_embeds"
	HiddenStates  = "hidden_states"
	AttentionMask = "attention_mask"
	PositionIDs   = "position_ids"
	BeamIdx       = "beam_idx"
	LastHidden    = "last_hidden_state"
	Logits        = "logits"
	// MTPMode is the model rt_info key that marks an MTP head (value "true").
	MTPMode = "mtp_mode"
)

// keyVariable and valueVariable name a layer's KV-cache state.
func keyVariable(a model.Attention) string   { return a.Prefix + "key_cache" }
func valueVariable(a model.Attention) string { return a.Prefix + "value_cache" }

// node names a graph node after the tensor it applies.
func node(tensor string) string { return strings.TrimSuffix(tensor, ".weight") }

var ovTypes = map[st.DType]ov.ElemType{st.F32: ov.F32, st.F16: ov.F16, "U8": ov.U8, "I8": ov.I8, "U4": ov.U4, "I4": ov.I4}

// ovWeights finds each planned tensor's regions in its .bin.
type ovWeights struct {
	byName  map[string]*plan.OutTensor
	layouts map[string]*plan.FileLayout
}

func newOVWeights(p *plan.Plan) (*ovWeights, error) {
	w := &ovWeights{byName: map[string]*plan.OutTensor{}, layouts: map[string]*plan.FileLayout{}}
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

func (w *ovWeights) region(t *plan.OutTensor, entry string) *ov.Region {
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

// checkLowering refuses a forward the IR blocks cannot express, naming
// what is missing: one MTP layer over concat(embedding, hidden), gated full
// attention without biases, a dense MLP or a softmax top-k MoE with a
// sigmoid-gated shared expert.
func checkLowering(f model.Forward) error {
	if len(f.Layers) != 1 || !f.EmbeddingFirst {
		return fmt.Errorf("openvino graph: the lowering takes one MTP layer over concat(embedding, hidden)")
	}
	at, mlp := f.Layers[0].Attention, f.Layers[0].MLP
	if at.Kind != model.AttnGatedFull || !at.OutputGate {
		return fmt.Errorf("openvino graph: attention %q (output gate %v) has no lowering", at.Kind, at.OutputGate)
	}
	if at.QBias != "" || at.KBias != "" || at.VBias != "" {
		return fmt.Errorf("openvino graph: attention with q/k/v biases has no lowering")
	}
	switch {
	case mlp.Kind == model.MLPDense:
	case mlp.Kind != model.MLPSparseMoE:
		return fmt.Errorf("openvino graph: MLP %q has no lowering", mlp.Kind)
	case mlp.Routing != "" && mlp.Routing != model.RouteSoftmaxTopK:
		return fmt.Errorf("openvino graph: MoE routing %q has no lowering (the fused MoE block routes by softmax top-k)", mlp.Routing)
	case mlp.SharedExpertGate == "":
		return fmt.Errorf("openvino graph: ungated shared experts have no lowering")
	}
	return nil
}

// Graphs lowers the family's MTP forward onto the IR blocks, over the
// weights a plan laid out: the MTP layer (stateful, MoE in the fusable tiled
// form) and the lm_head (nil when the plan has no lm_head).
func Graphs(m *model.Model, p *plan.Plan, f model.Forward, info []ov.Attr) (layer, head *ov.Graph, err error) {
	w, err := newOVWeights(p)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLowering(f); err != nil {
		return nil, nil, err
	}
	l := f.Layers[0]
	at, mlp := l.Attention, l.MLP
	H := int64(m.Config.HiddenSize)
	nH, nKV, D := int64(at.Heads), int64(at.KVHeads), int64(at.HeadDim)
	eps := float32(f.Eps)
	must := func(name string) ov.Weight {
		if err != nil {
			return ov.Weight{}
		}
		var x ov.Weight
		x, err = w.weight(name)
		return x
	}
	norm := func(g *ov.Graph, x ov.Output, tensor string) ov.Output {
		return g.RMSNorm(node(tensor), x, w.norm(tensor), eps)
	}
	linear := func(g *ov.Graph, x ov.Output, tensor string) ov.Output {
		return g.Linear(node(tensor), x, must(tensor))
	}

	g := ov.New("mtp_layer")
	g.RtInfo = append([]ov.Attr{{Key: MTPMode, Value: "true"}}, info...)
	emb := g.Parameter(InputsEmbeds, ov.F32, ov.Dynamic, ov.Dynamic, H)
	hid := g.Parameter(HiddenStates, ov.F32, ov.Dynamic, ov.Dynamic, H)
	mask := g.Parameter(AttentionMask, ov.I64, ov.Dynamic, ov.Dynamic)
	pos := g.Parameter(PositionIDs, ov.I64, ov.Dynamic, ov.Dynamic)
	beam := g.Parameter(BeamIdx, ov.I32, ov.Dynamic)

	e := norm(g, emb, f.EmbedNorm)
	h := norm(g, hid, f.HiddenNorm)
	x := g.Concat(node(f.FC)+"/concat", -1, []int64{ov.Dynamic, ov.Dynamic, 2 * H}, e, h) // embedding first
	u := linear(g, x, f.FC)

	// Gated full attention with its own KV cache.
	a := norm(g, u, l.InputNorm)
	sa := at.Prefix
	qg := g.Reshape(node(at.Q)+"/heads", linear(g, a, at.Q),
		g.ConstI64(node(at.Q)+"/heads_shape", 0, 0, nH, 2*D), true, []int64{ov.Dynamic, ov.Dynamic, nH, 2 * D})
	qgate := g.VariadicSplit(node(at.Q)+"/split_gate", qg, 3, D, D) // per head: [q ; gate]
	q := norm(g, qgate[0], at.QNorm)
	k := g.Reshape(node(at.K)+"/heads", linear(g, a, at.K),
		g.ConstI64(node(at.K)+"/heads_shape", 0, 0, nKV, D), true, []int64{ov.Dynamic, ov.Dynamic, nKV, D})
	k = norm(g, k, at.KNorm)
	v := g.Reshape(node(at.V)+"/heads", linear(g, a, at.V),
		g.ConstI64(node(at.V)+"/heads_shape", 0, 0, nKV, D), true, []int64{ov.Dynamic, ov.Dynamic, nKV, D})
	qT := g.Transpose(sa+"q/transpose", q, 0, 2, 1, 3)
	kT := g.Transpose(sa+"k/transpose", k, 0, 2, 1, 3)
	vT := g.Transpose(sa+"v/transpose", v, 0, 2, 1, 3)
	rot := int64(at.RotaryDim)
	cos, sin := g.RopeTables(sa+"rope", pos, rot, at.RopeTheta)
	qR := g.Rope(sa+"q/rope", qT, cos, sin, rot, D)
	kR := g.Rope(sa+"k/rope", kT, cos, sin, rot, D)
	kc := g.KVCache(keyVariable(at), kR, emb, beam, nKV, D)
	vc := g.KVCache(valueVariable(at), vT, emb, beam, nKV, D)
	kE := g.RepeatKV(sa+"k/repeat", kc, nH/nKV, nKV, D)
	vE := g.RepeatKV(sa+"v/repeat", vc, nH/nKV, nKV, D)
	am := g.AttentionMask(sa+"mask", mask, emb)
	att := g.SDPA(sa+"sdpa", qR, kE, vE, am, g.ScalarF32(sa+"scale", float32(1/math.Sqrt(float64(D)))), false)
	att = g.Reshape(sa+"merge_heads", g.Transpose(sa+"sdpa/transpose", att, 0, 2, 1, 3),
		g.ConstI64(sa+"merge_heads/shape", 0, 0, nH*D), true, []int64{ov.Dynamic, ov.Dynamic, nH * D})
	gate := g.Reshape(sa+"gate/merge_heads", qgate[1], g.ConstI64(sa+"gate/shape", 0, 0, nH*D), true, []int64{ov.Dynamic, ov.Dynamic, nH * D})
	att = g.Multiply(sa+"output_gate", att, g.Sigmoid(sa+"gate/sigmoid", gate))
	u = g.Add(l.Prefix+"attention_residual", u, linear(g, att, at.O))

	b := norm(g, u, l.PostAttentionNorm)
	mp := mlp.Prefix
	if mlp.Kind == model.MLPDense {
		// SwiGLU: down(silu(gate(x)) * up(x)).
		d := g.Multiply(mp+"swiglu", g.Swish(mp+"swish", linear(g, b, mlp.Gate)), linear(g, b, mlp.Up))
		u = g.Add(l.Prefix+"mlp_residual", u, linear(g, d, mlp.Down))
	} else {
		// Sparse MoE (only the top-k experts run once fused) plus the gated shared expert.
		routed := g.TiledMoE(mp+"experts", b, must(mlp.Router), must(mlp.Gate), must(mlp.Up), must(mlp.Down),
			int64(mlp.Experts), int64(mlp.TopK), H, mlp.NormTopK)
		se := mlp.SharedPrefix
		sh := g.Multiply(se+"swiglu", g.Swish(se+"swish", linear(g, b, mlp.SharedGate)), linear(g, b, mlp.SharedUp))
		sh = linear(g, sh, mlp.SharedDown)
		sg := node(mlp.SharedExpertGate)
		sh = g.Multiply(mp+"shared_expert_gated", g.Sigmoid(sg+"/sigmoid", linear(g, b, mlp.SharedExpertGate)), sh)
		u = g.Add(l.Prefix+"mlp_residual", u, g.Add(mp+"sum", routed, sh))
	}
	g.Result(LastHidden, norm(g, u, f.FinalNorm))

	if err != nil {
		return nil, nil, err
	}
	lm := m.Spec.LMHead.Suffix
	if _, planned := w.byName[lm]; !planned {
		return g, nil, nil // --into: GenAI grafts the trunk's lm_head
	}
	hg := ov.New("mtp_lm_head")
	hg.RtInfo = info
	hs := hg.Parameter(HiddenStates, ov.F32, ov.Dynamic, ov.Dynamic, H)
	hg.Result(Logits, hg.Linear(node(lm), hs, must(lm)))
	if err != nil {
		return nil, nil, err
	}
	return g, hg, nil
}
