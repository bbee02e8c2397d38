package hf

// The per-layer lists of config.json that the heads read past the trunk
// (model.Family.HeadLayerLists): inspect names one shorter than the trunk
// and the MTP layers, --into restores the source's entries for the MTP
// layers and keeps the trunk's as the repo has them.

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// layerList is one of a config's head-spanning per-layer lists, where the
// family reads it: text_config's over the root's (a nested config's text
// keys are read over the top level's).
type layerList struct {
	Path    string // KEY or text_config.KEY
	Entries []json.RawMessage
}

// headLayerLists reads the family's HeadLayerLists from a config.json: those
// present as JSON lists (a scalar rope_theta, an absent key: nothing to
// judge), by key.
func headLayerLists(f *model.Family, raw []byte) (map[string]layerList, error) {
	out := map[string]layerList{}
	if len(f.HeadLayerLists) == 0 {
		return out, nil
	}
	root, err := jsonobj.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	var text jsonobj.Object
	if tc, ok := root.Get("text_config"); ok && string(tc) != "null" {
		if text, err = jsonobj.Decode(tc); err != nil {
			return nil, fmt.Errorf("%s: text_config: %w", model.ConfigFile, err)
		}
	}
	for _, k := range f.HeadLayerLists {
		path := "text_config." + k
		v, ok := text.Get(k)
		if !ok {
			path = k
			v, ok = root.Get(k)
		}
		var entries []json.RawMessage
		if !ok || json.Unmarshal(v, &entries) != nil {
			continue
		}
		out[k] = layerList{Path: path, Entries: entries}
	}
	return out, nil
}

// shortLayerLists are the problems of the lists that hold fewer entries
// than the trunk's layers and depth MTP layers, in the family's order.
func shortLayerLists(m *model.Model, depth int) ([]Problem, error) {
	lists, err := headLayerLists(m.Family, m.Config.Raw)
	if err != nil || depth == 0 {
		return nil, err
	}
	want := m.Config.NumHiddenLayers + depth
	var out []Problem
	for _, k := range m.Family.HeadLayerLists {
		l, ok := lists[k]
		if !ok || len(l.Entries) >= want {
			continue
		}
		out = append(out, Problem{model.ConfigFile + " " + l.Path, fmt.Sprintf(
			"has %d entries for num_hidden_layers %d + %d MTP layers: the runtimes build MTP layer j from entry %d + j, and vLLM fails to load the head (an IndexError)",
			len(l.Entries), m.Config.NumHiddenLayers, depth, m.Config.NumHiddenLayers)})
	}
	return out, nil
}

// mendLayerLists gives every head-spanning list of the repo's config (root)
// shorter than the trunk's and the head's layers the source's entries for
// the missing layers (as many as the source has), keeping the repo's own;
// it refuses a list whose entries differ from the source's (another model).
// It returns what it did, for the plan's notes.
func mendLayerLists(root *jsonobj.Object, repoRaw []byte, src *model.Model) ([]string, error) {
	repo, err := headLayerLists(src.Family, repoRaw)
	if err != nil {
		return nil, err
	}
	theirs, err := headLayerLists(src.Family, src.Config.Raw)
	if err != nil {
		return nil, err
	}
	want := src.Config.NumHiddenLayers + src.MTPDepth
	var notes []string
	for _, k := range src.Family.HeadLayerLists {
		r, ok := repo[k]
		if !ok || len(r.Entries) >= want {
			continue
		}
		s, ok := theirs[k]
		if !ok || len(s.Entries) <= len(r.Entries) {
			continue // the source's own list has nothing more: inspect says so of both
		}
		for i, e := range r.Entries {
			if !sameJSON(e, s.Entries[i]) {
				return nil, fmt.Errorf("%s %s[%d] is %s, the source's %s: the repo holds another model", model.ConfigFile, r.Path, i, e, s.Entries[i])
			}
		}
		end := min(want, len(s.Entries))
		mended := append(append([]json.RawMessage{}, r.Entries...), s.Entries[len(r.Entries):end]...)
		if err := setNested(root, r.Path, mended); err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("%s: %s gains the source's entries for layers %d to %d (the MTP layers'), its own %d kept", model.ConfigFile, r.Path, len(r.Entries), end-1, len(r.Entries)))
	}
	return notes, nil
}

// sameJSON compares two JSON values by value (0.0 and 0 alike, as Python reads them).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
