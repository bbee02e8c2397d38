package model_test

import (
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// GLM-4.7-Flash (deepseek2): MLA's kv_b_proj split into attn_k_b and attn_v_b, ffn_norm for the post-attention norm, the NextN layer's own embedding and shared head.
func TestGLM47FlashGGUFNames(t *testing.T) {
	wantGGUFNames(t, "glm4.7-flash-tiny",
		"blk.2.attn_k_b.weight BF16", "blk.2.attn_kv_a_mqa.weight BF16", "blk.2.attn_kv_a_norm.weight F32",
		"blk.2.attn_norm.weight F32", "blk.2.attn_output.weight BF16", "blk.2.attn_q_a.weight BF16",
		"blk.2.attn_q_a_norm.weight F32", "blk.2.attn_q_b.weight BF16", "blk.2.attn_v_b.weight BF16",
		"blk.2.exp_probs_b.bias F32", "blk.2.ffn_down_exps.weight BF16", "blk.2.ffn_down_shexp.weight BF16",
		"blk.2.ffn_gate_exps.weight BF16", "blk.2.ffn_gate_inp.weight F32", "blk.2.ffn_gate_shexp.weight BF16",
		"blk.2.ffn_norm.weight F32", "blk.2.ffn_up_exps.weight BF16", "blk.2.ffn_up_shexp.weight BF16",
		"blk.2.nextn.eh_proj.weight BF16", "blk.2.nextn.embed_tokens.weight BF16", "blk.2.nextn.enorm.weight F32",
		"blk.2.nextn.hnorm.weight F32", "blk.2.nextn.shared_head_head.weight BF16", "blk.2.nextn.shared_head_norm.weight F32",
		"output.weight BF16", "output_norm.weight F32", "token_embd.weight BF16",
	)
}

// GLM-4.7-Flash is its own family (MLA): described from its fixture, and
// every target it has no consumer or no writer for refuses it naming why.
func TestGLM47FlashFamily(t *testing.T) {
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.GLM47Flash)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	if m.Family.Name != "glm4_moe_lite" || m.MTPDepth != 1 || m.HeadError() != nil || m.TrunkError() != nil {
		t.Fatalf("family %s depth %d: %v %v", m.Family, m.MTPDepth, m.HeadError(), m.TrunkError())
	}
	f := m.Spec.Forward(m)
	if at := f.Layers[0].Attention; at.Kind != model.AttnMLA || at.KVB != "model.layers.2.self_attn.kv_b_proj.weight" || at.QLoraRank != 64 {
		t.Errorf("attention %+v", at)
	}
	if mlp := f.Layers[0].MLP; mlp.Routing != model.RouteSigmoidGroupTopK || mlp.ScalingFactor != 1.8 {
		t.Errorf("mlp %+v", mlp)
	}
	if m.Family.GGUF.Arch != "deepseek2" || m.Family.GGUF.Layer["post_attention_layernorm.weight"] != gg.Weight(gg.KindFFNNorm) {
		t.Errorf("gguf table %+v", m.Family.GGUF)
	}
}
