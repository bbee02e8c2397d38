package export_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/convert/targets/hf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

const ctW8A8 = `{"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
	"weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}}},
	"ignore": ["lm_head", "re:.*mlp.gate$", "re:.*shared_expert_gate$", "re:.*linear_attn.*", "re:.*visual.*"]}`

// An --into an HF repo stopped before any step of its final phase (a kill,
// or a rename that fails: an immutable config.json) leaves a repo that
// builds every head module it lists as it is stored, for both runtimes:
// config.json excludes the head before the index lists it, and declares the
// depth only once the head is in. Running again with --force completes it
// to the bytes of an uninterrupted run. Each case has a different step
// list: a config that declares its depth (the exclusion first, in one
// step), one that does not (an interim config first, the final one last),
// a single-file repo (the index is ours), and a second --force over a
// complete addition.
func TestIntoHFEveryPrefixServes(t *testing.T) {
	src := testmodel.Load(t, fixtures.Qwen36)
	req := func(dir string, force bool) export.Request {
		return export.Request{Model: src, Target: "hf", Dest: export.Into(dir), Force: force, Version: "test", Jobs: 1, Options: targets.Options{Set: map[string]bool{}}}
	}
	for _, tc := range []struct {
		name   string
		rs     testmodel.HFRepo
		again  bool // the stop comes in a --force run over a complete addition (its originals kept already)
		nSteps int
	}{
		{"depth declared", testmodel.HFRepo{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: testmodel.TrunkInt8}, false, 5},
		{"no depth key", testmodel.HFRepo{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: testmodel.TrunkInt8, NoDepth: true}, false, 6},
		{"single file", testmodel.HFRepo{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: testmodel.TrunkInt8, Single: true, NoDepth: true}, false, 6},
		{"--force over a complete addition", testmodel.HFRepo{Fixture: fixtures.Qwen36, Quant: ctW8A8, Storage: testmodel.TrunkInt8, NoDepth: true}, true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			export.FailIntoStep(t, -1)
			ref := tc.rs.Write(t)
			if _, err := export.Export(context.Background(), req(ref, false)); err != nil {
				t.Fatal(err)
			}
			want := readTree(t, ref)
			stops := 0
			for k := 0; ; k++ {
				dir := tc.rs.Write(t)
				if tc.again {
					export.FailIntoStep(t, -1)
					if _, err := export.Export(context.Background(), req(dir, false)); err != nil {
						t.Fatal(err)
					}
				}
				export.FailIntoStep(t, k)
				_, err := export.Export(context.Background(), req(dir, tc.again))
				if err == nil {
					break
				}
				stops++
				if !strings.Contains(err.Error(), "run it again with --force") {
					t.Fatalf("stopped before step %d: %v", k, err)
				}
				checkBuildsAsStored(t, dir, k)
				export.FailIntoStep(t, -1)
				if _, err := export.Export(context.Background(), req(dir, true)); err != nil {
					t.Fatalf("stopped before step %d, then again with --force: %v", k, err)
				}
				if got := readTree(t, dir); !maps.Equal(got, want) {
					for n := range want {
						if got[n] != want[n] {
							t.Errorf("stopped before step %d, completed: %s differs from an uninterrupted run's", k, n)
						}
					}
				}
			}
			if stops != tc.nSteps {
				t.Errorf("the final phase has %d steps, want %d", stops, tc.nSteps)
			}
		})
	}
}

// checkBuildsAsStored: every head module the repo lists is built by both
// runtimes as it is stored (a listed bf16 head built int8 drafts at ~0 %).
func checkBuildsAsStored(t *testing.T, dir string, k int) {
	t.Helper()
	m, err := hf.Load(source.Dir(dir))
	if err != nil {
		t.Fatalf("stopped before step %d: the repo does not load: %v", k, err)
	}
	defer m.Checkpoint.Close()
	sv, err := hf.Serving(m)
	if err != nil {
		t.Fatalf("stopped before step %d: %v", k, err)
	}
	for _, mod := range sv.Modules {
		if mod.Stored == "missing" {
			continue
		}
		if mod.VLLM.Quantized || mod.SGLang.Quantized {
			t.Errorf("stopped before step %d: %s is listed (%s) and built quantized (vLLM %v, SGLang %v)", k, mod.Name, mod.Stored, mod.VLLM.Quantized, mod.SGLang.Quantized)
		}
	}
}
