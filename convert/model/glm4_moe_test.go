package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// The GLM fixtures are described as their families: the NextN layer at
// num_hidden_layers is the head (its eh_proj, norms, shared head, own
// embedding copy and a whole MoE layer), the leading dense layers route no
// experts, nothing is missing.
func TestGLMFamiliesDescribeFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture, family string
		headTensors     int // non-expert head tensors
	}{
		{fixtures.GLM45, "glm4_moe", 22},
	} {
		m, err := Load(source.Dir(fixtures.Ensure(t, tc.fixture)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		if m.Family != tc.family || m.MTPDepth != 1 {
			t.Fatalf("%s: family %s depth %d", tc.fixture, m.Family, m.MTPDepth)
		}
		if err := m.HeadError(); err != nil {
			t.Fatal(err)
		}
		if err := m.TrunkError(); err != nil {
			t.Fatal(err)
		}
		head := m.HeadTensors()
		if len(head) != tc.headTensors {
			t.Errorf("%s: %d head tensors: %v", tc.fixture, len(head), head)
		}
		n := m.Config.NumHiddenLayers
		for _, h := range head {
			if !strings.HasPrefix(h, "model.layers.3.") {
				t.Errorf("%s: head tensor %s outside model.layers.%d", tc.fixture, h, n)
			}
		}
		if len(m.TrunkExperts) != n-m.Config.FirstKDenseReplace || len(m.MTPExperts) != 1 {
			t.Errorf("%s: %d trunk expert blocks, %d MTP", tc.fixture, len(m.TrunkExperts), len(m.MTPExperts))
		}
	}
}

// Configs GLM's rules refuse, each with the key named; an FP8 release in a
// layout other than block FP8 is refused naming its quantization method.
func TestGLMConfigRefusals(t *testing.T) {
	base := `{"architectures":["Glm4MoeForCausalLM"],"model_type":"glm4_moe","hidden_size":64,"num_hidden_layers":3,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":32,"intermediate_size":96,
"moe_intermediate_size":16,"n_routed_experts":8,"n_shared_experts":1,"num_experts_per_tok":2,"n_group":1,"topk_group":1,
"routed_scaling_factor":2.5,"first_k_dense_replace":1,"num_nextn_predict_layers":1,"attention_bias":true,"rms_norm_eps":1e-5`
	if _, err := ParseConfig([]byte(base + "}")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ extra, want string }{
		{`,"first_k_dense_replace":4`, "first_k_dense_replace 4"},
		{`,"n_group":3`, "do not split into the groups"},
		{`,"n_routed_experts":0`, "n_routed_experts"},
		{`,"scoring_func":"softmax"`, `scoring_func is "softmax"`},
		{`,"quantization_config":{"quant_method":"compressed-tensors","format":"float-quantized"}`, `quant_method is "compressed-tensors"`},
	} {
		_, err := ParseConfig([]byte(base + tc.extra + "}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.extra, err)
		}
	}
}

// GLM-4.7-Flash is its own family (MLA): described from its fixture, and
// every target it has no consumer or no writer for refuses it naming why.
func TestGLM47FlashFamily(t *testing.T) {
	m, err := Load(source.Dir(fixtures.Ensure(t, fixtures.GLM47Flash)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	if m.Family != "glm4_moe_lite" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	f := m.Spec.Forward(m)
	if at := f.Layers[0].Attention; at.Kind != AttnMLA || at.KVB != "model.layers.2.self_attn.kv_b_proj.weight" || at.QLoraRank != 64 {
		t.Errorf("attention %+v", at)
	}
	if mlp := f.Layers[0].MLP; mlp.Routing != RouteSigmoidGroupTopK || mlp.ScalingFactor != 1.8 {
		t.Errorf("mlp %+v", mlp)
	}
	if m.Spec.GGUF.Arch != "deepseek2" || m.Spec.GGUF.Layer["post_attention_layernorm.weight"] != gg.Weight(gg.KindFFNNorm) {
		t.Errorf("gguf table %+v", m.Spec.GGUF)
	}
}

// The families' llama.cpp architecture keys are the reference converter's,
// key for key and value for value (testdata/gguf_reference, recorded by
// interop/reference_gguf.py), deepseek2's for GLM-4.7-Flash included,
// which the gguf target does not write yet.
func TestGLMGGUFMetadataEqualsReference(t *testing.T) {
	for _, fx := range []string{fixtures.GLM45, fixtures.GLM47Flash} {
		m, err := Load(source.Dir(fixtures.Ensure(t, fx)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Checkpoint.Close()
		raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "gguf_reference", fx+"-bf16.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Metadata map[string]struct {
				Type  string `json:"type"`
				Value any    `json:"value"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		hp, err := m.Config.Hparams()
		if err != nil {
			t.Fatal(err)
		}
		base, own, err := m.GGUFMetadata(hp)
		if err != nil {
			t.Fatal(err)
		}
		ours := map[string]string{}
		for _, kv := range append(base, own...) {
			ours[kv.Key] = fmt.Sprint(kv.Value.V)
		}
		want := map[string]string{}
		for k, v := range rec.Metadata {
			if strings.HasPrefix(k, m.Spec.GGUF.Arch+".") {
				if f, ok := v.Value.(float64); ok && v.Type == "FLOAT32" {
					want[k] = fmt.Sprint(float32(f))
				} else {
					want[k] = fmt.Sprint(v.Value)
				}
			}
		}
		if !reflect.DeepEqual(ours, want) {
			t.Errorf("%s:\n ours %v\n want %v", fx, ours, want)
		}
	}
}
