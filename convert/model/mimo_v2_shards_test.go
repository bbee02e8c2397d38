package model

import (
	"slices"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The tensor-parallel detection of MiMo-V2's FP8 qkv_proj at the releases'
// sizes, as the reference converter's _tp_aware_qkv_dequant does it: 64 q
// heads of 192, 8 sliding-window (MTP) key-value heads of 192 / 128, so
// 14848 rows: MiMo-V2.5 stores 4 ranks of 3712 rows, 29 scale rows each
// (116, which 8 ranks of 1856 rows, 15 each, would make 120); 8 ranks are
// tried first. A full-attention layer has 4 key-value heads.
func TestMiMoV2QKVShardDetection(t *testing.T) {
	c, err := parseMiMoV2([]byte(`{"architectures":["MiMoV2ForCausalLM"],"model_type":"mimo_v2","hidden_size":4096,
"num_hidden_layers":2,"num_attention_heads":64,"num_key_value_heads":4,"head_dim":192,"v_head_dim":128,
"swa_num_attention_heads":64,"swa_num_key_value_heads":8,"swa_head_dim":192,"swa_v_head_dim":128,"sliding_window":128,
"vocab_size":152576,"intermediate_size":16384,"moe_intermediate_size":2048,"n_routed_experts":256,"num_experts_per_tok":8,
"topk_method":"noaux_tc","partial_rotary_factor":0.334,"hybrid_layer_pattern":[0,1],"moe_layer_freq":[0,1],
"quantization_config":{"quant_method":"fp8","fmt":"e4m3","weight_block_size":[128,128]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		weight     string
		rows, srow int64
		want       *RowShards
		err        string
	}{
		{"model.mtp.layers.0.self_attn.qkv_proj.weight", 14848, 116, &RowShards{4, []int64{3072, 384, 256}}, ""},
		{"model.layers.1.self_attn.qkv_proj.weight", 14848, 8 * 15, &RowShards{8, []int64{1536, 192, 128}}, ""},
		{"model.layers.0.self_attn.qkv_proj.weight", 13568, 4 * 27, &RowShards{4, []int64{3072, 192, 128}}, ""},
		{"model.mtp.layers.0.self_attn.qkv_proj.weight", 14848, 117, nil, "has 117 rows, which is no tensor-parallel sharding"},
		{"model.mtp.layers.0.self_attn.qkv_proj.weight", 13568, 108, nil, "13568 rows; q + k + v of the config are 12288 + 1536 + 1024 = 14848"},
		{"model.mtp.layers.0.self_attn.o_proj.weight", 4096, 32, nil, ""},
	} {
		ck := &st.Checkpoint{Tensors: map[string]*st.Tensor{
			k.weight:                {TensorInfo: st.TensorInfo{Name: k.weight, DType: st.F8E4M3, Shape: []int64{k.rows, 4096}}},
			k.weight + "_scale_inv": {TensorInfo: st.TensorInfo{Name: k.weight + "_scale_inv", DType: st.F32, Shape: []int64{k.srow, 32}}},
		}}
		m := &Model{Config: c, Spec: specMiMoV2(c), Checkpoint: ck, TextPrefix: "model."}
		got, err := mimoQKVShards(m, k.weight)
		switch {
		case k.err != "" && (err == nil || !strings.Contains(err.Error(), k.err)):
			t.Errorf("%s %d/%d: %v, want %q", k.weight, k.rows, k.srow, err, k.err)
		case k.err == "" && err != nil:
			t.Errorf("%s %d/%d: %v", k.weight, k.rows, k.srow, err)
		case k.want == nil && got != nil, k.want != nil && (got == nil || got.Shards != k.want.Shards || !slices.Equal(got.Parts, k.want.Parts)):
			t.Errorf("%s %d/%d: %+v, want %+v", k.weight, k.rows, k.srow, got, k.want)
		}
	}
}
