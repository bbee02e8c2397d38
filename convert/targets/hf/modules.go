package hf

import (
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Kind is what a runtime builds a head module as, before its quantization
// config is asked.
type Kind string

const (
	// KindLinear is one of vLLM's and SGLang's LinearBase layers (column,
	// row, QKV or merged column parallel): the quantization method decides.
	KindLinear Kind = "linear"
	// KindExperts is a MoE block's routed experts (vLLM's RoutedExperts,
	// SGLang's FusedMoE), one module for every expert.
	KindExperts Kind = "experts"
	// KindLMHead is a ParallelLMHead (GLM's shared_head.head).
	KindLMHead Kind = "lm_head"
)

// Module is one weight-bearing module of the head that a quantization config
// could quantize, named as the checkpoint names it (which is vLLM's prefix
// for every head this tool writes).
type Module struct {
	Name string `json:"module"`
	// Rel is the name under the head's layer or prefix (fc, self_attn.qkv_proj).
	Rel  string `json:"-"`
	Kind Kind   `json:"kind"`
	// Layer is the MTP layer (-1 for a module of the head's top).
	Layer int `json:"layer"`
	// Shards are the checkpoint modules a fused module is loaded from (the
	// runtimes' packed_modules_mapping): q_proj, k_proj, v_proj for qkv_proj.
	Shards []string `json:"shards,omitempty"`
	// expertParts are, for experts, the names by which a runtime's MoE
	// layer asks a compressed-tensors config about expert 0's projections
	// (set by Decide per runtime; nil: NAME.0.{gate,up,down}_proj).
	expertParts []string
}

// packed is the runtimes' packed_modules_mapping for the head classes: vLLM
// qwen3_5_mtp.py:217-224 (qkv_proj, gate_up_proj), deepseek_v2.py's
// fused_qkv_a_proj for multi-head latent attention; SGLang's classes use the
// same names (qwen3_5_mtp.py:94-99).
var packed = []struct {
	fused  string
	shards []string
}{
	{"qkv_proj", []string{"q_proj", "k_proj", "v_proj"}},
	{"gate_up_proj", []string{"gate_proj", "up_proj"}},
	{"fused_qkv_a_proj", []string{"q_a_proj", "kv_a_proj_with_mqa"}},
	// Inkling's attention: vLLM 0.34.0's qkvr (models/inkling/nvidia/model.py:410-413).
	{"qkvr", []string{"wq_du", "wk_dv", "wv_dv", "wr_du"}},
}

// HeadModules lists the head's quantizable modules for a head of depth
// layers, from the family's Spec (so a repo that lacks the head is described
// too): every 2-D linear weight that is not a router or an embedding, the
// shards of a fused module folded into it, and each MoE layer's experts.
// A module a family stores either fused or in shards is listed as the
// checkpoint holds it.
func HeadModules(m *model.Model, depth int) []Module {
	return headModules(m, depth, m.Checkpoint.Tensors)
}

// headModules is HeadModules with a fused module's form read from tensors:
// --into describes the repo as it will be, its head added (a headless
// MiMo-V2.5 repo holds no qkv_proj, the head it gains does).
func headModules(m *model.Model, depth int, tensors map[string]*st.Tensor) []Module {
	s := m.Spec
	var out []Module
	add := func(prefix string, layer int, wants []model.Want) {
		var rels []string
		for _, w := range wants {
			rel, ok := strings.CutSuffix(w.Suffix, ".weight")
			if !ok || len(w.Shape) != 2 || w.Role&model.RoleRouter != 0 || strings.HasSuffix(rel, "embed_tokens") {
				continue
			}
			rels = append(rels, rel)
		}
		for _, rel := range fold(rels, func(rel string) bool { _, ok := tensors[prefix+rel+".weight"]; return ok }) {
			mod := Module{Name: prefix + rel.name, Rel: rel.name, Kind: KindLinear, Layer: layer}
			for _, sh := range rel.shards {
				mod.Shards = append(mod.Shards, prefix+sh)
			}
			if slices.Contains(m.Family.HF.LMHeads, rel.name) {
				mod.Kind = KindLMHead
			}
			out = append(out, mod)
		}
	}
	if !s.HeadInLayers {
		add(s.HeadPrefix, -1, s.HeadTop)
	}
	for j := range depth {
		lp := m.HeadLayerPrefix(j)
		add(lp, j, s.HeadLayerWants(j))
		i := m.Config.NumHiddenLayers + j
		if s.MoE != nil && (s.MoELayer == nil || s.MoELayer(i)) {
			rel := strings.TrimSuffix(s.MoE.Experts, ".")
			out = append(out, Module{Name: lp + rel, Rel: rel, Kind: KindExperts, Layer: j})
		}
		if s.MoE == nil && s.ExpertsAsTensors {
			// Fused stacked experts the Spec wants as tensors (Hy4's
			// mlp.experts.gate_up_proj [E, 2I, H]): the runtimes' one experts module.
			for _, w := range s.HeadLayerWants(j) {
				if k := strings.Index(w.Suffix, "experts."); k >= 0 && len(w.Shape) == 3 {
					rel := w.Suffix[:k+len("experts")]
					if !slices.ContainsFunc(out, func(o Module) bool { return o.Name == lp+rel }) {
						out = append(out, Module{Name: lp + rel, Rel: rel, Kind: KindExperts, Layer: j})
					}
				}
			}
		}
	}
	return out
}

type folded struct {
	name     string
	shards   []string
	deferred bool // a fused module listed where its shards stand
}

// fold replaces the shards of a fused module (all of them, under one
// parent) by the module, in the position of its first shard. A family that
// stores either form (MiMo-V2.5's qkv_proj, MiMo-V2-Flash's q/k/v_proj,
// both optional in its Spec) lists the fused module once: stored whole when
// the checkpoint holds it (held), else from its shards.
func fold(rels []string, held func(rel string) bool) []folded {
	// shardsOf are the listed shards of the fused module whole (nil unless all are).
	shardsOf := func(parent string, p struct {
		fused  string
		shards []string
	}) []string {
		var shards []string
		for _, sh := range p.shards {
			if n := parent + sh; slices.Contains(rels, n) {
				shards = append(shards, n)
			}
		}
		if len(shards) < len(p.shards) {
			return nil
		}
		return shards
	}
	var out []folded
	done := map[string]bool{}
	for _, r := range rels {
		if done[r] {
			continue
		}
		parent, leaf := splitLeaf(r)
		f := folded{name: r}
		for _, p := range packed {
			switch {
			case leaf == p.fused && shardsOf(parent, p) != nil && !held(r):
				// Listed from its shards, where they stand.
				f = folded{name: r, deferred: true}
			case slices.Contains(p.shards, leaf):
				shards := shardsOf(parent, p)
				if shards == nil {
					break
				}
				whole := parent + p.fused
				f = folded{name: whole, shards: shards}
				switch {
				case done[whole]:
					f = folded{} // listed whole already
				case slices.Contains(rels, whole) && held(whole):
					f.shards = nil // stored whole: the shards are the other layout's
				}
				for _, sh := range shards {
					done[sh] = true
				}
				done[whole] = true
			default:
				continue
			}
			break
		}
		if f.deferred {
			continue
		}
		done[r] = true
		if f.name != "" {
			out = append(out, f)
		}
	}
	return out
}

// splitLeaf splits "self_attn.q_proj" into "self_attn." and "q_proj".
func splitLeaf(name string) (parent, leaf string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i+1], name[i+1:]
	}
	return "", name
}

// parts are the checkpoint modules a module's weights are stored under:
// its shards, or itself.
func (mod Module) parts() []string {
	if len(mod.Shards) > 0 {
		return mod.Shards
	}
	return []string{mod.Name}
}
