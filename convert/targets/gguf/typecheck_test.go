package gguf

import (
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// The type check derives every written tensor's type from its kind and
// the file type, whatever the plan said: each wrong type below is found,
// naming the tensor; the trunk tensors of a graft are not judged.
func TestTypeCheckByKind(t *testing.T) {
	file := func(ft gg.FileType, types map[string]gg.GGMLType) *gg.File {
		f := &gg.File{KV: []gg.KV{gg.Pair("general.architecture", gg.Str("a")), gg.Pair("a.block_count", gg.U32(5)),
			gg.Pair("a.expert_count", gg.U32(4)), gg.Pair("general.file_type", gg.U32(uint32(ft)))}}
		for _, n := range []string{"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_q.weight",
			"blk.4.attn_norm.weight", "blk.4.ffn_gate_inp.weight", "blk.4.exp_probs_b.bias", "blk.4.nextn.eh_proj.weight", "blk.4.ffn_down_exps.weight"} {
			dims := []int64{256, 512}
			switch {
			case strings.HasSuffix(n, "norm.weight") || strings.HasSuffix(n, ".bias"):
				dims = []int64{256}
			case strings.Contains(n, "exps"):
				dims = []int64{256, 256, 4}
			}
			f.Tensors = append(f.Tensors, gg.TensorInfo{Name: n, Dims: dims, Type: types[n]})
		}
		return f
	}
	bf16 := map[string]gg.GGMLType{"token_embd.weight": gg.BF16, "output_norm.weight": gg.F32, "output.weight": gg.BF16, "blk.0.attn_q.weight": gg.Q4_K,
		"blk.4.attn_norm.weight": gg.F32, "blk.4.ffn_gate_inp.weight": gg.F32, "blk.4.exp_probs_b.bias": gg.F32,
		"blk.4.nextn.eh_proj.weight": gg.BF16, "blk.4.ffn_down_exps.weight": gg.BF16}
	q8 := map[string]gg.GGMLType{"token_embd.weight": gg.Q8_0, "output_norm.weight": gg.F32, "output.weight": gg.Q8_0, "blk.0.attn_q.weight": gg.Q4_K,
		"blk.4.attn_norm.weight": gg.F32, "blk.4.ffn_gate_inp.weight": gg.F32, "blk.4.exp_probs_b.bias": gg.F32,
		"blk.4.nextn.eh_proj.weight": gg.Q8_0, "blk.4.ffn_down_exps.weight": gg.Q8_0}
	with := func(m map[string]gg.GGMLType, k string, v gg.GGMLType) map[string]gg.GGMLType {
		c := map[string]gg.GGMLType{}
		for a, b := range m {
			c[a] = b
		}
		c[k] = v
		return c
	}
	written := map[string]bool{}
	for n := range bf16 {
		written[n] = n != "blk.0.attn_q.weight" // a graft's trunk tensor, stored as the trunk has it
	}
	for _, c := range []struct {
		prec  precision
		types map[string]gg.GGMLType
		bad   string
	}{
		{headPrecisions["bf16"], bf16, ""},
		{headPrecisions["bf16"], with(bf16, "blk.4.attn_norm.weight", gg.BF16), "blk.4.attn_norm.weight"},
		{headPrecisions["bf16"], with(bf16, "blk.4.ffn_gate_inp.weight", gg.BF16), "blk.4.ffn_gate_inp.weight"},
		{headPrecisions["f16"], bf16, "token_embd.weight"},
		{fileTypes["Q8_0"], q8, ""},
		{fileTypes["Q8_0"], with(q8, "blk.4.ffn_gate_inp.weight", gg.Q8_0), "blk.4.ffn_gate_inp.weight"},
		{fileTypes["Q8_0"], with(q8, "blk.4.exp_probs_b.bias", gg.BF16), "blk.4.exp_probs_b.bias"},
		{fileTypes["Q4_K_M"], q8, "blk.4.ffn_down_exps.weight"},
	} {
		ps := fileTypeProblems("x.gguf", file(c.prec.ftype, c.types), c.prec, written, false)
		found := false
		for _, p := range ps {
			found = found || p.Tensor == c.bad && p.Kind == "tensor_type" && strings.Contains(p.Message, c.bad)
		}
		if (c.bad == "") != (len(ps) == 0) || c.bad != "" && !found {
			t.Errorf("%s, %q wrong: problems %+v", c.prec.name, c.bad, ps)
		}
	}
}
