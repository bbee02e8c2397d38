package model_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/testmodel"
	"github.com/mtpconv/mtpconv/quant/codec"
)

func problems(m *model.Model) string {
	return strings.Join(append(append([]string{}, m.MTPProblems...), m.TrunkProblems...), "\n")
}

// A head in the layer list: MTP layer j is model.layers.{N+j}., holding
// eh_proj, enorm, hnorm and shared_head.* beside a whole decoder layer; the
// trunk's leading dense layers route no experts.
func TestSpecHeadInLayerList(t *testing.T) {
	testmodel.RegisterGLM(t)
	m := testmodel.GLM(t, testmodel.GLMConfig(1, false), nil, nil)
	if p := problems(m); p != "" {
		t.Fatalf("problems:\n%s", p)
	}
	if m.Family.Name != testmodel.GLMName || m.MTPDepth != 1 {
		t.Fatalf("family %s depth %d", m.Family, m.MTPDepth)
	}
	var trunk []string
	for _, b := range m.TrunkExperts {
		trunk = append(trunk, m.ExpertLayer(b))
	}
	if !slices.Equal(trunk, []string{"model.layers.1.", "model.layers.2."}) || len(m.MTPExperts) != 1 || m.ExpertLayer(m.MTPExperts[0]) != "model.layers.3." {
		t.Errorf("trunk experts %v, mtp experts %+v", trunk, m.MTPExperts)
	}
	for name, group := range map[string]string{
		"model.layers.3.eh_proj.weight": model.GroupMTP, "model.layers.3.mlp.experts.0.up_proj.weight": model.GroupMTP,
		"model.layers.2.mlp.gate.weight": model.GroupTrunk, "model.embed_tokens.weight": model.GroupTrunk,
	} {
		if g := m.Group(name); g != group {
			t.Errorf("%s in group %s, want %s", name, g, group)
		}
	}
	if r, err := m.Inspect(); err != nil || r.MTP.NormConvention != "plain (stored as applied)" {
		t.Errorf("inspect: %v, %+v", err, r)
	}
	if r := m.HeadRelative("model.layers.3.shared_head.norm.weight"); r != "layers.0.shared_head.norm.weight" || m.HeadName(r) != "model.layers.3.shared_head.norm.weight" {
		t.Errorf("relative %q, back %q", r, m.HeadName(r))
	}
	// A dense layer's missing MLP is named; so is a MoE layer's router.
	m = testmodel.GLM(t, testmodel.GLMConfig(1, false), func(n string) bool {
		return n != "model.layers.0.mlp.up_proj.weight" && n != "model.layers.3.mlp.gate.e_score_correction_bias"
	}, nil)
	if !strings.Contains(problems(m), "missing: model.layers.0.mlp.up_proj.weight") || !strings.Contains(problems(m), "missing: model.layers.3.mlp.gate.e_score_correction_bias") {
		t.Errorf("problems:\n%s", problems(m))
	}
}

// Optional tensors may be absent; the others may not.
func TestSpecOptionalTensors(t *testing.T) {
	testmodel.RegisterGLM(t)
	full := testmodel.GLM(t, testmodel.GLMConfig(1, false), nil, nil)
	if !slices.Contains(full.HeadTensors(), "model.layers.3.shared_head.head.weight") {
		t.Errorf("head tensors %v", full.HeadTensors())
	}
	m := testmodel.GLM(t, testmodel.GLMConfig(1, false), func(n string) bool {
		return n != "model.layers.3.shared_head.head.weight" && n != "model.layers.3.embed_tokens.weight"
	}, nil)
	if p := problems(m); p != "" {
		t.Errorf("optional tensors dropped: %s", p)
	}
	m = testmodel.GLM(t, testmodel.GLMConfig(1, false), func(n string) bool { return n != "model.layers.3.eh_proj.weight" }, nil)
	if err := m.HeadError(); err == nil || !strings.Contains(err.Error(), "missing: model.layers.3.eh_proj.weight") {
		t.Errorf("eh_proj dropped: %v", err)
	}
}

// Several MTP layers, each with its own shared head.
func TestSpecSeveralHeads(t *testing.T) {
	testmodel.RegisterGLM(t)
	m := testmodel.GLM(t, testmodel.GLMConfig(2, false), nil, nil)
	if p := problems(m); p != "" || m.MTPDepth != 2 || len(m.MTPExperts) != 2 {
		t.Fatalf("depth %d, problems:\n%s", m.MTPDepth, p)
	}
	m = testmodel.GLM(t, testmodel.GLMConfig(2, false), func(n string) bool { return n != "model.layers.4.enorm.weight" }, nil)
	if err := m.HeadError(); err == nil || !strings.Contains(err.Error(), "missing: model.layers.4.enorm.weight") {
		t.Errorf("second head's enorm dropped: %v", err)
	}
	m = testmodel.GLM(t, testmodel.GLMConfig(2, false), func(n string) bool { return !strings.HasPrefix(n, "model.layers.4.") }, nil)
	if err := m.HeadError(); err == nil || !strings.Contains(err.Error(), "config.json declares 2 MTP layers, the tensors hold 1") {
		t.Errorf("second layer dropped: %v", err)
	}
	m = testmodel.GLM(t, testmodel.GLMConfig(1, false), func(n string) bool { return !strings.HasPrefix(n, "model.layers.3.") }, nil)
	if err := m.HeadError(); err == nil || !strings.Contains(err.Error(), "no model.layers.{3+}.* tensors") {
		t.Errorf("no head: %v", err)
	}
}

// Biases are planned like any 1-D tensor (never quantized, never shifted);
// plain norms are not shifted (zero-centred ones are: plan_test.go); the routing's
// score-correction bias is a router, never quantized.
func TestSpecBiasesAndNorms(t *testing.T) {
	testmodel.RegisterGLM(t)
	m := testmodel.GLM(t, testmodel.GLMConfig(1, false), nil, nil)
	quantizeAll := func(string, string, int64) *plan.Quant {
		return &plan.Quant{Mode: codec.ModeMLXAffine, Bits: 4, GroupSize: 32}
	}
	pl := &plan.Planner{M: m, File: "x"}
	pl.Head(func(s string) string { return s }, "F16", quantizeAll, nil)
	planned := map[string]plan.OutTensor{}
	for _, o := range pl.Out {
		planned[o.Name] = o
	}
	bias, ok := planned["layers.0.self_attn.q_proj.bias"]
	if !ok || bias.Quant != nil || len(bias.Shape) != 1 || bias.Has(plan.TNormPlusOne) {
		t.Errorf("q_proj.bias planned %+v", bias)
	}
	if w := planned["layers.0.self_attn.q_proj.weight"]; w.Quant == nil {
		t.Errorf("q_proj.weight not quantized: %+v", w)
	}
	if n := planned["layers.0.enorm.weight"]; n.Has(plan.TNormPlusOne) {
		t.Errorf("plain norm shifted: %+v", n)
	}
	if b := planned["layers.0.mlp.gate.e_score_correction_bias"]; b.Quant != nil || !m.Is("model.layers.3.mlp.gate.e_score_correction_bias", model.RoleRouter) {
		t.Errorf("score-correction bias %+v", b)
	}
}

// The forward names only tensors the checkpoint holds (or the stacked
// experts the planner makes), and says its kinds: GQA with biases or MLA,
// sigmoid group routing with its bias, groups and scaling.
func TestSpecForwardKinds(t *testing.T) {
	testmodel.RegisterGLM(t)
	for _, mla := range []bool{false, true} {
		m := testmodel.GLM(t, testmodel.GLMConfig(1, mla), nil, nil)
		if p := problems(m); p != "" {
			t.Fatalf("mla %v: problems:\n%s", mla, p)
		}
		f := m.Spec.Forward(m)
		at, mlp := f.Layers[0].Attention, f.Layers[0].MLP
		want := model.AttnGQA
		if mla {
			want = model.AttnMLA
		}
		if at.Kind != want || mlp.Routing != model.RouteSigmoidGroupTopK || mlp.Groups != 2 || mlp.TopKGroups != 1 || mlp.ScalingFactor != 2.5 {
			t.Errorf("mla %v: attention %+v, mlp %+v", mla, at, mlp)
		}
		for _, n := range []string{f.EmbedNorm, f.HiddenNorm, f.FC, f.FinalNorm, at.Q, at.O, at.QBias, at.KVA, at.KVB, mlp.Router, mlp.ScoreCorrectionBias, mlp.SharedGate} {
			if _, ok := m.Checkpoint.Tensors[n]; n != "" && !ok {
				t.Errorf("mla %v: forward names %s, which the checkpoint lacks", mla, n)
			}
		}
	}
}

// A deep MTP layer named in the layer list is bounded by the checkpoint
// before describing allocates for it.
func TestSpecDeepLayerListNameIsRefused(t *testing.T) {
	testmodel.RegisterGLM(t)
	cfg, err := model.ParseConfig(testmodel.GLMConfig(1, false))
	if err != nil {
		t.Fatal(err)
	}
	ck := testmodel.GLMInventory(cfg, nil, nil)
	n := "model.layers.99999999.x"
	s := *ck.Tensors["model.norm.weight"]
	s.Name = n
	ck.Tensors[n] = &s
	ck.Names = append(ck.Names, n)
	_, err = model.Describe(cfg, ck)
	if err == nil || !strings.Contains(err.Error(), "tensor model.layers.99999999.x names MTP layer 99999996, but the checkpoint has only") {
		t.Fatalf("err = %v", err)
	}
}

// A drafter checkpoint that is all head (HeadPrefix "", its layers under
// HeadLayers, no trunk): layers of different shapes (HeadLayerAt), a top
// tensor at the root, an integer index buffer the family keeps as stored.
func TestSpecDrafterCheckpoint(t *testing.T) {
	w := func(s string, r model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: r}
	}
	fam := &model.Family{Name: "drafter_test", ModelTypes: []string{"drafter_test"},
		ParseConfig: func(raw []byte) (*model.Config, error) {
			c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 1e4})
			if err != nil {
				return nil, err
			}
			depth := c.NumHiddenLayers
			c.NumNextnPredictLayers, c.NumHiddenLayers = &depth, 0
			return c, nil
		},
		Spec: func(c *model.Config) *model.Spec {
			return &model.Spec{TextPrefixes: []string{"model."}, HeadLayers: "model.layers.",
				HeadTop:   []model.Want{w("model.embed_tokens.weight", 0, 8, 4), w("pre_projection.weight", 0, 4, 16), w("ordering", model.RoleKeepDType, 8)},
				HeadLayer: []model.Want{w("q_proj.weight", 0)},
				HeadLayerAt: func(j int) []model.Want {
					return []model.Want{w("q_proj.weight", 0, int64(4*(j+1)), 4)}
				}}
		}}
	t.Cleanup(model.RegisterFamily(fam))
	cfg, err := model.ParseConfig([]byte(`{"model_type":"drafter_test","hidden_size":4,"num_hidden_layers":2,"num_attention_heads":1,"num_key_value_heads":1,"vocab_size":8}`))
	if err != nil {
		t.Fatal(err)
	}
	describe := func(dtype st.DType, q1 int64) *model.Model {
		shard := &st.Shard{Name: "model.safetensors", Header: &st.Header{}}
		ck := &st.Checkpoint{Tensors: map[string]*st.Tensor{}, Shards: []*st.Shard{shard}}
		for n, shape := range map[string][]int64{"model.embed_tokens.weight": {8, 4}, "pre_projection.weight": {4, 16},
			"model.layers.0.q_proj.weight": {4, 4}, "model.layers.1.q_proj.weight": {q1, 4}, "ordering": {8}} {
			d := st.BF16
			if n == "ordering" {
				d = dtype
			}
			ck.Tensors[n] = &st.Tensor{TensorInfo: st.TensorInfo{Name: n, DType: d, Shape: shape}, Shard: shard}
			ck.Names = append(ck.Names, n)
		}
		slices.Sort(ck.Names)
		m, err := model.Describe(cfg, ck)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := describe(st.I64, 8)
	if p := problems(m); p != "" || m.MTPDepth != 2 || m.Groups[model.GroupTrunk].Tensors != 0 || len(m.HeadTensors()) != 5 {
		t.Fatalf("depth %d, trunk %d, head %v, problems:\n%s", m.MTPDepth, m.Groups[model.GroupTrunk].Tensors, m.HeadTensors(), p)
	}
	for name, rel := range map[string]string{"model.layers.1.q_proj.weight": "layers.1.q_proj.weight", "pre_projection.weight": "pre_projection.weight",
		"model.embed_tokens.weight": "model.embed_tokens.weight"} {
		if got := m.HeadRelative(name); got != rel || m.HeadName(got) != name {
			t.Errorf("%s: relative %q, back %q", name, got, m.HeadName(got))
		}
	}
	// Layer 1's own shape is checked, and an integer tensor the family does not keep as stored is refused.
	if p := problems(describe(st.I64, 4)); !strings.Contains(p, "model.layers.1.q_proj.weight has shape [4 4], the config implies [8 4]") {
		t.Errorf("problems:\n%s", p)
	}
	fam.Spec = func(c *model.Config) *model.Spec {
		s := &model.Spec{TextPrefixes: []string{"model."}, HeadLayers: "model.layers.",
			HeadTop:   []model.Want{w("model.embed_tokens.weight", 0, 8, 4), w("pre_projection.weight", 0, 4, 16), w("ordering", 0, 8)},
			HeadLayer: []model.Want{w("q_proj.weight", 0, 4, 4)}}
		s.HeadLayerAt = func(j int) []model.Want { return []model.Want{w("q_proj.weight", 0, int64(4*(j+1)), 4)} }
		return s
	}
	if p := problems(describe(st.I32, 8)); !strings.Contains(p, "tensor ordering has dtype I32, not a float type") {
		t.Errorf("problems:\n%s", p)
	}
}
