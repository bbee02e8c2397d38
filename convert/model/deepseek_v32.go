package model

import (
	"fmt"
	"slices"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// DeepSeek-V3.2 (DeepseekV32ForCausalLM): DeepSeek-V3's layout (deepseek.go,
// deepseek_v3.go) with DeepSeek Sparse Attention: every layer, the NextN
// layer included, adds the DSA indexer (self_attn.indexer.wq_b over the
// query latent, wk, a LayerNorm k_norm with its bias, weights_proj), which
// llama.cpp's deepseek32 architecture carries; its MTP graph runs dense MLA
// and leaves the indexer unused (src/models/deepseek32.cpp graph_mtp). The
// reference converter writes the NextN layer (--mtp); see docs/deepseek.md.

func init() { RegisterFamily(deepseekV32{}) }

type deepseekV32 struct{}

func (deepseekV32) Name() string { return "deepseek_v32" }

func (deepseekV32) Matches(id Identity) bool {
	return MatchesIdentity(id, []string{"deepseek_v32"}, "DeepseekV32ForCausalLM")
}

// dsv32 is the family as the lineage's files know it (DeepseekV32Config's defaults are V3's).
var dsv32 = deepseekFamily{name: "DeepSeek-V3.2", defaults: dsv3.defaults, mla: true, quantRefusal: func(string) string {
	return "DeepSeek-V3.2's releases store block FP8 (weight_scale_inv, weight_block_size 128 × 128), the only quantized layout this tool reads"
}}

func (deepseekV32) ParseConfig(raw []byte) (*Config, error) {
	c, err := parseDeepSeekConfig(raw, dsv32)
	if err != nil {
		return nil, err
	}
	ds := c.DeepSeek
	if err := CheckPositive(PositiveKey{"q_lora_rank", derefOr(ds.QLoraRank, 0)}, PositiveKey{"index_n_heads", ds.IndexNHeads},
		PositiveKey{"index_head_dim", ds.IndexHeadDim}, PositiveKey{"index_topk", ds.IndexTopk}); err != nil {
		return nil, err // the indexer reads the query latent: q_lora_rank is required
	}
	c.HeadDim = ds.QKRopeHeadDim // the configuration class's attribute map
	return c, nil
}

func derefOr(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

func (deepseekV32) Spec(c *Config) *Spec {
	s := deepseekSpec(c, dsv32)
	ds := c.deepseek()
	h, nh, hd, ql := int64(c.HiddenSize), int64(ds.IndexNHeads), int64(ds.IndexHeadDim), int64(derefOr(ds.QLoraRank, 0))
	indexer := []Want{
		{Suffix: "self_attn.indexer.wq_b.weight", Shape: []int64{nh * hd, ql}},
		{Suffix: "self_attn.indexer.wk.weight", Shape: []int64{hd, h}},
		{Suffix: "self_attn.indexer.k_norm.weight", Shape: []int64{hd}},
		{Suffix: "self_attn.indexer.k_norm.bias", Shape: []int64{hd}},
		{Suffix: "self_attn.indexer.weights_proj.weight", Shape: []int64{nh, h}},
	}
	layer := s.TrunkLayer
	s.TrunkLayer = func(i int) []Want { return append(layer(i), indexer...) }
	s.HeadLayer = append(slices.Clone(s.HeadLayer), indexer...)
	s.Report.Dims["index_n_heads"], s.Report.Dims["index_head_dim"], s.Report.Dims["index_topk"] = ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk
	s.Report.Attention += fmt.Sprintf(", with the DSA indexer (%d heads of %d, top %d; unused by llama.cpp's MTP graph)", ds.IndexNHeads, ds.IndexHeadDim, ds.IndexTopk)
	s.GGUF = GGUFSpec{
		Arch: "deepseek32", PreTokenizer: "deepseek-v3",
		Top:     deepseekGGUFTop,
		Layer:   dsv32GGUFLayer,
		Hparams: dsv3GGUFHparams, // DeepseekV32Config's head_dim as V3's
		Metadata: func(m *Model, h Hparams, g *GGUFKeys) error {
			if err := deepseek2GGUFMetadata(m, h, g); err != nil {
				return err
			}
			ds := m.Config.DeepSeek
			g.U32("attention.indexer.head_count", ds.IndexNHeads)
			g.U32("attention.indexer.key_length", ds.IndexHeadDim)
			g.U32("attention.indexer.top_k", ds.IndexTopk)
			return nil
		},
	}
	s.MLX.CombinedRefusal = deepseekCombinedRefusal(dsv32.name)
	s.OpenVINO = OpenVINOSpec{Refusal: "OpenVINO GenAI's MTP pipeline runs Qwen3.5 heads only."}
	s.HF = deepseekHF(c, "deepseek_mtp") // vLLM's deepseek_mtp.py: eh_proj an nn.Linear, shared_head.head a ParallelLMHead
	return s
}

// dsv32GGUFLayer is deepseek2's tensor map and the DSA indexer's.
var dsv32GGUFLayer = func() map[string]gg.TensorName {
	m := map[string]gg.TensorName{
		"self_attn.indexer.wq_b.weight":         gg.Weight(gg.KindIndexerAttnQB),
		"self_attn.indexer.wk.weight":           gg.Weight(gg.KindIndexerAttnK),
		"self_attn.indexer.k_norm.weight":       gg.Weight(gg.KindIndexerKNorm),
		"self_attn.indexer.k_norm.bias":         gg.Bias(gg.KindIndexerKNorm),
		"self_attn.indexer.weights_proj.weight": gg.Weight(gg.KindIndexerProj),
	}
	for k, v := range deepseek2GGUFLayer {
		m[k] = v
	}
	return m
}()
