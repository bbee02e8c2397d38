package convert

import "strconv"

// The hybrid Qwen decoder (Qwen3.5/3.6-MoE and Qwen3-Next): GatedDeltaNet
// linear attention on three of four layers, gated full attention on the
// fourth, a sparse MoE with a gated shared expert in every layer, and an MTP
// head of the same full-attention MoE layer behind two pre-fc norms and fc.
// Every RMSNorm but linear_attn.norm is zero-centred (stored w, applied 1+w).
// The two family files differ only in where tensors live and in the linear
// attention's input projections.

// hybridSpec is the Spec the Qwen hybrid families share; linear lists the
// family's own linear-attention input projections. A dense config (the
// Qwen3.5/3.6 dense models) has a SwiGLU MLP where the others have the MoE.
func hybridSpec(c *Config, textPrefixes, visionPrefixes []string, linear []Want) *Spec {
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	norm := func(suffix string) Want { return Want{suffix, []int64{h}, RoleZeroCentredNorm} }
	layerNorms := []Want{norm("input_layernorm.weight"), norm("post_attention_layernorm.weight")}
	mlp := sparseMoE
	if c.Dense() {
		mlp = denseMLP
	}
	s := &Spec{
		TextPrefixes: textPrefixes, VisionPrefixes: visionPrefixes, HeadPrefix: "mtp.",
		TrunkTop: []Want{{"embed_tokens.weight", []int64{v, h}, 0}, norm("norm.weight")},
		TrunkLayer: func(layerType string) []Want {
			ws := append([]Want{}, layerNorms...)
			if layerType == FullAttention {
				ws = append(ws, gatedAttention(c)...)
			} else {
				ws = append(ws, linear...)
				ws = append(ws, gatedDeltaCommon(c)...)
			}
			return append(ws, mlp(c)...)
		},
		HeadTop: []Want{
			{"fc.weight", []int64{h, 2 * h}, 0},
			norm("pre_fc_norm_embedding.weight"),
			norm("pre_fc_norm_hidden.weight"),
			norm("norm.weight"),
		},
		HeadLayer: append(append(append([]Want{}, layerNorms...), gatedAttention(c)...), mlp(c)...),
		MoE: &MoE{
			Experts: "mlp.experts.", FusedGateUp: "gate_up_proj", FusedDown: "down_proj",
			PerExpert: [3]string{"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
			Stacked:   [3]string{"mlp.switch_mlp.gate_proj.weight", "mlp.switch_mlp.up_proj.weight", "mlp.switch_mlp.down_proj.weight"},
		},
		Experts: func(layout ExpertLayout) []Want { return expertTensors(c, layout) },
		Forward: hybridForward,
		MLX: MLXSpec{
			DrafterModelType: "qwen3_5_mtp",
			TrunkName: func(m *Model, n string) string {
				// mlx-lm's sanitize: model.language_model.X -> language_model.model.X, lm_head -> language_model.lm_head.
				if rest, ok := cutPrefix(n, m.TextPrefix); ok {
					return "language_model.model." + rest
				}
				return "language_model." + n
			},
		},
	}
	if !c.TieWordEmbeddings {
		s.LMHead = &Want{"lm_head.weight", []int64{v, h}, 0}
	}
	if c.Dense() {
		s.MoE, s.Experts = nil, nil
	}
	return s
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// gatedDeltaCommon lists the GatedDeltaNet tensors both families share.
// conv1d is expected in the raw PyTorch layout [C, 1, K].
func gatedDeltaCommon(c *Config) []Want {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return []Want{
		{"linear_attn.conv1d.weight", []int64{2*kd + vd, 1, int64(c.LinearConvKernelDim)}, RoleConv1d},
		{"linear_attn.A_log", []int64{nv}, RoleKeepDType}, // mlx-lm keeps A_log as stored (float32 in Qwen3.5)
		{"linear_attn.dt_bias", []int64{nv}, 0},
		{"linear_attn.norm.weight", []int64{int64(c.LinearValueHeadDim)}, 0}, // a plain norm, never shifted
		{"linear_attn.out_proj.weight", []int64{h, vd}, 0},
	}
}

// gatedAttention lists a gated full-attention block (trunk every 4th layer, and the MTP layer).
func gatedAttention(c *Config) []Want {
	h := int64(c.HiddenSize)
	q := int64(c.NumAttentionHeads * c.HeadDim)
	kv := int64(c.NumKeyValueHeads * c.HeadDim)
	qOut := q
	if c.outputGate() {
		qOut = 2 * q // queries and their sigmoid gate, interleaved per head
	}
	d := int64(c.HeadDim)
	return []Want{
		{"self_attn.q_proj.weight", []int64{qOut, h}, 0},
		{"self_attn.k_proj.weight", []int64{kv, h}, 0},
		{"self_attn.v_proj.weight", []int64{kv, h}, 0},
		{"self_attn.o_proj.weight", []int64{h, q}, 0},
		{"self_attn.q_norm.weight", []int64{d}, RoleZeroCentredNorm},
		{"self_attn.k_norm.weight", []int64{d}, RoleZeroCentredNorm},
	}
}

// sparseMoE lists the non-expert tensors of a MoE block with a gated shared expert.
func sparseMoE(c *Config) []Want {
	h, e, si := int64(c.HiddenSize), int64(c.NumExperts), int64(c.SharedExpertIntermed)
	return []Want{
		{"mlp.gate.weight", []int64{e, h}, RoleRouter},
		{"mlp.shared_expert.gate_proj.weight", []int64{si, h}, 0},
		{"mlp.shared_expert.up_proj.weight", []int64{si, h}, 0},
		{"mlp.shared_expert.down_proj.weight", []int64{h, si}, 0},
		{"mlp.shared_expert_gate.weight", []int64{1, h}, RoleRouter},
	}
}

// denseMLP lists a dense SwiGLU MLP.
func denseMLP(c *Config) []Want {
	h, i := int64(c.HiddenSize), int64(c.IntermediateSize)
	return []Want{
		{"mlp.gate_proj.weight", []int64{i, h}, 0},
		{"mlp.up_proj.weight", []int64{i, h}, 0},
		{"mlp.down_proj.weight", []int64{h, i}, 0},
	}
}

// expertTensors lists the routed-expert tensors of one block in a layout.
func expertTensors(c *Config, layout ExpertLayout) []Want {
	h, i := int64(c.HiddenSize), int64(c.MoeIntermediateSize)
	if layout == Fused {
		e := int64(c.NumExperts)
		return []Want{
			{"mlp.experts.gate_up_proj", []int64{e, 2 * i, h}, 0},
			{"mlp.experts.down_proj", []int64{e, h, i}, 0},
		}
	}
	out := make([]Want, 0, 3*c.NumExperts)
	for e := 0; e < c.NumExperts; e++ {
		p := "mlp.experts." + strconv.Itoa(e) + "."
		out = append(out,
			Want{p + "gate_proj.weight", []int64{i, h}, 0},
			Want{p + "up_proj.weight", []int64{i, h}, 0},
			Want{p + "down_proj.weight", []int64{h, i}, 0})
	}
	return out
}

// hybridForward is the MTP forward of the checkpoint's modelling code:
// fc(concat(norm_e(embedding), norm_h(hidden))), then per layer gated
// attention and the sparse MoE with residuals, then mtp.norm.
func hybridForward(m *Model) Forward {
	c := m.Config
	f := Forward{
		EmbedNorm: "mtp.pre_fc_norm_embedding.weight", HiddenNorm: "mtp.pre_fc_norm_hidden.weight",
		EmbeddingFirst: true, FC: "mtp.fc.weight", FinalNorm: "mtp.norm.weight", Eps: c.RMSNormEps,
	}
	for j := 0; j < m.MTPDepth; j++ {
		p := "mtp.layers." + strconv.Itoa(j) + "."
		sa, mp := p+"self_attn.", p+"mlp."
		f.Layers = append(f.Layers, ForwardLayer{
			Prefix: p, InputNorm: p + "input_layernorm.weight", PostAttentionNorm: p + "post_attention_layernorm.weight",
			Attention: Attention{
				Kind: AttnGatedFull, Prefix: sa,
				Q: sa + "q_proj.weight", K: sa + "k_proj.weight", V: sa + "v_proj.weight", O: sa + "o_proj.weight",
				QNorm: sa + "q_norm.weight", KNorm: sa + "k_norm.weight",
				Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
				RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta, OutputGate: c.outputGate(),
			},
			MLP: hybridMLP(c, p, mp),
		})
	}
	return f
}

// hybridMLP is a layer's MLP: the sparse MoE, or a dense SwiGLU.
func hybridMLP(c *Config, p, mp string) MLP {
	if c.Dense() {
		return MLP{Kind: MLPDense, Prefix: mp, Gate: mp + "gate_proj.weight", Up: mp + "up_proj.weight", Down: mp + "down_proj.weight"}
	}
	return MLP{
		Kind: MLPSparseMoE, Prefix: mp, Router: mp + "gate.weight",
		Gate: p + "mlp.switch_mlp.gate_proj.weight", Up: p + "mlp.switch_mlp.up_proj.weight", Down: p + "mlp.switch_mlp.down_proj.weight",
		Experts: c.NumExperts, TopK: c.NumExpertsPerTok, NormTopK: c.NormTopkProb == nil || *c.NormTopkProb,
		SharedPrefix: mp + "shared_expert.", SharedGate: mp + "shared_expert.gate_proj.weight",
		SharedUp: mp + "shared_expert.up_proj.weight", SharedDown: mp + "shared_expert.down_proj.weight",
		SharedExpertGate: mp + "shared_expert_gate.weight",
	}
}
