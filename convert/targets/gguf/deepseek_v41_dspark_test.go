package gguf_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
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
	path := exportTo(t, src, "")
	m, err := model.Load(source.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	rep, err := manifests.Verify(context.Background(), filepath.Dir(path), m.Checkpoint)
	if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != 81 {
		t.Fatalf("verify --src: %v %+v", err, rep)
	}
}

// The card says what the file is and runs it with --spec-type draft-dspark
// next to the target's GGUF.
func TestDSparkCard(t *testing.T) {
	t.Parallel()
	m, err := model.Load(source.Dir(fixtures.Ensure(t, fixtures.DSparkV4Flash)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Checkpoint.Close()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := export.Export(context.Background(), export.Request{Model: m, Target: "gguf", Dest: export.Out(out), Version: "test"}); err != nil {
		t.Fatal(err)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"as the `dflash` draft llama.cpp drafts blocks with", "llama-server -m TARGET.gguf -md ", "--spec-type draft-dspark",
		"converted without its stages", "| head | MXFP4 | 9 |"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	if strings.Contains(string(card), "draft-mtp") || strings.Contains(string(card), "| trunk |") {
		t.Errorf("the card runs draft-mtp or names a trunk component:\n%s", card)
	}
}
