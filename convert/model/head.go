package model

import (
	"strconv"
	"strings"
)

// headPart places a tensor name in the head the Spec describes, for a trunk
// of nLayers layers: j >= 0 and rest its suffix under MTP layer j, or j = -1
// and rest its name under the prefix of a head apart.
func (s *Spec) headPart(name string, nLayers int) (j int, rest string, ok bool) {
	if !s.HeadInLayers {
		rest, ok := strings.CutPrefix(name, s.HeadPrefix)
		if !ok {
			return 0, "", false
		}
		if s.HeadOneLayer {
			return 0, rest, true
		}
		if l, ok := strings.CutPrefix(rest, s.headLayers()); ok {
			num, suffix, found := strings.Cut(l, ".")
			if j, err := strconv.Atoi(num); found && err == nil && j >= 0 {
				return j, suffix, true
			}
		}
		return -1, rest, true
	}
	for _, p := range s.TextPrefixes {
		l, ok := strings.CutPrefix(name, p+"layers.")
		if !ok {
			continue
		}
		num, suffix, found := strings.Cut(l, ".")
		if i, err := strconv.Atoi(num); found && err == nil && i >= nLayers {
			return i - nLayers, suffix, true
		}
		return 0, "", false
	}
	return 0, "", false
}

// headPattern is how messages name the head's tensors: "mtp." for a head
// apart, "model.layers.{N+}." for one in the layer list.
func (s *Spec) headPattern(textPrefix string, nLayers int) string {
	if !s.HeadInLayers {
		return s.HeadPrefix
	}
	return textPrefix + "layers.{" + strconv.Itoa(nLayers) + "+}."
}

// IsHead reports whether a tensor belongs to the MTP head.
func (m *Model) IsHead(name string) bool {
	_, _, ok := m.Spec.headPart(name, m.Config.NumHiddenLayers)
	return ok
}

// HeadRelative is a head tensor's name as targets rename it: "layers.{j}."
// and its suffix for a tensor of MTP layer j, its name under the head
// prefix otherwise (mtp.fc.weight -> fc.weight; model.layers.N.eh_proj.weight
// -> layers.0.eh_proj.weight).
func (m *Model) HeadRelative(name string) string {
	j, rest, _ := m.Spec.headPart(name, m.Config.NumHiddenLayers)
	if j < 0 {
		return rest
	}
	return "layers." + strconv.Itoa(j) + "." + rest
}

// HeadName is the checkpoint's name of a head tensor given as HeadRelative says it.
func (m *Model) HeadName(rel string) string {
	if l, ok := strings.CutPrefix(rel, "layers."); ok {
		num, suffix, _ := strings.Cut(l, ".")
		if j, err := strconv.Atoi(num); err == nil {
			return m.HeadLayerPrefix(j) + suffix
		}
	}
	return m.Spec.HeadPrefix + rel
}

// HeadLayerPrefix is where MTP layer j's tensors live.
func (m *Model) HeadLayerPrefix(j int) string {
	if m.Spec.HeadInLayers {
		return m.TextPrefix + "layers." + strconv.Itoa(m.Config.NumHiddenLayers+j) + "."
	}
	if m.Spec.HeadOneLayer {
		return m.Spec.HeadPrefix
	}
	return m.Spec.HeadPrefix + m.Spec.headLayers() + strconv.Itoa(j) + "."
}

// headLayers is where a head apart keeps its layers under HeadPrefix.
func (s *Spec) headLayers() string {
	if s.HeadLayersNumbered {
		return ""
	}
	if s.HeadLayers != "" {
		return s.HeadLayers
	}
	return "layers."
}

// HeadLayerWants is what MTP layer j holds (HeadLayerAt, else HeadLayer).
func (s *Spec) HeadLayerWants(j int) []Want {
	if s.HeadLayerAt != nil {
		return s.HeadLayerAt(j)
	}
	return s.HeadLayer
}

// moeLayer reports whether layer i (MTP layer j is num_hidden_layers + j) routes experts.
func (s *Spec) moeLayer(i int) bool {
	return s.MoE != nil && (s.MoELayer == nil || s.MoELayer(i))
}

// MLAKVB maps each multi-head latent attention kv_b_proj of the head to its attention.
func (m *Model) MLAKVB() map[string]Attention {
	out := map[string]Attention{}
	if m.Spec.Forward != nil {
		for _, l := range m.Spec.Forward(m).Layers {
			if l.Attention.Kind == AttnMLA {
				out[l.Attention.KVB] = l.Attention
			}
		}
	}
	return out
}
