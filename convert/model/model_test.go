package model

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

func load(t *testing.T, fixture string) *Model {
	t.Helper()
	m, err := Load(source.Dir(fixtures.Ensure(t, fixture)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	return m
}

func TestDescribeFixtures(t *testing.T) {
	cases := []struct {
		fixture      string
		family       string
		mtpTensors   int
		layout       ExpertLayout
		experts      int
		trunkLayout  ExpertLayout
		configDepth  bool
		f32, vision  int
		nested       bool
		expertsPerTk int
	}{
		{fixtures.Qwen36, "qwen3_5_moe", 19, Fused, 256, Fused, true, 0, 6, true, 8},
		{fixtures.Qwen35, "qwen3_5_moe", 785, PerExpert, 256, Fused, true, 6, 6, true, 8},
		{fixtures.Next, "qwen3_next", 1553, PerExpert, 512, PerExpert, false, 0, 0, false, 10},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			m := load(t, c.fixture)
			if m.Family.Name != c.family || m.Config.Nested != c.nested {
				t.Errorf("family %s nested %v", m.Family.Name, m.Config.Nested)
			}
			if len(m.MTPProblems)+len(m.TrunkProblems) != 0 {
				t.Fatalf("problems on a faithful fixture: %v %v", m.MTPProblems, m.TrunkProblems)
			}
			if m.Groups[GroupMTP].Tensors != c.mtpTensors || m.Groups[GroupVision].Tensors != c.vision {
				t.Errorf("mtp %d vision %d tensors", m.Groups[GroupMTP].Tensors, m.Groups[GroupVision].Tensors)
			}
			if m.MTPDepth != 1 || m.ConfigDeclares != c.configDepth {
				t.Errorf("depth %d declared %v", m.MTPDepth, m.ConfigDeclares)
			}
			if len(m.MTPExperts) != 1 || m.MTPExperts[0].Layout != c.layout || m.MTPExperts[0].Count != c.experts {
				t.Errorf("mtp experts %+v", m.MTPExperts)
			}
			if len(m.TrunkExperts) != 4 {
				t.Fatalf("trunk experts %+v", m.TrunkExperts)
			}
			for _, b := range m.TrunkExperts {
				if b.Layout != c.trunkLayout || b.Count != c.experts {
					t.Errorf("trunk block %+v", b)
				}
			}
			if m.DTypes["F32"] != c.f32 {
				t.Errorf("F32 tensors %d", m.DTypes["F32"])
			}
			if got := strings.Join(m.LayerTypes, ","); got != "linear_attention,linear_attention,linear_attention,full_attention" {
				t.Errorf("layer types %s", got)
			}
			if m.Config.NumExpertsPerTok != c.expertsPerTk || m.Config.RotaryDim() != 16 || m.Config.RopeTheta != 1e7 {
				t.Errorf("config %+v", m.Config)
			}
		})
	}
}

// drop removes tensors from the in-memory inventory.
func drop(ck *st.Checkpoint, keep func(string) bool) {
	var names []string
	for _, n := range ck.Names {
		if keep(n) {
			names = append(names, n)
		} else {
			delete(ck.Tensors, n)
		}
	}
	ck.Names = names
}

func redescribe(t *testing.T, m *Model) *Model {
	t.Helper()
	out, err := Describe(m.Config, m.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestIncompleteHeadIsRefused(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		mutate  func(m *Model)
		want    []string
	}{
		{"dropped experts", fixtures.Qwen35, func(m *Model) {
			drop(m.Checkpoint, func(n string) bool {
				for e := 224; e < 256; e++ {
					if n == "mtp.layers.0.mlp.experts."+strconv.Itoa(e)+".down_proj.weight" {
						return false
					}
				}
				return n != "mtp.layers.0.mlp.experts.7.up_proj.weight"
			})
		}, []string{"mtp.layers.0.mlp.experts.{224..255}.down_proj.weight", "mtp.layers.0.mlp.experts.7.up_proj.weight"}},
		{"dropped shared expert gate and fc", fixtures.Qwen36, func(m *Model) {
			drop(m.Checkpoint, func(n string) bool {
				return n != "mtp.layers.0.mlp.shared_expert_gate.weight" && n != "mtp.fc.weight"
			})
		}, []string{"missing: mtp.fc.weight", "mtp.layers.0.mlp.shared_expert_gate.weight"}},
		{"fused experts of the wrong count", fixtures.Qwen36, func(m *Model) {
			m.Checkpoint.Tensors["mtp.layers.0.mlp.experts.gate_up_proj"].Shape = []int64{255, 256, 128}
		}, []string{"model-00003-of-00003.safetensors: tensor mtp.layers.0.mlp.experts.gate_up_proj has shape [255 256 128], the config implies [256 256 128]"}},
		{"no mtp at all", fixtures.Qwen36, func(m *Model) {
			drop(m.Checkpoint, func(n string) bool { return !strings.HasPrefix(n, "mtp.") })
		}, []string{"no mtp.* tensors"}},
		{"config depth disagrees", fixtures.Qwen36, func(m *Model) {
			two := 2
			m.Config.MTPNumHiddenLayers = &two
		}, []string{"config.json declares 2 MTP layers, the tensors hold 1"}},
		{"mixed expert layouts", fixtures.Qwen36, func(m *Model) {
			t := *m.Checkpoint.Tensors["mtp.layers.0.mlp.shared_expert.up_proj.weight"]
			t.Name = "mtp.layers.0.mlp.experts.0.up_proj.weight"
			m.Checkpoint.Tensors[t.Name] = &t
			m.Checkpoint.Names = append(m.Checkpoint.Names, t.Name)
		}, []string{"mtp.layers.0.mlp.experts. holds both fused and per-expert tensors"}},
		{"fp8 release", fixtures.Qwen36, func(m *Model) {
			fc := m.Checkpoint.Tensors["mtp.fc.weight"]
			fc.DType = st.F8E4M3
			s := *fc
			s.Name, s.DType = "mtp.fc.weight_scale_inv", st.F32
			m.Checkpoint.Tensors[s.Name] = &s
			m.Checkpoint.Names = append(m.Checkpoint.Names, s.Name)
		}, []string{"tensor mtp.fc.weight is F8_E4M3, but config.json declares no fp8 quantization_config"}},
		{"unexpected mtp tensor", fixtures.Next, func(m *Model) {
			s := *m.Checkpoint.Tensors["mtp.norm.weight"]
			s.Name = "mtp.embed_tokens.weight"
			m.Checkpoint.Tensors[s.Name] = &s
			m.Checkpoint.Names = append(m.Checkpoint.Names, s.Name)
		}, []string{"tensor mtp.embed_tokens.weight is not part of the qwen3_next layout"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := load(t, c.fixture)
			c.mutate(m)
			sort.Strings(m.Checkpoint.Names)
			m = redescribe(t, m)
			err := m.HeadError()
			if err == nil {
				t.Fatal("incomplete head accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestTrunkProblems(t *testing.T) {
	m := load(t, fixtures.Qwen36)
	// An already-converted (MLX layout) conv1d is reported, never taken as raw.
	m.Checkpoint.Tensors["model.language_model.layers.0.linear_attn.conv1d.weight"].Shape = []int64{512, 4, 1}
	drop(m.Checkpoint, func(n string) bool { return n != "lm_head.weight" })
	m = redescribe(t, m)
	if m.HeadError() != nil {
		t.Fatalf("head should still be complete: %v", m.HeadError())
	}
	err := m.TrunkError()
	if err == nil || !strings.Contains(err.Error(), "conv1d.weight has shape [512 4 1], the config implies [512 1 4]") || !strings.Contains(err.Error(), "missing: lm_head.weight") {
		t.Fatalf("trunk error: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, config, want string
	}{
		{"missing", "", "config.json is missing"},
		{"invalid json", `{"model_type": `, "config.json: invalid JSON"},
		{"zero hidden", `{"model_type":"qwen3_next","hidden_size":0}`, "hidden_size is 0"},
		{"bad layer types", `{"model_type":"qwen3_5_moe","text_config":{"hidden_size":8,"num_hidden_layers":2,"layer_types":["full_attention"],"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":8,"linear_num_key_heads":1,"linear_num_value_heads":1,"linear_key_head_dim":4,"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"shared_expert_intermediate_size":4}}`, "layer_types has 1 entries for 2 layers"},
		{"top-k above experts", `{"model_type":"qwen3_next","hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":8,"linear_num_key_heads":1,"linear_num_value_heads":1,"linear_key_head_dim":4,"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":5,"moe_intermediate_size":4,"shared_expert_intermediate_size":4}`, "num_experts_per_tok 5 exceeds num_experts 4"},
		{"huge dimension", `{"model_type":"qwen3_next","hidden_size":9223372036854775807}`, "hidden_size is 9223372036854775807"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.config != "" {
				os.WriteFile(filepath.Join(dir, ConfigFile), []byte(c.config), 0o644)
			}
			_, err := LoadConfig(source.Dir(dir))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("error %v, want %q naming the folder", err, c.want)
			}
		})
	}
}

func TestUnsupportedFamily(t *testing.T) {
	const keys = `"full_attention_interval":2,"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":4,"vocab_size":8,"linear_num_key_heads":1,"linear_num_value_heads":1,"linear_key_head_dim":4,"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":4,"shared_expert_intermediate_size":4`
	// The family is detected first: an unknown one is refused by name, whatever the other keys.
	if _, err := ParseConfig([]byte(`{"model_type":"llama",` + keys + `}`)); err == nil || !strings.Contains(err.Error(), `model_type "llama"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := Describe(&Config{ModelType: "llama"}, &st.Checkpoint{}); err == nil || !strings.Contains(err.Error(), `model_type "llama"`) {
		t.Fatalf("err = %v", err)
	}
	cfg, err := ParseConfig([]byte(`{"model_type":"qwen3_next",` + keys + `}`))
	if err != nil {
		t.Fatal(err)
	}
	// The derived layer types put full attention on every 4th layer.
	if got := strings.Join(cfg.LayerTypes, ","); got != "linear_attention,full_attention" {
		t.Errorf("layer types %s", got)
	}
}
