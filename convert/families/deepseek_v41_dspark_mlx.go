package families

import (
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
)

// dsparkMLX is 0731's --target mlx: the deepseek_v4_dspark drafter folder
// mlx-vlm 0.7.10's DeepseekV4DsparkSplitter writes (the deepseek_v4
// splitter hands it any config with dspark_target_layer_ids). Its split
// runs deepseek_v4_mtp's block sanitize stage by stage (the FP4 experts
// stacked and kept mxfp4, the block-FP8 weights kept mxfp8, wo_a reshaped
// per group, the shared experts and hyper-connections renamed), then puts
// stage s under stages.{s}. without decoder., the Markov head at the root,
// and drops the confidence head (the dflash loop does not read it); one
// shard per stage; config.json adds n_mtp_layers, target_layer_ids,
// mask_token_id, markov_rank and block_size dspark_block_size + 1. From
// the FP8/FP4 release it writes that one form (quantization_from_source
// wins over any quantization asked). DeepSeek-V4.1 has no splitter.
var dsparkMLX = model.MLXSpec{
	Refuse:                   dsparkMLXRefuse,
	DrafterModelType:         "deepseek_v4_dspark",
	DrafterKind:              "dflash", // a block drafter: mlx-vlm's dflash loop
	DrafterName:              dsparkDrafterName,
	DrafterKeepsStorage:      true,
	DrafterSourceQuantConfig: true, // read_text_config copies the flat config whole
	DrafterExpertOrder:       []int{0, 2, 1},
	DrafterStageFiles:        true,
	DrafterShape:             dsparkDrafterShape,
	DrafterConfig:            dsparkDrafterConfig,
	CombinedRefusal:          "stock mlx-lm 0.32.2 has no deepseek_v4 model and its deepseek_v41 drops every `mtp.*` tensor (models/deepseek_v41.py:1014), so a combined file would carry stages nothing runs.",
}

// dsparkMLXRefuse refuses DeepSeek-V4.1, which no mlx-vlm drafts.
func dsparkMLXRefuse(c *model.Config) string {
	if model.KeysOf[DSparkConfig](c).V41 {
		return "mlx-vlm 0.7.10 has no DSpark splitter for DeepSeek-V4.1 (mtp_split.py's MTP_SPLITTERS has no deepseek_v41) and its deepseek_v41 model drops every `mtp.*` tensor (models/deepseek_v41/deepseek_v41.py:196), so nothing of it drafts DeepSeek-V4.1."
	}
	return ""
}

// dsparkDrafterName is the DSpark sanitize's name of a stage tensor (given
// as HeadRelative names it, "layers.1.attn.wq_a.weight"): deepseek_v4_mtp's
// block name with decoder. dropped, under stages.{s}.; the Markov head at
// the root; the confidence head dropped ("").
func dsparkDrafterName(rel string) string {
	after, ok := strings.CutPrefix(rel, "layers.")
	if !ok {
		return rel
	}
	s, rest, _ := strings.Cut(after, ".")
	if _, err := strconv.Atoi(s); err != nil {
		return rel
	}
	body := strings.TrimPrefix(dsv4DrafterName("layers.0."+rest), "decoder.")
	switch {
	case strings.HasPrefix(body, "confidence_head."):
		return ""
	case strings.HasPrefix(body, "markov_head."):
		return body
	}
	return "stages." + s + "." + body
}

// dsparkDrafterShape is the sanitize's reshape of each stage's wo_a into
// its output groups, [o_groups, o_lora_rank, in].
func dsparkDrafterShape(c *model.Config, name string, shape []int64) []int64 {
	d := model.KeysOf[DSparkConfig](c)
	if !strings.HasPrefix(name, "stages.") || !strings.HasSuffix(name, ".attn.wo_a.weight") || len(shape) != 2 || d.OGroups <= 0 {
		return shape
	}
	return []int64{int64(d.OGroups), shape[0] / int64(d.OGroups), shape[1]}
}

// dsparkDrafterConfig is the splitter's extra_config: the stage count, the
// DSpark contract under the drafter's names, block_size one past
// dspark_block_size (the anchor and its drafts).
func dsparkDrafterConfig(m *model.Model) map[string]any {
	d := model.KeysOf[DSparkConfig](m.Config)
	return map[string]any{
		"n_mtp_layers":     m.MTPDepth,
		"target_layer_ids": d.TargetLayerIDs,
		"mask_token_id":    derefOr(d.NoiseTokenID, 0),
		"markov_rank":      derefOr(d.MarkovRank, 256),
		"block_size":       d.BlockSize + 1,
	}
}
