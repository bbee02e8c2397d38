package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is one of llama.cpp's tensor kinds (gguf-py's MODEL_TENSOR): its
// GGUF name (TENSOR_NAMES) and the type rules that follow from it, the
// reference converter's and llama-quantize's. A family's GGUF table maps
// its Hugging Face tensor names to kinds (TensorName); every type decision
// of the gguf target and of verify is made from this table.
type Kind uint8

// The kinds the supported families' GGUF files hold.
const (
	KindTokenEmbd Kind = iota + 1
	KindOutputNorm
	KindOutput
	KindAttnNorm
	KindAttnPostNorm // post_attention_norm (the Qwen and GLM-4.5 post-attention RMSNorm)
	KindFFNNorm      // ffn_norm (deepseek2's post-attention RMSNorm)
	KindAttnQ
	KindAttnQKV // attn_qkv (a fused q/k/v projection: MiMo-V2.5)
	KindAttnK
	KindAttnV
	KindAttnOut
	KindAttnQNorm
	KindAttnKNorm
	KindAttnGate  // attn_gate (Step-3.5's head-wise attention gate, sigmoid of one value per head)
	KindAttnSinks // attn_sinks (learned per-head softmax sinks: MiMo-V2's sliding-window layers)
	KindAttnQA
	KindAttnQANorm
	KindAttnQB
	KindAttnKVAMQA
	KindAttnKVANorm
	KindAttnKB
	KindAttnVB
	KindFFNGateInp
	KindFFNExpProbsB
	KindFFNGateInpShexp
	KindFFNGateShexp
	KindFFNUpShexp
	KindFFNDownShexp
	KindFFNGate
	KindFFNUp
	KindFFNDown
	KindFFNGateExps
	KindFFNUpExps
	KindFFNDownExps
	KindLayerOutNorm  // layer_output_norm (MiMo-V2's MTP final_layernorm, applied before the LM head)
	KindFFNLatentDown // a latent MoE's projection of the hidden state into the experts' width (MOE_LATENT_DOWN)
	KindFFNLatentUp   // and back (MOE_LATENT_UP)
	KindIndexerKNorm
	KindIndexerProj
	KindIndexerAttnK
	KindIndexerAttnQB
	KindNextNEHProj
	KindNextNEmbedTokens
	KindNextNEnorm
	KindNextNHnorm
	KindNextNSharedHeadNorm
	KindNextNSharedHeadHead
	// The head's hyper-connection mixer in llama.cpp#28243's qwen4exp
	// dialect (Qwen3.8-Flash-Next; no pinned llama.cpp knows them yet).
	KindNextNHCHeadNorm
	KindNextNHCHeadDown
	KindNextNHCHeadUp
	// A qwen4exp layer's hyper-connections and QSA indexer (#28243).
	KindHCAttnNorm
	KindHCAttnDown
	KindHCAttnUp
	KindHCAttnInject
	KindHCFFNNorm
	KindHCFFNDown
	KindHCFFNUp
	KindHCFFNInject
	KindIndexerQNorm
	// DeepSeek-V4's (deepseek4): the shared key-value projection, the
	// grouped low-rank output, the hyper-connections' pre/post/mix weights
	// around each sub-layer and before the output (output_hc_*).
	KindAttnKV
	KindAttnOutA
	KindAttnOutB
	KindHCAttnFn
	KindHCAttnBase
	KindHCAttnScale
	KindHCFFNFn
	KindHCFFNBase
	KindHCFFNScale
	KindOutputHCFn
	KindOutputHCBase
	KindOutputHCScale
	KindRopeFreqs // rope_freqs (llama3 RoPE scaling's per-frequency factors, one tensor every layer reads)
	// The Gemma-4 assistant's (gemma4-assistant): its projections from and
	// to the target's width (top level, not in a block), its post-FFN norm
	// and per-layer output scale, and the E2B/E4B centroid LM head (which
	// the reference converter drops, llama.cpp loading it if present).
	KindNextNProjPre
	KindNextNProjPost
	KindFFNPostNorm
	KindLayerOutScale
	KindMaskedEmbdCentroids
	KindMaskedEmbdOrdering
	// A dflash draft's own tensors outside the blocks (DeepSeek-V4-Flash-0731's
	// DSpark stages, conversion/deepseek.py _DSPARK_ROOT_MAP): the projection of
	// the target's hidden states (fc) and its norm (enc.output_norm), the
	// Markov head's two factors and the confidence head.
	KindFC
	KindEncOutputNorm
	KindMarkovW1
	KindMarkovW2
	KindConfProj
)

// KindInfo is what llama.cpp's tools know of a kind.
type KindInfo struct {
	// Name is gguf-py's TENSOR_NAMES entry, within the block for a block's
	// tensor ("attn_q" of "blk.{bid}.attn_q").
	Name  string
	Block bool // under blk.{bid}.
	// ConverterF32: the reference converter writes its weight float32
	// whatever the output type (the kinds its prepare_tensors lists:
	// FFN_GATE_INP, FFN_GATE_INP_SHEXP, INDEXER_PROJ). Norms (a name ending
	// "_norm"), one-dimensional tensors and biases are float32 too, by
	// ConverterType.
	ConverterF32 bool
}

// kinds is the table: gguf-py's constants.py (TENSOR_NAMES) and the
// reference converter's float32 list (ModelBase.prepare_tensors) of the
// llama.cpp vendored by llama-cpp-python 0.3.36. llama-quantize decides by
// the name alone (quantize.go), for any tensor of a file.
var kinds = map[Kind]KindInfo{
	KindTokenEmbd:           {Name: "token_embd"},
	KindOutputNorm:          {Name: "output_norm"},
	KindOutput:              {Name: "output"},
	KindAttnNorm:            {Name: "attn_norm", Block: true},
	KindAttnPostNorm:        {Name: "post_attention_norm", Block: true},
	KindFFNNorm:             {Name: "ffn_norm", Block: true},
	KindAttnQ:               {Name: "attn_q", Block: true},
	KindAttnQKV:             {Name: "attn_qkv", Block: true},
	KindAttnK:               {Name: "attn_k", Block: true},
	KindAttnV:               {Name: "attn_v", Block: true},
	KindAttnOut:             {Name: "attn_output", Block: true},
	KindAttnQNorm:           {Name: "attn_q_norm", Block: true},
	KindAttnKNorm:           {Name: "attn_k_norm", Block: true},
	KindAttnGate:            {Name: "attn_gate", Block: true},
	KindAttnSinks:           {Name: "attn_sinks", Block: true},
	KindAttnQA:              {Name: "attn_q_a", Block: true},
	KindAttnQANorm:          {Name: "attn_q_a_norm", Block: true},
	KindAttnQB:              {Name: "attn_q_b", Block: true},
	KindAttnKVAMQA:          {Name: "attn_kv_a_mqa", Block: true},
	KindAttnKVANorm:         {Name: "attn_kv_a_norm", Block: true},
	KindAttnKB:              {Name: "attn_k_b", Block: true},
	KindAttnVB:              {Name: "attn_v_b", Block: true},
	KindFFNGateInp:          {Name: "ffn_gate_inp", Block: true, ConverterF32: true},
	KindFFNExpProbsB:        {Name: "exp_probs_b", Block: true},
	KindFFNGateInpShexp:     {Name: "ffn_gate_inp_shexp", Block: true, ConverterF32: true},
	KindFFNGateShexp:        {Name: "ffn_gate_shexp", Block: true},
	KindFFNUpShexp:          {Name: "ffn_up_shexp", Block: true},
	KindFFNDownShexp:        {Name: "ffn_down_shexp", Block: true},
	KindFFNGate:             {Name: "ffn_gate", Block: true},
	KindFFNUp:               {Name: "ffn_up", Block: true},
	KindFFNDown:             {Name: "ffn_down", Block: true},
	KindFFNGateExps:         {Name: "ffn_gate_exps", Block: true},
	KindFFNUpExps:           {Name: "ffn_up_exps", Block: true},
	KindFFNDownExps:         {Name: "ffn_down_exps", Block: true},
	KindLayerOutNorm:        {Name: "layer_output_norm", Block: true},
	KindFFNLatentDown:       {Name: "ffn_latent_down", Block: true},
	KindFFNLatentUp:         {Name: "ffn_latent_up", Block: true},
	KindIndexerKNorm:        {Name: "indexer.k_norm", Block: true},
	KindIndexerProj:         {Name: "indexer.proj", Block: true, ConverterF32: true},
	KindIndexerAttnK:        {Name: "indexer.attn_k", Block: true},
	KindIndexerAttnQB:       {Name: "indexer.attn_q_b", Block: true},
	KindNextNEHProj:         {Name: "nextn.eh_proj", Block: true},
	KindNextNEmbedTokens:    {Name: "nextn.embed_tokens", Block: true},
	KindNextNEnorm:          {Name: "nextn.enorm", Block: true},
	KindNextNHnorm:          {Name: "nextn.hnorm", Block: true},
	KindNextNSharedHeadNorm: {Name: "nextn.shared_head_norm", Block: true},
	KindNextNSharedHeadHead: {Name: "nextn.shared_head_head", Block: true},
	KindNextNHCHeadNorm:     {Name: "nextn.hc_head_norm", Block: true},
	KindNextNHCHeadDown:     {Name: "nextn.hc_head_down", Block: true},
	KindNextNHCHeadUp:       {Name: "nextn.hc_head_up", Block: true},
	KindHCAttnNorm:          {Name: "hc_attn_norm", Block: true},
	KindHCAttnDown:          {Name: "hc_attn_down", Block: true},
	KindHCAttnUp:            {Name: "hc_attn_up", Block: true},
	KindHCAttnInject:        {Name: "hc_attn_inject", Block: true},
	KindHCFFNNorm:           {Name: "hc_ffn_norm", Block: true},
	KindHCFFNDown:           {Name: "hc_ffn_down", Block: true},
	KindHCFFNUp:             {Name: "hc_ffn_up", Block: true},
	KindHCFFNInject:         {Name: "hc_ffn_inject", Block: true},
	KindIndexerQNorm:        {Name: "indexer.q_norm", Block: true},
	KindRopeFreqs:           {Name: "rope_freqs"},
	KindAttnKV:              {Name: "attn_kv", Block: true},
	KindAttnOutA:            {Name: "attn_output_a", Block: true},
	KindAttnOutB:            {Name: "attn_output_b", Block: true},
	KindHCAttnFn:            {Name: "hc_attn_fn", Block: true},
	KindHCAttnBase:          {Name: "hc_attn_base", Block: true},
	KindHCAttnScale:         {Name: "hc_attn_scale", Block: true},
	KindHCFFNFn:             {Name: "hc_ffn_fn", Block: true},
	KindHCFFNBase:           {Name: "hc_ffn_base", Block: true},
	KindHCFFNScale:          {Name: "hc_ffn_scale", Block: true},
	KindOutputHCFn:          {Name: "output_hc_fn"},
	KindOutputHCBase:        {Name: "output_hc_base"},
	KindOutputHCScale:       {Name: "output_hc_scale"},
	KindNextNProjPre:        {Name: "nextn.pre_projection"},
	KindNextNProjPost:       {Name: "nextn.post_projection"},
	KindFFNPostNorm:         {Name: "post_ffw_norm", Block: true},
	KindLayerOutScale:       {Name: "layer_output_scale", Block: true},
	KindMaskedEmbdCentroids: {Name: "masked_embd_centroids"},
	KindMaskedEmbdOrdering:  {Name: "masked_embd_ordering"},
	KindFC:                  {Name: "fc"},
	KindEncOutputNorm:       {Name: "enc.output_norm"},
	KindMarkovW1:            {Name: "markov_w1"},
	KindMarkovW2:            {Name: "markov_w2"},
	KindConfProj:            {Name: "conf_proj"},
}

// Info is the kind's entry in the table.
func (k Kind) Info() KindInfo { return kinds[k] }

func (k Kind) String() string {
	if i, ok := kinds[k]; ok {
		return i.Name
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// NextN reports whether the kind is one of llama.cpp's MTP (nextn.*)
// tensors: the head's own, which no trunk block has.
func (k Kind) NextN() bool { return strings.HasPrefix(kinds[k].Name, "nextn.") }

// TensorName is a tensor of a kind: its weight, its bias, or the kind's
// name bare (no suffix: the reference converter writes a checkpoint tensor
// that gguf-py's tensor map names whole, such as afmoe's and hy_v3's
// mlp.expert_bias, as blk.N.exp_probs_b, which their llama.cpp loaders read).
type TensorName struct {
	Kind Kind
	Bias bool
	Bare bool
}

// Weight, Bias and BareName name a kind's tensors.
func Weight(k Kind) TensorName   { return TensorName{Kind: k} }
func Bias(k Kind) TensorName     { return TensorName{Kind: k, Bias: true} }
func BareName(k Kind) TensorName { return TensorName{Kind: k, Bare: true} }

// In is the tensor's GGUF name in block b (ignored outside blocks).
func (t TensorName) In(b int) string {
	i := kinds[t.Kind]
	n := i.Name + ".weight"
	switch {
	case t.Bare:
		n = i.Name
	case t.Bias:
		n = i.Name + ".bias"
	}
	if i.Block {
		return "blk." + strconv.Itoa(b) + "." + n
	}
	return n
}

// byName finds a kind by its name within the block, or outside blocks.
var byName = func() map[[2]string]Kind {
	m := map[[2]string]Kind{}
	for k, i := range kinds {
		m[[2]string{strconv.FormatBool(i.Block), i.Name}] = k
	}
	return m
}()

// ParseTensorName finds the kind, block (-1 outside blocks) and
// weight, bias or bare name of a GGUF tensor name.
func ParseTensorName(name string) (TensorName, int, error) {
	block, rest := -1, name
	if r, ok := strings.CutPrefix(name, "blk."); ok {
		b, after, ok := strings.Cut(r, ".")
		n, err := strconv.Atoi(b)
		if !ok || err != nil || n < 0 {
			return TensorName{}, 0, fmt.Errorf("tensor %s: not blk.N.<name>", name)
		}
		block, rest = n, after
	}
	var t TensorName
	switch {
	case strings.HasSuffix(rest, ".weight"):
		rest = strings.TrimSuffix(rest, ".weight")
	case strings.HasSuffix(rest, ".bias"):
		rest, t.Bias = strings.TrimSuffix(rest, ".bias"), true
	default:
		k, ok := byName[[2]string{strconv.FormatBool(block >= 0), rest}]
		if !ok {
			return TensorName{}, 0, fmt.Errorf("tensor %s: neither a weight nor a bias nor a kind llama.cpp's tables name", name)
		}
		return TensorName{Kind: k, Bare: true}, block, nil
	}
	k, ok := byName[[2]string{strconv.FormatBool(block >= 0), rest}]
	if !ok {
		return TensorName{}, 0, fmt.Errorf("tensor %s: not a tensor kind llama.cpp's tables name", name)
	}
	t.Kind = k
	return t, block, nil
}

// ConverterType is the type the reference converter (convert_hf_to_gguf.py)
// writes a tensor of dims dimensions in, for the float type of the output
// (BF16, F16): float32 for one-dimensional tensors, biases and, when
// byKind, the kinds it keeps float32. (It matches those kinds in the block
// whose number it read from the source tensor's name: a family that renames
// a head's sub-layer into block n_layer only after that gets the output
// float type for them, byKind false; see model.GGUFSpec.HeadBlockFromSubLayer.)
func ConverterType(name string, dims int, float string, byKind bool) (string, error) {
	t, _, err := ParseTensorName(name)
	if err != nil {
		return "", err
	}
	if dims <= 1 || t.Bias || t.Bare || byKind && t.Kind.Info().ConverterF32 || strings.HasSuffix(name, "_norm.weight") {
		return "F32", nil
	}
	return float, nil
}
