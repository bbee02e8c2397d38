package model

import "testing"

// A family's typed keys are decoded once and read back by type: a
// lineage's and the family's own side by side, a second SetKeys of one
// type replacing the first, a type never set read as its zero value.
func TestKeysOf(t *testing.T) {
	t.Parallel()
	type lineage struct{ A int }
	type own struct{ B string }
	c := &Config{}
	SetKeys(c, &lineage{A: 1})
	SetKeys(c, &own{B: "x"})
	SetKeys(c, &lineage{A: 2})
	if KeysOf[lineage](c).A != 2 || KeysOf[own](c).B != "x" || len(c.keys) != 2 {
		t.Errorf("keys %+v", c.keys)
	}
	if k := KeysOf[struct{ C int }](c); k == nil || k.C != 0 {
		t.Errorf("absent keys: %+v", k)
	}
}
