package families_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
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

// Every target but gguf and mlx refuses in one sentence naming what the
// user runs instead (gguf, --graft: there is nothing to graft into); bad configs are
// refused naming the key.
func TestGemma4AssistantRefusals(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Gemma4AssistantCentroid)
	for _, c := range []struct {
		target string
		o      targets.Options
		want   string
	}{
		{"gguf", targets.Options{Graft: "trunk.gguf"}, "separate drafter model, loaded with -md next to its target's GGUF"},
		{"combined", targets.Options{}, "no combined trunk + head file"},
		{"openvino", targets.Options{}, "mtp_last_hidden_state and mtp_{full,sliding}_attention_{key,value}"},
		{"hf", targets.Options{}, "nothing to convert: vllm serve TRUNK --speculative-config"},
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

// The full layers' own KV head count makes head_count_kv a per-block list,
// as the converter writes it (checked on a config built in code: no
// fixture's target has one).
func TestGemma4AssistantPerTypeKVHeads(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Gemma4Assistant)
	var raw map[string]any
	if err := json.Unmarshal(m.Config.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	raw["text_config"].(map[string]any)["num_global_key_value_heads"] = 2
	b, _ := json.Marshal(raw)
	c, err := model.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	m.Config, m.Spec = c, m.Family.Spec(c)
	h, err := c.Hparams()
	if err != nil {
		t.Fatal(err)
	}
	base, _, err := m.GGUFMetadata(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range base {
		if kv.Key == "gemma4-assistant.attention.head_count_kv" {
			if got, ok := kv.Value.V.([]int32); !ok || !slices.Equal(got, []int32{1, 1, 1, 2}) {
				t.Errorf("head_count_kv %v", kv.Value.V)
			}
			return
		}
	}
	t.Error("no head_count_kv")
}
