package model

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// GGUFKeys are an architecture's metadata keys as the reference
// converter's GGUFWriter collects them: in the order first set, a key set
// again keeping its place with the new value (a family's
// set_gguf_parameters overriding a key its base class wrote).
type GGUFKeys struct {
	arch string
	kvs  []gg.KV
}

// Set sets the architecture's key k ("block_count" is "{arch}.block_count").
func (g *GGUFKeys) Set(k string, v gg.Value) {
	key := g.arch + "." + k
	if i := slices.IndexFunc(g.kvs, func(kv gg.KV) bool { return kv.Key == key }); i >= 0 {
		g.kvs[i].Value = v
		return
	}
	g.kvs = append(g.kvs, gg.KV{Key: key, Value: v})
}

// U32 sets a uint32 key; F32 a float32 one; Bool a boolean one.
func (g *GGUFKeys) U32(k string, v int)     { g.Set(k, gg.U32(uint32(v))) }
func (g *GGUFKeys) F32(k string, v float64) { g.Set(k, gg.Float(float32(v))) }
func (g *GGUFKeys) Bool(k string, v bool)   { g.Set(k, gg.Bool(v)) }

// GGUFMetadata is every architecture key the reference converter writes
// for the model, in its order: base, TextModel.set_gguf_parameters's
// (ggufBase, on the hparams as the family's GGUFSpec.Hparams adjusts them
// first); own, the keys the family's set_gguf_parameters adds after them
// (GGUFSpec.Metadata; one it sets again stays among base, with its value).
// general.file_type goes between the two.
//
// The converter reads transformers' configuration object, not
// config.json: the keys its class always has are there with the class's
// defaults. Those the base reads and a config may leave out, rope_theta
// and rms_norm_eps, are filled from the family's decoded config (its
// ConfigDefaults are the class's); a family fills its own in Hparams.
func (m *Model) GGUFMetadata(h Hparams) (base, own []gg.KV, err error) {
	gs := m.Family.GGUF
	h = maps.Clone(h)
	if _, ok := h["rms_norm_eps"]; !ok {
		h["rms_norm_eps"] = JSONNumber(m.Config.RMSNormEps)
	}
	if _, ok := RopeParameters(h)["rope_theta"]; !ok {
		h["rope_theta"] = JSONNumber(m.Config.RopeTheta)
	}
	if gs.Hparams != nil {
		gs.Hparams(m, h)
	}
	g := &GGUFKeys{arch: gs.Arch}
	if err := ggufBase(m, h, g); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	n := len(g.kvs)
	if gs.Metadata != nil {
		if err := gs.Metadata(m, h, g); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ConfigFile, err)
		}
	}
	return g.kvs[:n:n], g.kvs[n:], nil
}

// GGUFHeadBlock is the GGUF block of MTP layer 0: n_layer, after the
// trunk's blocks, or 0 in a separate drafter's file (GGUFSpec.Drafter: the
// Gemma-4 assistant, whose checkpoint has no trunk, and DSpark's dflash
// draft, whose stages are blocks 0.. although the checkpoint holds a trunk).
func (m *Model) GGUFHeadBlock() int {
	if m.Family.GGUF.Drafter {
		return 0
	}
	return m.Config.NumHiddenLayers
}

// GGUFExpertGating is llama.cpp's expert_gating_func by name (gguf-py's ExpertGatingFuncType).
var GGUFExpertGating = map[string]int{"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}

// ggufBase is TextModel.set_gguf_parameters of the llama.cpp vendored by
// llama-cpp-python 0.3.36, key for key: the block count (trunk and MTP
// layers), the dimensions under each of the names it looks for, RoPE
// (scaling: linear, yarn with its factors, longrope; M-RoPE sections;
// the base frequency and the sliding-window one), the norms' epsilons, the
// expert counts and groups, the expert gating function from the router's
// scoring function, head_dim.
func ggufBase(m *Model, h Hparams, g *GGUFKeys) error {
	g.U32("block_count", m.GGUFHeadBlock()+m.MTPDepth)
	ints := []struct {
		key   string
		names []string
	}{
		{"context_length", []string{"max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"}},
		{"embedding_length", []string{"hidden_size", "n_embd", "dim"}},
		{"feed_forward_length", []string{"prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"}},
		{"attention.head_count", []string{"num_attention_heads", "n_head", "n_heads"}},
		{"attention.head_count_kv", []string{"num_key_value_heads", "n_kv_heads"}},
	}
	for _, k := range ints {
		if err := g.U32FromHparams(h, k.key, k.names...); err != nil {
			return err
		}
	}
	if b, ok := h["is_causal"].(bool); ok && !b {
		g.Bool("attention.causal", false)
	}
	rope := RopeParameters(h)
	rp := rope
	if fa, ok := rope["full_attention"].(map[string]any); ok {
		rp = fa
	}
	if typ, ok := rp["rope_type"].(string); ok {
		factor, hasFactor := rp["factor"].(json.Number)
		switch {
		case typ == "linear" && hasFactor:
			g.Set("rope.scaling.type", gg.Str("linear"))
			g.F32FromNumber("rope.scaling.factor", factor)
		case typ == "yarn" && hasFactor:
			g.Set("rope.scaling.type", gg.Str("yarn"))
			g.F32FromNumber("rope.scaling.factor", factor)
			orig, ok := rp["original_max_position_embeddings"].(json.Number)
			if !ok {
				return fmt.Errorf("yarn RoPE scaling without original_max_position_embeddings")
			}
			if err := g.intValue("rope.scaling.original_context_length", "original_max_position_embeddings", orig); err != nil {
				return err
			}
			for _, k := range [][2]string{{"yarn_ext_factor", "extrapolation_factor"}, {"yarn_attn_factor", "attention_factor"}, {"yarn_beta_fast", "beta_fast"}, {"yarn_beta_slow", "beta_slow"}} {
				v, ok := rp[k[1]].(json.Number)
				if !ok && k[1] == "attention_factor" {
					v, ok = rp["attn_factor"].(json.Number)
				}
				if ok {
					g.F32FromNumber("rope.scaling."+k[0], v)
				}
			}
		case typ == "su" || typ == "longrope":
			g.Set("rope.scaling.type", gg.Str("longrope"))
		}
	}
	if ms, ok := rope["mrope_section"].([]any); ok {
		sec := make([]int32, 0, 4)
		for _, x := range ms {
			n, ok := x.(json.Number)
			v, err := n.Int64()
			if !ok || err != nil {
				return fmt.Errorf("rope mrope_section %v is not a list of integers", ms)
			}
			sec = append(sec, int32(v))
		}
		for len(sec) < 4 {
			sec = append(sec, 0)
		}
		g.Set("rope.dimension_sections", gg.Int32s(sec[:4]))
	}
	if v, ok := rp["rope_theta"].(json.Number); ok {
		g.F32FromNumber("rope.freq_base", v)
	}
	if swa, ok := rope["sliding_attention"].(map[string]any); ok {
		if v, ok := swa["rope_theta"].(json.Number); ok {
			g.F32FromNumber("rope.freq_base_swa", v)
		}
	}
	if v, ok := h.first("rms_norm_eps", "norm_eps").(json.Number); ok {
		g.F32FromNumber("attention.layer_norm_rms_epsilon", v)
	}
	if v, ok := h.first("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon").(json.Number); ok {
		g.F32FromNumber("attention.layer_norm_epsilon", v)
	}
	for _, k := range []struct {
		key   string
		names []string
	}{
		{"expert_count", []string{"num_local_experts", "num_experts", "n_routed_experts"}},
		{"expert_used_count", []string{"num_experts_per_tok", "num_experts_per_token", "top_k_experts"}},
		{"expert_group_count", []string{"n_group"}},
		{"expert_group_used_count", []string{"topk_group"}},
	} {
		if err := g.U32FromHparams(h, k.key, k.names...); err != nil {
			return err
		}
	}
	if f := h.first("score_function", "scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn"); f != nil {
		s, _ := f.(string)
		gating, ok := GGUFExpertGating[s]
		if !ok {
			return fmt.Errorf("the experts' scoring function %v is none llama.cpp knows (softmax, sigmoid, sqrtsoftplus)", f)
		}
		g.U32("expert_gating_func", gating)
	}
	if _, ok := h["head_dim"]; ok {
		if err := g.U32FromHparams(h, "attention.key_length", "head_dim"); err != nil {
			return err
		}
		_ = g.U32FromHparams(h, "attention.value_length", "head_dim")
	}
	return nil
}

// RopeParameters is TextModel's rope_parameters: rope_parameters (or
// rope_scaling) with the global values mirrored into it when it has no
// per-attention-kind entries.
func RopeParameters(h Hparams) map[string]any {
	v, ok := h["rope_parameters"]
	if !ok {
		v = h["rope_scaling"]
	}
	rope, _ := v.(map[string]any)
	rope = maps.Clone(rope)
	if rope == nil {
		rope = map[string]any{}
	}
	_, full := rope["full_attention"]
	_, sliding := rope["sliding_attention"]
	if full || sliding {
		return rope
	}
	if v := h.first("local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"); v != nil {
		rope["sliding_attention"] = map[string]any{"rope_theta": v}
	}
	for _, k := range []struct {
		key   string
		names []string
	}{
		{"rope_theta", []string{"global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"}},
		{"partial_rotary_factor", []string{"partial_rotary_factor", "rope_pct", "rope_percent"}},
		{"original_max_position_embeddings", []string{"original_max_position_embeddings"}},
	} {
		if _, ok := rope[k.key]; !ok {
			if v := h.first(k.names...); v != nil {
				rope[k.key] = v
			}
		}
	}
	if _, ok := rope["rope_type"]; !ok {
		if t, ok := rope["type"]; ok && t != nil {
			rope["rope_type"] = t
		}
	}
	return rope
}

// JSONNumber is a float as config.json would spell it.
func JSONNumber(v float64) json.Number { return json.Number(strconv.FormatFloat(v, 'g', -1, 64)) }

// first is find_hparam: the value of the first key present (nil: none).
func (h Hparams) first(keys ...string) any {
	for _, k := range keys {
		if v, ok := h[k]; ok {
			return v
		}
	}
	return nil
}

// U32FromHparams sets k to the first of names present, as an integer.
func (g *GGUFKeys) U32FromHparams(h Hparams, k string, names ...string) error {
	for _, n := range names {
		if v, ok := h[n]; ok {
			if v == nil {
				return nil // present but null: find_hparam's None
			}
			num, _ := v.(json.Number)
			return g.intValue(k, n, num)
		}
	}
	return nil
}

func (g *GGUFKeys) intValue(k, name string, v json.Number) error {
	n, err := v.Int64()
	if err != nil || n < 0 || n > 1<<32-1 {
		return fmt.Errorf("%s is %q, not an unsigned 32-bit integer", name, v)
	}
	g.U32(k, int(n))
	return nil
}

func (g *GGUFKeys) F32FromNumber(k string, v json.Number) {
	f, _ := v.Float64() // json.Number is a number
	g.F32(k, f)
}
