package testmodel

// GLM is a test-only model family shaped like GLM-4.5
// (Glm4MoeForCausalLM), at toy size, with an inventory synthesised from its
// own Spec: the head in the layer list (model.layers.{N+j}. with eh_proj,
// enorm, hnorm and shared_head.*), one shared head per MTP layer, optional
// tensors, q/k/v biases, plain norms, sigmoid group routing with a
// score-correction bias, and leading dense layers in a MoE trunk. The tests
// of convert and of the targets use it to exercise what the Spec can say
// before a real family of that lineage lands. It is never registered
// outside a test (RegisterGLM).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mtpconv/mtpconv/convert/families"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// GLMName is the family's name; GLMModelType its config.json model_type.
const (
	GLMName      = "test_glm"
	GLMModelType = "test_glm4_moe"
)

// GLMRefusal is the family's OpenVINO sentence.
const GLMRefusal = "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."

// GLMConfig returns a config.json of the family: 3 trunk layers, the first
// dense, and depth MTP layers; mla selects multi-head latent attention.
func GLMConfig(depth int, mla bool) []byte {
	c := map[string]any{
		"architectures": []string{"TestGlm4MoeForCausalLM"}, "model_type": GLMModelType,
		"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
		"partial_rotary_factor": 0.5, "vocab_size": 512, "intermediate_size": 96, "moe_intermediate_size": 16,
		"n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
		"routed_scaling_factor": 2.5, "first_k_dense_replace": 1, "num_nextn_predict_layers": depth,
		"attention_bias": true, "rms_norm_eps": 1e-5, "rope_theta": 1e6, "norm_topk_prob": true,
		"max_position_embeddings": 128, "eos_token_id": 1,
	}
	if mla {
		c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"] = 32, 16, 8, 8, 16
	}
	b, _ := json.Marshal(c)
	return b
}

// glmFamily is the family's descriptor.
var glmFamily = &model.Family{
	Name: GLMName, Title: "test GLM", ModelTypes: []string{GLMModelType}, Arch: "TestGlm4Moe",
	ParseConfig: parseGLM, Spec: specGLM,
	GGUF: model.GGUFSpec{
		Arch: "test_glm4moe", PreTokenizer: "test_glm4",
		Top: map[string]gg.TensorName{"embed_tokens.weight": gg.Weight(gg.KindTokenEmbd), "norm.weight": gg.Weight(gg.KindOutputNorm), "lm_head.weight": gg.Weight(gg.KindOutput)},
		Layer: map[string]gg.TensorName{
			"input_layernorm.weight": gg.Weight(gg.KindAttnNorm), "post_attention_layernorm.weight": gg.Weight(gg.KindAttnPostNorm),
			"self_attn.q_proj.weight": gg.Weight(gg.KindAttnQ), "self_attn.q_proj.bias": gg.Bias(gg.KindAttnQ),
			"self_attn.k_proj.weight": gg.Weight(gg.KindAttnK), "self_attn.k_proj.bias": gg.Bias(gg.KindAttnK),
			"self_attn.v_proj.weight": gg.Weight(gg.KindAttnV), "self_attn.v_proj.bias": gg.Bias(gg.KindAttnV),
			"self_attn.o_proj.weight": gg.Weight(gg.KindAttnOut),
			"mlp.gate.weight":         gg.Weight(gg.KindFFNGateInp), "mlp.gate.e_score_correction_bias": gg.Bias(gg.KindFFNExpProbsB),
			"mlp.shared_experts.gate_proj.weight": gg.Weight(gg.KindFFNGateShexp), "mlp.shared_experts.up_proj.weight": gg.Weight(gg.KindFFNUpShexp),
			"mlp.shared_experts.down_proj.weight": gg.Weight(gg.KindFFNDownShexp),
			"eh_proj.weight":                      gg.Weight(gg.KindNextNEHProj), "enorm.weight": gg.Weight(gg.KindNextNEnorm), "hnorm.weight": gg.Weight(gg.KindNextNHnorm),
			"shared_head.norm.weight": gg.Weight(gg.KindNextNSharedHeadNorm), "embed_tokens.weight": gg.Weight(gg.KindNextNEmbedTokens),
			"shared_head.head.weight": gg.Weight(gg.KindNextNSharedHeadHead),
		},
		Metadata: func(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
			g.U32("nextn_predict_layers", m.MTPDepth)
			g.U32("leading_dense_block_count", model.KeysOf[families.DeepSeekConfig](m.Config).FirstKDenseReplace)
			return nil
		},
	},
	OpenVINO: model.OpenVINOSpec{Refusal: GLMRefusal},
}

func parseGLM(raw []byte) (*model.Config, error) {
	c, err := model.DecodeConfig(raw, model.ConfigDefaults{PartialRotaryFactor: 0.5, RMSNormEps: 1e-5, RopeTheta: 10000})
	if err != nil {
		return nil, err
	}
	if err := families.DecodeDeepSeekConfig(c); err != nil {
		return nil, err
	}
	ds := model.KeysOf[families.DeepSeekConfig](c)
	c.NumExperts = ds.NRoutedExperts // its own name for the routed experts
	c.SharedExpertIntermed = ds.NSharedExperts * c.MoeIntermediateSize
	keys := append(c.CommonKeys(), model.PositiveKey{Name: "intermediate_size", Value: c.IntermediateSize},
		model.PositiveKey{Name: "n_routed_experts", Value: ds.NRoutedExperts}, model.PositiveKey{Name: "n_group", Value: ds.NGroup})
	if err := model.CheckPositive(keys...); err != nil {
		return nil, err
	}
	if err := c.CheckCommon(); err != nil {
		return nil, err
	}
	if ds.FirstKDenseReplace > c.NumHiddenLayers {
		return nil, fmt.Errorf("first_k_dense_replace %d exceeds num_hidden_layers %d", ds.FirstKDenseReplace, c.NumHiddenLayers)
	}
	return c, nil
}

func mla(c *model.Config) bool {
	return model.KeysOf[families.DeepSeekConfig](c) != nil && model.KeysOf[families.DeepSeekConfig](c).KVLoraRank > 0
}

func specGLM(c *model.Config) *model.Spec {
	ds := model.KeysOf[families.DeepSeekConfig](c)
	if ds == nil {
		ds = &families.DeepSeekConfig{} // FamiliesWhere's empty config
	}
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	q, kv := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim)
	e, mi, si, di := int64(c.NumExperts), int64(c.MoeIntermediateSize), int64(c.SharedExpertIntermed), int64(c.IntermediateSize)
	w := func(s string, role model.Role, shape ...int64) model.Want {
		return model.Want{Suffix: s, Shape: shape, Role: role}
	}
	attention := []model.Want{
		w("self_attn.q_proj.weight", 0, q, h), w("self_attn.q_proj.bias", 0, q),
		w("self_attn.k_proj.weight", 0, kv, h), w("self_attn.k_proj.bias", 0, kv),
		w("self_attn.v_proj.weight", 0, kv, h), w("self_attn.v_proj.bias", 0, kv),
		w("self_attn.o_proj.weight", 0, h, q),
	}
	if mla(c) {
		nope, rope, vd := int64(ds.QKNopeHeadDim), int64(ds.QKRopeHeadDim), int64(ds.VHeadDim)
		heads, ql, kl := int64(c.NumAttentionHeads), int64(*ds.QLoraRank), int64(ds.KVLoraRank)
		attention = []model.Want{
			w("self_attn.q_a_proj.weight", 0, ql, h), w("self_attn.q_a_layernorm.weight", 0, ql),
			w("self_attn.q_b_proj.weight", 0, heads*(nope+rope), ql),
			w("self_attn.kv_a_proj_with_mqa.weight", 0, kl+rope, h), w("self_attn.kv_a_layernorm.weight", 0, kl),
			w("self_attn.kv_b_proj.weight", 0, heads*(nope+vd), kl),
			w("self_attn.o_proj.weight", 0, h, heads*vd),
		}
	}
	norms := []model.Want{w("input_layernorm.weight", 0, h), w("post_attention_layernorm.weight", 0, h)} // plain RMSNorm
	dense := []model.Want{w("mlp.gate_proj.weight", 0, di, h), w("mlp.up_proj.weight", 0, di, h), w("mlp.down_proj.weight", 0, h, di)}
	moe := []model.Want{
		w("mlp.gate.weight", model.RoleRouter, e, h), w("mlp.gate.e_score_correction_bias", model.RoleRouter, e),
		w("mlp.shared_experts.gate_proj.weight", 0, si, h), w("mlp.shared_experts.up_proj.weight", 0, si, h),
		w("mlp.shared_experts.down_proj.weight", 0, h, si),
	}
	isMoE := func(i int) bool { return i >= ds.FirstKDenseReplace }
	layer := func(i int) []model.Want {
		ws := append(slices.Clone(norms), attention...)
		if isMoE(i) {
			return append(ws, moe...)
		}
		return append(ws, dense...)
	}
	head := append(layer(c.NumHiddenLayers),
		w("eh_proj.weight", 0, h, 2*h), w("enorm.weight", 0, h), w("hnorm.weight", 0, h), w("shared_head.norm.weight", 0, h),
		// The reference converter may drop these copies of the trunk's.
		w("embed_tokens.weight", model.RoleOptional, v, h), w("shared_head.head.weight", model.RoleOptional, v, h))
	s := &model.Spec{
		TextPrefixes: []string{"model."}, HeadInLayers: true,
		TrunkTop:   []model.Want{w("embed_tokens.weight", 0, v, h), w("norm.weight", 0, h)},
		TrunkLayer: layer,
		HeadLayer:  head,
		MoE: &model.MoE{
			Experts: "mlp.experts.", FusedGateUp: "gate_up_proj", FusedDown: "down_proj",
			PerExpert: [3]string{"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
			Stacked:   [3]string{"mlp.switch_mlp.gate_proj.weight", "mlp.switch_mlp.up_proj.weight", "mlp.switch_mlp.down_proj.weight"},
		},
		Experts: func(layout model.ExpertLayout) []model.Want {
			var out []model.Want
			for x := range c.NumExperts {
				p := "mlp.experts." + strconv.Itoa(x) + "."
				out = append(out, w(p+"gate_proj.weight", 0, mi, h), w(p+"up_proj.weight", 0, mi, h), w(p+"down_proj.weight", 0, h, mi))
			}
			return out
		},
		MoELayer: isMoE,
		Forward:  forward,
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &model.Want{Suffix: "lm_head.weight", Shape: []int64{v, h}}
	}
	return s
}

// forward is the family's MTP forward: per MTP layer its own shared head;
// GQA with biases (or MLA) and sigmoid group routing.
func forward(m *model.Model) model.Forward {
	c, ds := m.Config, model.KeysOf[families.DeepSeekConfig](m.Config)
	p := m.HeadLayerPrefix(0)
	f := model.Forward{EmbedNorm: p + "enorm.weight", HiddenNorm: p + "hnorm.weight", EmbeddingFirst: true,
		FC: p + "eh_proj.weight", FinalNorm: p + "shared_head.norm.weight", Eps: c.RMSNormEps}
	for j := range m.MTPDepth {
		p := m.HeadLayerPrefix(j)
		sa, mp := p+"self_attn.", p+"mlp."
		at := model.Attention{Kind: model.AttnGQA, Prefix: sa,
			Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
			QBias: sa + "q_proj.bias", KBias: sa + "k_proj.bias", VBias: sa + "v_proj.bias",
			Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta}
		if mla(c) {
			at = model.Attention{Kind: model.AttnMLA, Prefix: sa, Q: sa + "q_b_proj.weight", O: sa + "o_proj.weight",
				QA: sa + "q_a_proj.weight", QANorm: sa + "q_a_layernorm.weight", KVA: sa + "kv_a_proj_with_mqa.weight",
				KVANorm: sa + "kv_a_layernorm.weight", KVB: sa + "kv_b_proj.weight", Heads: c.NumAttentionHeads,
				QLoraRank: *ds.QLoraRank, KVLoraRank: ds.KVLoraRank, QKNopeHeadDim: ds.QKNopeHeadDim, QKRopeHeadDim: ds.QKRopeHeadDim,
				VHeadDim: ds.VHeadDim, RotaryDim: ds.QKRopeHeadDim, RopeTheta: c.RopeTheta}
		}
		f.Layers = append(f.Layers, model.ForwardLayer{Prefix: p, InputNorm: p + "input_layernorm.weight",
			PostAttentionNorm: p + "post_attention_layernorm.weight", Attention: at,
			MLP: model.MLP{Kind: model.MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight",
				Gate: p + "mlp.switch_mlp.gate_proj.weight", Up: p + "mlp.switch_mlp.up_proj.weight", Down: p + "mlp.switch_mlp.down_proj.weight",
				Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: true,
				SharedPrefix: mp + "shared_experts.", SharedGate: mp + "shared_experts.gate_proj.weight",
				SharedUp: mp + "shared_experts.up_proj.weight", SharedDown: mp + "shared_experts.down_proj.weight",
				Routing: model.RouteSigmoidGroupTopK, ScoreCorrectionBias: mp + "gate.e_score_correction_bias",
				Groups: ds.NGroup, TopKGroups: ds.TopkGroup, ScalingFactor: ds.RoutedScalingFactor}})
	}
	return f
}

// RegisterGLM registers the family for the rest of the test.
func RegisterGLM(t testing.TB) { t.Cleanup(model.RegisterFamily(glmFamily)) }

// GLM describes a synthesised checkpoint of the family (inventory only,
// no tensor data) in a folder holding config.json and whatever files
// extra names; keep filters the tensors.
func GLM(t testing.TB, config []byte, keep func(name string) bool, extra map[string][]byte) *model.Model {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{model.ConfigFile: config}
	for n, b := range extra {
		files[n] = b
	}
	for n, b := range files {
		if err := writeFile(dir, n, b); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := model.ParseConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Describe(cfg, GLMInventory(cfg, source.Dir(dir), keep))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// GLMInventory lists every tensor the family's Spec wants for cfg (optional
// ones included), kept by keep, as one shard's BF16 tensors.
func GLMInventory(cfg *model.Config, src st.Opener, keep func(string) bool) *st.Checkpoint {
	s := specGLM(cfg)
	ck := &st.Checkpoint{Source: src, Tensors: map[string]*st.Tensor{}}
	shard := &st.Shard{Name: "model.safetensors", Header: &st.Header{}}
	add := func(prefix string, ws []model.Want) {
		for _, w := range ws {
			n := prefix + w.Suffix
			if keep != nil && !keep(n) {
				continue
			}
			ck.Tensors[n] = &st.Tensor{TensorInfo: st.TensorInfo{Name: n, DType: st.BF16, Shape: w.Shape}, Shard: shard}
			ck.Names = append(ck.Names, n)
		}
	}
	tp := s.TextPrefixes[0]
	add(tp, s.TrunkTop)
	if s.LMHead != nil {
		add("", []model.Want{*s.LMHead})
	}
	depth, _ := cfg.ConfigMTPDepth()
	for i := range cfg.NumHiddenLayers + depth {
		lp := tp + "layers." + strconv.Itoa(i) + "."
		if i < cfg.NumHiddenLayers {
			add(lp, s.TrunkLayer(i))
		} else {
			add(lp, s.HeadLayerWants(i-cfg.NumHiddenLayers))
		}
		if s.MoELayer(i) {
			add(lp, s.Experts(model.PerExpert))
		}
	}
	slices.Sort(ck.Names)
	ck.Shards = []*st.Shard{shard}
	return ck
}

func writeFile(dir, name string, b []byte) error {
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

// OwnFamily gives m a copy of its family's descriptor and returns it, so a
// test changes the tables m's targets read without changing the
// registered family every other test reads.
func OwnFamily(m *model.Model) *model.Family {
	f := *m.Family
	m.Family = &f
	return &f
}
