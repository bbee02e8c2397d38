package model_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// MiMo-V2.5's 3 chained heads (mimo2): blocks 2, 3 and 4 of a 2-layer
// trunk, each with the fused attn_qkv, the sliding-window layers' sinks
// (float32), ffn_norm for pre_mlp_layernorm and layer_output_norm for
// final_layernorm, and no shared head of its own (the trunk's output is).
func TestMiMoV2GGUFNames(t *testing.T) {
	var want []string
	for _, b := range []string{"2", "3", "4"} {
		for _, n := range []string{"attn_norm.weight F32", "attn_qkv.weight BF16", "attn_output.weight BF16", "attn_sinks.weight F32",
			"ffn_norm.weight F32", "ffn_gate.weight BF16", "ffn_up.weight BF16", "ffn_down.weight BF16", "layer_output_norm.weight F32",
			"nextn.eh_proj.weight BF16", "nextn.enorm.weight F32", "nextn.hnorm.weight F32"} {
			want = append(want, "blk."+b+"."+n)
		}
	}
	wantGGUFNames(t, fixtures.MiMoV25, append(want, "output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16")...)
}

// The fixture is described as the family (3 MTP layers under
// model.mtp.layers, the sliding-window layers' sinks), MLX, combined and
// OpenVINO are refused naming the missing runtime, MiMo-V2-Flash's q/k/v
// apart are refused naming the layout, and bad configs naming the key.
func TestMiMoV2Family(t *testing.T) {
	m := testmodel.Load(t, fixtures.MiMoV25)
	if m.Family.Name != "mimo_v2" || m.MTPDepth != 3 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	if !m.IsHead("model.mtp.layers.2.self_attn.attention_sink_bias") || m.IsHead("model.layers.1.self_attn.attention_sink_bias") {
		t.Error("the head is model.mtp.layers.{j}")
	}
	if !strings.Contains(m.Spec.Report.Attention, "sliding window of 4 with 8") {
		t.Errorf("report: %s", m.Spec.Report.Attention)
	}
	for target, want := range map[string]string{"mlx": "no drafter model for mimo_v2", "combined": "drops MiMo-V2's MTP layers",
		"openvino": "runs Qwen3.5 heads only"} {
		if _, err := testmodel.Plan(t, m, target, targets.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--target %s: %v", target, err)
		}
	}
	flash := testmodel.Load(t, fixtures.MiMoV2Flash)
	if flash.Family.Name != "mimo_v2" || flash.HeadError() != nil {
		t.Fatalf("MiMo-V2-Flash: %s %v", flash.Family, flash.HeadError())
	}
	if _, err := testmodel.Plan(t, flash, "gguf", targets.Options{}); err == nil || !strings.Contains(err.Error(), "q_proj, k_proj and v_proj apart (MiMo-V2-Flash's layout)") {
		t.Errorf("--target gguf of MiMo-V2-Flash: %v", err)
	}
	base := `{"architectures":["MiMoV2ForCausalLM"],"model_type":"mimo_v2","hidden_size":64,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"v_head_dim":16,"swa_num_attention_heads":4,
"swa_num_key_value_heads":4,"swa_head_dim":32,"swa_v_head_dim":16,"sliding_window":8,"vocab_size":32,
"intermediate_size":96,"moe_intermediate_size":16,"n_routed_experts":8,"num_experts_per_tok":2,"topk_method":"noaux_tc",
"partial_rotary_factor":0.5`
	if _, err := model.ParseConfig([]byte(base + `,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1]}`)); err != nil {
		t.Fatalf("base config: %v", err)
	}
	for extra, want := range map[string]string{
		`,"moe_layer_freq":[0,1]}`:                                                                           "hybrid_layer_pattern has 0 entries",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,2]}`:                                              "moe_layer_freq [0 2]",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],"swa_head_dim":16}`:                            "one head geometry",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],"topk_method":"greedy"}`:                       "topk_method is \"greedy\"",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],"n_shared_experts":1}`:                         "no shared expert",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],"sliding_window":0}`:                           "sliding_window is 0",
		`,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],"quantization_config":{"quant_method":"awq"}}`: "MiMo-V2's releases store block FP8",
	} {
		_, err := model.ParseConfig([]byte(base + extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", extra, err)
		}
	}
}

// An FP8 qkv_proj whose block scale is no tensor-parallel sharding the
// reference converter detects (here the unsharded grid of 10 scale rows
// for 1280 rows, neither 4 nor 8 shards' 12 or 16) is refused naming the
// file and the tensor, as the reference fails on it.
func TestMiMoV2FP8UnshardedQKVRefused(t *testing.T) {
	src := fixtures.Ensure(t, fixtures.MiMoV25FP8)
	dir := t.TempDir()
	const shard, scale = "model-00002-of-00002.safetensors", "model.mtp.layers.1.self_attn.qkv_proj.weight_scale_inv"
	testfs.LinkDir(t, src, dir, shard)
	ck, err := st.Open(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var entries []st.Entry
	var data [][]byte
	for _, n := range ck.Names {
		tn := ck.Tensors[n]
		if tn.Shard.Name != shard {
			continue
		}
		b, err := ck.ReadTensor(tn, nil)
		if err != nil {
			t.Fatal(err)
		}
		shape := tn.Shape
		if n == scale {
			shape, b = []int64{10, 1}, b[:20] // the unsharded grid: ceil(1280 / 128) rows
		}
		entries = append(entries, st.Entry{Name: n, DType: tn.DType, Shape: shape})
		data = append(data, b)
	}
	var buf bytes.Buffer
	w, err := st.NewWriter(&buf, entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range data {
		w.Write(b)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shard), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m := testmodel.LoadDir(t, dir)
	err = m.HeadError()
	if err == nil || !strings.Contains(err.Error(), shard+": tensor model.mtp.layers.1.self_attn.qkv_proj.weight: its block scale "+scale+" has 10 rows, which is no tensor-parallel sharding over 8 or 4 ranks") {
		t.Errorf("head: %v", err)
	}
	if _, err := testmodel.Plan(t, m, "gguf", targets.Options{}); err == nil {
		t.Error("--target gguf planned a head whose qkv_proj it cannot read")
	}
}
