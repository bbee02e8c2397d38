package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// TestDecideInkling: vLLM 0.34.0's InklingMTP asks the quant config by
// model.layers.{j}.* (no mtp.), the MLP as gate_up_proj / down_proj and the
// attention's four projections as one qkvr, after renaming the config's own
// entries with its hf_to_vllm_mapper (checkpoint names then match);
// re: patterns are not renamed; SGLang builds the whole draft unquantized.
func TestDecideInkling(t *testing.T) {
	t.Parallel()
	ink := testmodel.Load(t, fixtures.Inkling) // model.mtp.layers.0-1, depth 1 sliding-window
	repo := Repo{Tensors: ink.Checkpoint.Tensors}
	for _, tc := range []struct {
		name, quant, module string
		want                want
	}{
		{"no entry: vLLM quantizes the head, SGLang never", ctW8A8, "model.mtp.layers.0.input_proj", want{"q", "u", "config_groups target"}},
		{"the checkpoint's name, renamed by the mapper", withIgnore(ctW8A8, "model.mtp.layers.0.input_proj"), "model.mtp.layers.0.input_proj", want{"u", "u", "ignore"}},
		{"vLLM's own name", withIgnore(ctW8A8, "model.layers.1.input_proj"), "model.mtp.layers.1.input_proj", want{"u", "u", "ignore"}},
		{"a re: pattern is not renamed: the checkpoint's prefix misses", withIgnore(ctW8A8, `re:^model\.mtp\..*`), "model.mtp.layers.0.transformer_block.attn.wo_ud", want{"q", "u", "config_groups target"}},
		{"a re: pattern on vLLM's name", withIgnore(ctW8A8, `re:^model\.layers\.0\.transformer_block\..*`), "model.mtp.layers.0.transformer_block.attn.wo_ud", want{"u", "u", "ignore"}},
		{"w13_dn renamed gate_up_proj in the entry too", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.mlp.w13_dn"), "model.mtp.layers.0.transformer_block.mlp.w13_dn", want{"u", "u", "ignore"}},
		{"qkvr by its four shards", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.attn.wq_du", "model.mtp.layers.0.transformer_block.attn.wk_dv",
			"model.mtp.layers.0.transformer_block.attn.wv_dv", "model.mtp.layers.0.transformer_block.attn.wr_du"), "model.mtp.layers.0.transformer_block.attn.qkvr", want{"u", "u", "ignore"}},
		{"three of four shards: vLLM refuses", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.attn.wq_du", "model.mtp.layers.0.transformer_block.attn.wk_dv",
			"model.mtp.layers.0.transformer_block.attn.wv_dv"), "model.mtp.layers.0.transformer_block.attn.qkvr", want{"e", "u", ""}},
		{"rel_logits_proj is a bare parameter", ctW8A8, "model.mtp.layers.0.transformer_block.attn.rel_logits_proj", want{"u", "u", "given none"}},
		{"fp8 exact, renamed", withList(fp8BlockList, "modules_to_not_convert", "model.mtp.layers.0.transformer_block.mlp.w2_md"), "model.mtp.layers.0.transformer_block.mlp.w2_md", want{"u", "u", "exact"}},
		{"modelopt model.mtp.* becomes model.*", withList(modelOpt, "ignore", "model.mtp.*"), "model.mtp.layers.1.transformer_block.attn.wo_ud", want{"u", "u", "matched"}},
		{"awq substring of the renamed entry", withList(awq4, "modules_to_not_convert", "model.mtp."), "model.mtp.layers.0.input_proj", want{"u", "u", "substring"}},
		{"gptq dynamic keys are not renamed", `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "lm_head": false, "dynamic": {"-:^model\\.mtp\\..*": {}}}`, "model.mtp.layers.0.input_proj", want{"q", "u", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDecide(t, ink, ink.MTPDepth, tc.quant, tc.module, repo, tc.want) })
	}
}

// TestIntoInkling: --into a compressed-tensors Inkling repo writes entries
// under vLLM's names (the checkpoint's re: prefix would miss them), after
// which inspect --strict passes; the repo without them is named.
func TestIntoInkling(t *testing.T) {
	t.Parallel()
	src := testmodel.Load(t, fixtures.Inkling)
	dir := makeRepo(t, repoSpec{Fixture: fixtures.Inkling, Quant: ctW8A8})
	before, err := ServingFor(loadRepo(t, dir), Runtimes)
	if err != nil {
		t.Fatal(err)
	}
	if e := before.Err(); e == nil || !strings.Contains(e.Error(), "no MTP head") {
		t.Errorf("headless: %v", e)
	}
	if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
		t.Fatal(err)
	}
	r, err := ServingFor(loadRepo(t, dir), Runtimes)
	if err != nil {
		t.Fatal(err)
	}
	if e := r.Err(); e != nil {
		t.Fatalf("mended: %v", e)
	}
	for _, mr := range r.Modules {
		if mr.VLLM.Quantized || mr.SGLang.Quantized {
			t.Errorf("%s built quantized: %+v %+v", mr.Module.Name, mr.VLLM, mr.SGLang)
		}
	}
}

// TestDepthVerdictInkling: vLLM 0.34.0's InklingMTP runs depth i at draft
// step i, so a repo declaring more depths than it holds is named; one
// holding more than it declares drafts (the extra depths are skipped).
// SGLang is not judged on depth (one instance per depth it is given).
func TestDepthVerdictInkling(t *testing.T) {
	t.Parallel()
	m := testmodel.Load(t, fixtures.Inkling)
	q, err := ParseQuant([]byte(ctW8A8))
	if err != nil {
		t.Fatal(err)
	}
	if got := depthVerdict(VLLM, m, q, 2, 1); !strings.Contains(got, "depth 1 has no weights") {
		t.Errorf("2 declared, 1 held: %q", got)
	}
	if got := depthVerdict(VLLM, m, q, 1, 2); got != "" {
		t.Errorf("1 declared, 2 held: %q", got)
	}
}
