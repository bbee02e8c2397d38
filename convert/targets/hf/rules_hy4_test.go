package hf

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// TestDecideHy4: vLLM 0.34.0's HYV4MTP asks the quant config by
// model.layers.{L+j}.* (L = 3 here), copies FP8's and ModelOpt's entries
// naming model.mtp_layers.{j}. there, and builds the whole head unquantized
// under mtp_quant_algo BF16; SGLang 0.5.23's NextN class names the layer
// .model.decoder (its empty prefix) and renames FP8's model.mtp_layers.0
// entries to model.decoder.
func TestDecideHy4(t *testing.T) {
	t.Parallel()
	hy := testmodel.Load(t, fixtures.Hy4)
	repo := Repo{Tensors: hy.Checkpoint.Tensors}
	for _, tc := range []struct {
		name, quant, module string
		want                want
	}{
		{"no entry: both quantize", ctW8A8, "model.mtp_layers.0.self_attn.o_proj", want{"q", "q", "config_groups target"}},
		{"compressed-tensors: the checkpoint's name is not renamed", withIgnore(ctW8A8, "model.mtp_layers.0.self_attn.o_proj"), "model.mtp_layers.0.self_attn.o_proj", want{"q", "q", "config_groups target"}},
		{"compressed-tensors: vLLM's name", withIgnore(ctW8A8, "model.layers.3.self_attn.o_proj"), "model.mtp_layers.0.self_attn.o_proj", want{"u", "q", "ignore"}},
		{"compressed-tensors: SGLang's dotted name by its suffix", withIgnore(ctW8A8, "model.decoder.self_attn.o_proj"), "model.mtp_layers.0.self_attn.o_proj", want{"q", "u", ""}},
		{"compressed-tensors: a re: on model.decoder misses SGLang's .model.decoder", withIgnore(ctW8A8, `re:^model\.decoder\..*`), "model.mtp_layers.0.self_attn.o_proj", want{"q", "q", ""}},
		{"fp8: the checkpoint's name, copied under vLLM's prefix and renamed by SGLang", withList(fp8BlockList, "modules_to_not_convert", "model.mtp_layers.0.self_attn.o_proj"), "model.mtp_layers.0.self_attn.o_proj", want{"u", "u", "exact"}},
		{"fp8: the fused shards", withList(fp8BlockList, "modules_to_not_convert", "model.mtp_layers.0.self_attn.q_a_proj", "model.mtp_layers.0.self_attn.kv_a_proj_with_mqa"), "model.mtp_layers.0.self_attn.fused_qkv_a_proj", want{"u", "u", "exact"}},
		{"fp8: the fused experts", withList(fp8BlockList, "modules_to_not_convert", "model.mtp_layers.0.mlp.experts"), "model.mtp_layers.0.mlp.experts", want{"u", "u", "exact"}},
		{"modelopt: model.mtp_layers.0* split then copied by vLLM; SGLang renames FP8 lists only", withList(modelOpt, "ignore", "model.mtp_layers.0*"), "model.mtp_layers.0.mlp.experts", want{"u", "q", "matched"}},
		{"modelopt: model.mtp_layers.* is not copied", withList(modelOpt, "ignore", "model.mtp_layers.*"), "model.mtp_layers.0.self_attn.q_b_proj", want{"q", "q", "not matched"}},
		{"eh_proj an nn.Linear", ctW8A8, "model.mtp_layers.0.eh_proj", want{"u", "u", "given none"}},
		{"the indexer's wk fused with weights_proj, given none in vLLM", ctW8A8, "model.mtp_layers.0.self_attn.indexer.wk", want{"u", "q", "given none"}},
		{"the indexer's wq_b takes the config", ctW8A8, "model.mtp_layers.0.self_attn.indexer.wq_b", want{"q", "q", "config_groups target"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDecide(t, hy, hy.MTPDepth, tc.quant, tc.module, repo, tc.want) })
	}
}

// TestHy4MTPQuantAlgo: config.json's mtp_quant_algo decides for vLLM
// (BF16/FP16: the head unquantized; FP8: a block-FP8 config of the head's
// own, from quantization_config's lists; NONE: the repo's); SGLang does
// not read it.
func TestHy4MTPQuantAlgo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		algo         string
		vllm, sglang bool // quantized
	}{{"BF16", false, true}, {"fp16", false, true}, {"NONE", true, true}, {"FP8", true, true}} {
		var raw map[string]any
		src := testmodel.Load(t, fixtures.Hy4)
		if err := json.Unmarshal(src.Config.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		raw["mtp_quant_algo"] = c.algo
		b, _ := json.Marshal(raw)
		m := *src
		cfg := *src.Config
		cfg.Raw = b
		m.Config = &cfg
		q, err := ParseQuant([]byte(ctW8A8))
		if err != nil {
			t.Fatal(err)
		}
		mods := HeadModules(&m, 1)
		mod := mods[slicesIndex(mods, "model.mtp_layers.0.self_attn.o_proj")]
		v, s := Decide(VLLM, q, &m, mod, Repo{}), Decide(SGLang, q, &m, mod, Repo{})
		if v.Quantized != c.vllm || s.Quantized != c.sglang {
			t.Errorf("mtp_quant_algo %s: vLLM %+v, SGLang %+v", c.algo, v, s)
		}
		if c.algo == "FP8" && v.Method != string(RepoQuantFP8) {
			t.Errorf("mtp_quant_algo FP8: vLLM builds it %s", v.Method)
		}
	}
}

// TestIntoHy4: a headless compressed-tensors and block-FP8 Hy4 repo is
// named by inspect, mended by --into (the entries under vLLM's
// model.layers.{L} and SGLang's .model.decoder names), then clean: every
// head module built unquantized by both runtimes, the trunk's as before.
func TestIntoHy4(t *testing.T) {
	t.Parallel()
	src := testmodel.Load(t, fixtures.Hy4)
	for _, quant := range []string{ctW8A8, withList(fp8BlockList, "modules_to_not_convert", "lm_head"), modelOpt} {
		dir := makeRepo(t, repoSpec{Fixture: fixtures.Hy4, Quant: quant})
		before, err := ServingFor(loadRepo(t, dir), Runtimes)
		if err != nil {
			t.Fatal(err)
		}
		if e := before.Err(); e == nil || !strings.Contains(e.Error(), "no MTP head") {
			t.Errorf("%s headless: %v", quant, e)
		}
		if _, err := exportInto(t, src, dir, targets.Options{}); err != nil {
			t.Fatalf("%s: %v", quant, err)
		}
		r, err := ServingFor(loadRepo(t, dir), Runtimes)
		if err != nil {
			t.Fatal(err)
		}
		if e := r.Err(); e != nil {
			t.Errorf("%s mended: %v", quant, e)
		}
		for _, mr := range r.Modules {
			if mr.VLLM.Quantized || mr.SGLang.Quantized {
				t.Errorf("%s: %s built quantized: %+v %+v", quant, mr.Module.Name, mr.VLLM, mr.SGLang)
			}
		}
	}
}
