package model

import (
	"slices"
	"testing"
)

// The identity carries the config's key names, top level and
// text_config's, sorted and once each: what tells two families sharing a
// model_type apart.
func TestIdentityKeys(t *testing.T) {
	t.Parallel()
	id, err := ReadIdentity([]byte(`{"model_type":"a","x":1,"text_config":{"model_type":"b","y":[1],"x":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"model_type", "text_config", "x", "y"}; !slices.Equal(id.Keys, want) {
		t.Errorf("keys %v, want %v", id.Keys, want)
	}
	if !id.HasKey("y") || !id.HasKey("x") || id.HasKey("z") {
		t.Errorf("HasKey over %v", id.Keys)
	}
	if id, err := ReadIdentity([]byte(`{"model_type":"a","text_config":null}`)); err != nil || !slices.Equal(id.Keys, []string{"model_type", "text_config"}) {
		t.Errorf("a null text_config: %v, %v", id.Keys, err)
	}
}
