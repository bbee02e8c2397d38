package runtimes

import (
	"context"
	"strings"
	"testing"
)

type claimer struct {
	name  string
	claim bool
}

func (c claimer) Name() string                                       { return c.name }
func (c claimer) Check(Setup) error                                  { return nil }
func (c claimer) Claims(Setup) bool                                  { return c.claim }
func (c claimer) HeadCount(Setup) int                                { return 0 }
func (c claimer) Start(context.Context, Setup, Arm) (Session, error) { return nil, nil }

// withRegistry runs f against a registry holding only rs, then restores the real one.
func withRegistry(t *testing.T, rs []Runtime, f func()) {
	mu.Lock()
	saved := registry
	registry = map[string]Runtime{}
	mu.Unlock()
	defer func() { mu.Lock(); registry = saved; mu.Unlock() }()
	for _, r := range rs {
		Register(r)
	}
	f()
}

func TestInfer(t *testing.T) {
	cases := []struct {
		name    string
		rs      []Runtime
		want    string
		wantErr string
	}{
		{"one claims", []Runtime{claimer{"a", false}, claimer{"b", true}}, "b", ""},
		{"none claims", []Runtime{claimer{"a", false}}, "", "give --runtime (a)"},
		{"two claim", []Runtime{claimer{"a", true}, claimer{"b", true}}, "", "a or b: give --runtime"},
	}
	for _, c := range cases {
		withRegistry(t, c.rs, func() {
			r, err := Infer(Setup{Model: "m"})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
				}
				return
			}
			if err != nil || r.Name() != c.want {
				t.Errorf("%s: got %v %v, want %s", c.name, r, err, c.want)
			}
		})
	}
}

func TestLookupAndRegister(t *testing.T) {
	withRegistry(t, []Runtime{claimer{"x", false}}, func() {
		if _, err := Lookup("y"); err == nil || !strings.Contains(err.Error(), `--runtime "y": must be x`) {
			t.Errorf("Lookup(y): %v", err)
		}
		defer func() {
			if recover() == nil {
				t.Error("registering x twice did not panic")
			}
		}()
		Register(claimer{"x", true})
	})
}

func TestArmString(t *testing.T) {
	if s := (Arm{}).String(); s != "plain" {
		t.Errorf("plain arm: %q", s)
	}
	if s := (Arm{MTP: true, DraftTokens: 2}).String(); s != "mtp(2)" {
		t.Errorf("mtp arm: %q", s)
	}
}
