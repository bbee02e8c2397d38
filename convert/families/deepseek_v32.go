package families

import (
	"fmt"
	"slices"

	"github.com/mtpconv/mtpconv/convert/model"
)

// DeepSeek-V3.2 (DeepseekV32ForCausalLM): DeepSeek-V3's layout (deepseek.go,
// deepseek_v3.go) with DeepSeek Sparse Attention: every layer, the NextN
// layer included, adds the DSA indexer (self_attn.indexer.wq_b over the
// query latent, wk, a LayerNorm k_norm with its bias, weights_proj), which
// llama.cpp's deepseek32 architecture carries; its MTP graph runs dense MLA
// and leaves the indexer unused (src/models/deepseek32.cpp graph_mtp). The
// reference converter writes the NextN layer (--mtp); see docs/deepseek.md.

// deepseekV32Family is the family's descriptor.
var deepseekV32Family = &model.Family{
	Name: "deepseek_v32", Title: dsv32.name,
	Docs:       "docs/deepseek.md",
	Layout:     "a `deepseekFamily` with the DSA indexer (its tables in `deepseek.go`)",
	ModelTypes: []string{"deepseek_v32"}, Arch: "DeepseekV32ForCausalLM",
	ParseConfig: parseDeepSeekV32, Spec: specDeepSeekV32,
	MLX: model.MLXSpec{CombinedRefusal: deepseekCombinedRefusal(dsv32.name)},
	GGUF: model.GGUFSpec{
		Arch: "deepseek32", PreTokenizer: "deepseek-v3",
		Top:     model.NextNGGUFTop,
		Layer:   dsaGGUFLayer,
		Hparams: dsv3GGUFHparams, // DeepseekV32Config's head_dim as V3's
		Metadata: func(m *model.Model, h model.Hparams, g *model.GGUFKeys) error {
			if err := deepseek2GGUFMetadata(m, h, g); err != nil {
				return err
			}
			ds := model.KeysOf[DeepSeekConfig](m.Config)
			g.U32("attention.indexer.head_count", ds.IndexNHeads)
			g.U32("attention.indexer.key_length", ds.IndexHeadDim)
			g.U32("attention.indexer.top_k", ds.IndexTopk)
			return nil
		},
	},
	OpenVINO: model.OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."},
	HF:       dsaHF(),
}

func init() { model.RegisterFamily(deepseekV32Family) }

// dsaHF is how vLLM and SGLang build a DSA head (deepseek_mtp.py: eh_proj an
// nn.Linear, shared_head.head a ParallelLMHead): the indexer's weights_proj
// is built unquantized whatever the repo declares (vLLM deepseek_v2.py:712-718
// fuses it with wk into wk_weights_proj, quant_config None; SGLang's
// nsa_indexer.py builds it without quant_config), as the FP8 releases store it.
func dsaHF() model.HFSpec {
	h := deepseekHF("deepseek_mtp")
	h.PlainVLLM = append(h.PlainVLLM, "self_attn.indexer.weights_proj")
	h.PlainSGLang = append(h.PlainSGLang, "self_attn.indexer.weights_proj")
	return h
}

// dsv32 is the family as the lineage's files know it (DeepseekV32Config's defaults are V3's).
var dsv32 = deepseekFamily{name: "DeepSeek-V3.2", defaults: dsv3.defaults, mla: true, quantRefusal: func(string) string {
	return "DeepSeek-V3.2's releases store block FP8 (weight_scale_inv, weight_block_size 128 × 128), the only quantized layout this tool reads"
}}

func parseDeepSeekV32(raw []byte) (*model.Config, error) {
	c, err := parseDeepSeekConfig(raw, dsv32)
	if err != nil {
		return nil, err
	}
	ds := model.KeysOf[DeepSeekConfig](c)
	if err := checkDSAIndexer(ds); err != nil {
		return nil, err
	}
	c.HeadDim = ds.QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

func specDeepSeekV32(c *model.Config) *model.Spec {
	s := deepseekSpec(c, dsv32)
	ds := model.KeysOf[DeepSeekConfig](c)
	indexer := dsaIndexer(c)
	layer := s.TrunkLayer
	s.TrunkLayer = func(i int) []model.Want { return append(layer(i), indexer...) }
	s.HeadLayer = append(slices.Clone(s.HeadLayer), indexer...)
	s.Report.Dims["index_n_heads"], s.Report.Dims["index_head_dim"], s.Report.Dims["index_topk"] = ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk
	s.Report.Attention += fmt.Sprintf(", with the DSA indexer (%d heads of %d, top %d; unused by llama.cpp's MTP graph)", ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk)
	return s
}
