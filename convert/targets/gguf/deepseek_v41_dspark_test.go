package gguf_test

import (
	"slices"
	"strings"
	"testing"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// dsparkDraft: whatever the precision asked, the experts MXFP4, the FP8
// matrices (fc among them) Q8_0, the bf16 ones BF16 ([1, n] conf_proj too),
// float32 and vectors F32, in a file of type MXFP4_MOE with three blocks,
// no token_embd or output, the DSpark keys and the mask token; second key
// the chat template.
func dsparkDraft(t *testing.T, _ string, f *gg.File) {
	tensorTypes(t, f, "bf16", map[string]gg.GGMLType{
		"blk.0.ffn_gate_exps.weight": gg.MXFP4, "blk.2.ffn_down_exps.weight": gg.MXFP4, "fc.weight": gg.Q8_0, "blk.1.attn_q_b.weight": gg.Q8_0,
		"blk.1.ffn_gate_inp.weight": gg.BF16, "markov_w1.weight": gg.BF16, "conf_proj.weight": gg.BF16, "blk.1.hc_attn_fn.weight": gg.F32,
		"enc.output_norm.weight": gg.F32, "output_hc_fn.weight": gg.F32,
	})
	if slices.ContainsFunc(f.Tensors, func(ti gg.TensorInfo) bool { return ti.Name == "token_embd.weight" || ti.Name == "output.weight" }) {
		t.Error("the draft holds the trunk's token_embd or output")
	}
	for key, want := range map[string]int64{"dflash.block_count": 3, "dflash.block_size": 4, "tokenizer.ggml.mask_token_id": 500, "general.file_type": int64(gg.FileMXFP4MOE)} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s %d (set %v), want %d", key, got, ok, want)
		}
	}
	if f.KV[1].Key != "tokenizer.chat_template" {
		t.Errorf("second key %s, want tokenizer.chat_template", f.KV[1].Key)
	}
}

// verify --src recomputes every tensor of the draft (the MXFP4 experts byte
// for byte from the release's codes and scales, the Q8_0 matrices from FP8
// codes and ue8m0 scales) and its stored-type check holds.
func TestDSparkDraftVerifies(t *testing.T) {
	t.Parallel()
	src := fixtures.Ensure(t, fixtures.DSparkV4Flash)
	if n := verifiedTensors(t, src, exportTo(t, src, "")); n != 81 {
		t.Errorf("%d tensors verified, want 81", n)
	}
}

// The card says what the file is and runs it with --spec-type draft-dspark
// next to the target's GGUF.
func TestDSparkCard(t *testing.T) {
	t.Parallel()
	card := cardOf(t, fixtures.DSparkV4Flash)
	for _, want := range []string{"as the `dflash` draft llama.cpp drafts blocks with", "llama-server -m TARGET.gguf -md ", "--spec-type draft-dspark",
		"converted without its stages", "| head | MXFP4 | 9 |"} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(card, "draft-mtp") || strings.Contains(card, "| trunk |") {
		t.Errorf("the card runs draft-mtp or names a trunk component:\n%s", card)
	}
}
