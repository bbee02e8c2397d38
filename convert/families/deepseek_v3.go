package families

import (
	"encoding/json"
	"strconv"

	"github.com/mtpconv/mtpconv/convert/model"
)

// DeepSeek-V3, V3.1 and R1 (DeepseekV3ForCausalLM): the lineage's layout
// (deepseek.go) with multi-head latent attention, its NextN layer at
// model.layers.61, which llama.cpp runs as its deepseek2 architecture. The
// reference converter drops that layer (DeepseekV2Model.skip_mtp), but
// deepseek2's MTP draft graph (src/models/deepseek2.cpp graph_mtp, written
// for GLM-4.7-Flash) is generic MLA + MoE with q_lora, group routing and
// YaRN, and drafts with the head this file describes; see docs/glm.md.

// deepseekV3Family is the family's descriptor.
var deepseekV3Family = &model.Family{
	Name: "deepseek_v3", Title: dsv3.name,
	Docs:       "docs/deepseek.md",
	Layout:     "a `deepseekFamily` of the lineage in `deepseek.go`: MLA, deepseek2's GGUF keys",
	ModelTypes: []string{"deepseek_v3"}, Arch: "DeepseekV3ForCausalLM",
	ParseConfig: parseDeepSeekV3, Spec: specDeepSeekV3,
	MLX: model.MLXSpec{CombinedRefusal: deepseekCombinedRefusal(dsv3.name)},
	GGUF: model.GGUFSpec{
		Arch: "deepseek2", PreTokenizer: "deepseek-v3",
		Top:      model.NextNGGUFTop,
		Layer:    deepseek2GGUFLayer,
		Hparams:  dsv3GGUFHparams,
		Metadata: deepseek2GGUFMetadata,
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	// vLLM's deepseek_mtp.py: eh_proj an nn.Linear, shared_head.head a ParallelLMHead
	HF: deepseekHF("deepseek_mtp"),
}

func init() { model.RegisterFamily(deepseekV3Family) }

// dsv3 is the family as the lineage's files know it; its defaults are
// DeepseekV3Config's (head_dim is qk_rope_head_dim, all rotary).
var dsv3 = deepseekFamily{name: "DeepSeek-V3/V3.1/R1", defaults: model.ConfigDefaults{PartialRotaryFactor: 1, RMSNormEps: 1e-6, RopeTheta: 10000},
	mla: true, quantRefusal: func(string) string {
		return "DeepSeek-V3's releases store block FP8 (weight_scale_inv, weight_block_size 128 × 128), the only quantized layout this tool reads"
	}}

func parseDeepSeekV3(raw []byte) (*model.Config, error) {
	c, err := parseDeepSeekConfig(raw, dsv3)
	if err != nil {
		return nil, err
	}
	c.HeadDim = model.KeysOf[DeepSeekConfig](c).QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

func specDeepSeekV3(c *model.Config) *model.Spec {
	return deepseekSpec(c, dsv3)
}

// dsv3GGUFHparams is deepseek2's change to the values (one key-value head)
// over those of DeepseekV3Config, which has head_dim (qk_rope_head_dim)
// whether config.json gives it or not: TextModel writes it as the key and
// value lengths, which deepseek2's keys then set again in place.
func dsv3GGUFHparams(m *model.Model, h model.Hparams) {
	deepseek2GGUFHparams(m, h)
	if _, ok := h["head_dim"]; !ok {
		h["head_dim"] = json.Number(strconv.Itoa(model.KeysOf[DeepSeekConfig](m.Config).QKRopeHeadDim))
	}
}
