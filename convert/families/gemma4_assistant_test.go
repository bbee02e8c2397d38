package families_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The assistant checkpoints (plain and centroid) are described as the
// family, every tensor of them the head: 4 layers of their attention
// type's shapes, the top tensors at the root, the int64 token ordering
// kept; no trunk.
func TestGemma4AssistantDescribed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fixture string
		head    int
	}{{fixtures.Gemma4Assistant, 4 + 4*11}, {fixtures.Gemma4AssistantCentroid, 6 + 4*11}} {
		m := testmodel.Load(t, c.fixture)
		if m.Family.Name != "gemma4_assistant" || m.MTPDepth != 4 || m.HeadError() != nil || m.TrunkError() != nil {
			t.Fatalf("%s: family %s depth %d: %v %v", c.fixture, m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
		}
		if m.Groups[model.GroupTrunk].Tensors != 0 || len(m.HeadTensors()) != c.head {
			t.Errorf("%s: %d trunk tensors, head %d tensors, want 0 and %d", c.fixture, m.Groups[model.GroupTrunk].Tensors, len(m.HeadTensors()), c.head)
		}
		if r := m.HeadRelative("model.layers.3.self_attn.q_proj.weight"); r != "layers.3.self_attn.q_proj.weight" || m.HeadRelative("pre_projection.weight") != "pre_projection.weight" {
			t.Errorf("%s: relative names %q", c.fixture, r)
		}
	}
	m := testmodel.Load(t, fixtures.Gemma4AssistantCentroid)
	if !m.Is("masked_embedding.token_ordering", model.RoleKeepDType) {
		t.Errorf("token_ordering's role %v", m.Role("masked_embedding.token_ordering"))
	}
	r, err := m.Inspect()
	if err != nil || !strings.Contains(r.Layers, "a separate drafter of 4 blocks") || !strings.HasPrefix(r.MLP, "GeGLU") {
		t.Errorf("inspect: %v %+v", err, r)
	}
}

// Every target refuses in one sentence naming what the user runs instead;
// bad configs are refused naming the key.
func TestGemma4AssistantRefusals(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Gemma4AssistantCentroid)
	for _, c := range []struct {
		target string
		o      targets.Options
		want   string
	}{
		{"gguf", targets.Options{}, "convert_hf_to_gguf.py writes it from the assistant folder"},
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "gemma4-assistant GGUF"},
		{"mlx", targets.Options{}, "mlx-vlm 0.7.10 loads the Gemma-4 assistant's own Hugging Face folder"},
		{"combined", targets.Options{}, "no combined trunk + head file"},
		{"openvino", targets.Options{}, "mtp_last_hidden_state and mtp_{full,sliding}_attention_{key,value}"},
		{"hf", targets.Options{}, "point vLLM at the assistant folder"},
	} {
		if _, err := testmodel.Plan(t, m, c.target, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--target %s: %v", c.target, err)
		}
	}
	text := `"model_type":"gemma4_text","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":2,"num_key_value_heads":1,
"head_dim":32,"global_head_dim":64,"vocab_size":512,"intermediate_size":128,
"layer_types":["sliding_attention","sliding_attention","sliding_attention","full_attention"]`
	config := func(top, extra string) string {
		return `{"architectures":["Gemma4AssistantForCausalLM"],"model_type":"gemma4_assistant","backbone_hidden_size":128` + top +
			`,"text_config":{` + text + extra + `}}`
	}
	c, err := model.ParseConfig([]byte(config("", "")))
	if err != nil || c.NumHiddenLayers != 0 || !c.TieWordEmbeddings {
		t.Fatalf("config: %v %+v", err, c)
	}
	if d, ok := c.ConfigMTPDepth(); !ok || d != 4 {
		t.Errorf("depth %d %v", d, ok)
	}
	// per_layer_config gives the full layers' head size when global_head_dim is absent (newer transformers).
	perLayer := strings.Replace(config("", `,"per_layer_config":{"3":{"head_dim":96}}`), `"global_head_dim":64,`, "", 1)
	if c, err := model.ParseConfig([]byte(perLayer)); err != nil {
		t.Errorf("per_layer_config: %v", err)
	} else if s, _ := model.SpecFor(c); !slices.ContainsFunc(s.HeadLayerAt(3), func(w model.Want) bool { return w.Suffix == "self_attn.q_norm.weight" && w.Shape[0] == 96 }) {
		t.Errorf("layer 3: %v", s.HeadLayerAt(3))
	}
	for _, bad := range []struct{ top, extra, want string }{
		{"", `,"num_kv_shared_layers":2`, "num_kv_shared_layers is 2 of num_hidden_layers 4"},
		{"", `,"enable_moe_block":true`, "enable_moe_block is true"},
		{"", `,"use_double_wide_mlp":true`, "use_double_wide_mlp is true"},
		{"", `,"hidden_size_per_layer_input":256`, "hidden_size_per_layer_input is 256"},
		{"", `,"hidden_activation":"silu"`, `hidden_activation is "silu"`},
		{"", `,"layer_types":["sliding_attention"]`, "layer_types has 1 entries for 4 layers"},
		{"", `,"layer_types":["sliding_attention","sliding_attention","sliding_attention","linear_attention"]`, `layer_types[3] is "linear_attention"`},
		{`,"use_ordered_embeddings":true,"num_centroids":24`, "", "vocab_size 512 is not a multiple of num_centroids 24"},
		{`,"use_ordered_embeddings":true,"num_centroids":16,"centroid_intermediate_top_k":32`, "", "centroid_intermediate_top_k 32 exceeds num_centroids 16"},
		{`,"backbone_hidden_size":0`, "", "backbone_hidden_size is 0"},
	} {
		if _, err := model.ParseConfig([]byte(config(bad.top, bad.extra))); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s %s: %v", bad.top, bad.extra, err)
		}
	}
	noGlobal := strings.Replace(config("", ""), `"global_head_dim":64,`, "", 1)
	if _, err := model.ParseConfig([]byte(noGlobal)); err == nil || !strings.Contains(err.Error(), "neither global_head_dim nor per_layer_config") {
		t.Errorf("no global head size: %v", err)
	}
}

// The family's GGUF table names every tensor the reference converter writes
// for the assistant (its record, testdata/gguf_reference), in the
// converter's order: rope_freqs (computed) first, then the checkpoint's
// tensors in name order, each block j as blk.{j}; the centroid head's
// masked_embedding.* is what the converter drops.
func TestGemma4AssistantGGUFTable(t *testing.T) {
	t.Parallel()
	for _, fx := range []string{fixtures.Gemma4Assistant, fixtures.Gemma4AssistantCentroid} {
		raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-bf16.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Metadata map[string]struct{ Value any }
			Tensors  []struct{ Name string }
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range rec.Tensors {
			want = append(want, r.Name)
		}
		m := testmodel.Load(t, fx)
		g := m.Family.GGUF
		got := []string{gg.Weight(gg.KindRopeFreqs).In(-1)}
		for _, n := range m.HeadTensors() {
			rel := m.HeadRelative(n)
			if strings.HasPrefix(rel, "masked_embedding.") {
				continue
			}
			if l, ok := strings.CutPrefix(rel, "layers."); ok {
				num, suffix, _ := strings.Cut(l, ".")
				j, _ := strconv.Atoi(num)
				got = append(got, g.Layer[suffix].In(j))
				continue
			}
			got = append(got, g.HeadTop[rel].In(-1))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the table names\n%v\nthe converter wrote\n%v", fx, got, want)
		}
		if v := rec.Metadata["gemma4-assistant.nextn_predict_layers"].Value; v != float64(m.MTPDepth) {
			t.Errorf("%s: nextn_predict_layers %v, depth %d", fx, v, m.MTPDepth)
		}
	}
}
