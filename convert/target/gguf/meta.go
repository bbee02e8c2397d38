package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// archOf is llama.cpp's architecture name of a family.
var archOf = map[string]string{"qwen3_5_moe": "qwen35moe", "qwen3_next": "qwen3next", "qwen3_5": "qwen35"}

// hparams is the text configuration as the reference converter reads it:
// text_config's keys over the root's.
type hparams map[string]any

func readHparams(m *convert.Model) (hparams, error) {
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(m.Config.Raw))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("%s: %w", convert.ConfigFile, err)
	}
	h := hparams{}
	for k, v := range root {
		h[k] = v
	}
	if tc, ok := root["text_config"].(map[string]any); ok {
		for k, v := range tc {
			h[k] = v
		}
	}
	return h, nil
}

// hparamsAndVocab reads the configuration and the vocabulary metadata.
func hparamsAndVocab(m *convert.Model) (hparams, []gg.KV, error) {
	h, err := readHparams(m)
	if err != nil {
		return nil, nil, err
	}
	vocab, err := vocabMetadata(m, h)
	return h, vocab, err
}

func (h hparams) int(key string) (int64, bool) {
	n, ok := h[key].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// metadata is every key the reference converter writes for the MTP-only
// sidecar but general.name and the other provenance keys (general.* from
// the model card), in its order.
func metadata(m *convert.Model, h hparams, ftype gg.FileType, name string, vocab []gg.KV) []gg.KV {
	c := m.Config
	a := archOf[m.Family]
	u := func(v int) gg.Value { return gg.U32(uint32(v)) }
	kvs := []gg.KV{
		gg.Pair("general.architecture", gg.Str(a)),
		gg.Pair("general.type", gg.Str("model")),
		gg.Pair("general.name", gg.Str(name)),
	}
	add := func(k string, v gg.Value) { kvs = append(kvs, gg.KV{Key: k, Value: v}) }
	nLayer := c.NumHiddenLayers
	add(a+".block_count", u(nLayer+m.MTPDepth))
	if n, ok := h.int("max_position_embeddings"); ok {
		add(a+".context_length", u(int(n)))
	}
	add(a+".embedding_length", u(c.HiddenSize))
	if n, ok := h.int("intermediate_size"); ok {
		add(a+".feed_forward_length", u(int(n)))
	}
	add(a+".attention.head_count", u(c.NumAttentionHeads))
	add(a+".attention.head_count_kv", u(c.NumKeyValueHeads))
	if m.Family == "qwen3_5_moe" || m.Family == "qwen3_5" {
		// Qwen3.5 always writes its M-RoPE sections (the default when absent), padded to 4.
		sec := []int32{11, 11, 10, 0}
		if rp, ok := h["rope_parameters"].(map[string]any); ok {
			if ms, ok := rp["mrope_section"].([]any); ok {
				sec = nil
				for _, x := range ms {
					if n, ok := x.(json.Number); ok {
						v, _ := n.Int64()
						sec = append(sec, int32(v))
					}
				}
				for len(sec) < 4 {
					sec = append(sec, 0)
				}
				sec = sec[:4]
			}
		}
		add(a+".rope.dimension_sections", gg.Int32s(sec))
	}
	add(a+".rope.freq_base", gg.Float(float32(c.RopeTheta)))
	add(a+".attention.layer_norm_rms_epsilon", gg.Float(float32(c.RMSNormEps)))
	dense := c.Dense() // qwen35: feed_forward_length above, no expert keys
	if !dense {
		add(a+".expert_count", u(c.NumExperts))
		add(a+".expert_used_count", u(c.NumExpertsPerTok))
	}
	if _, ok := h.int("head_dim"); ok {
		add(a+".attention.key_length", u(c.HeadDim))
		add(a+".attention.value_length", u(c.HeadDim))
	}
	add("general.file_type", gg.U32(uint32(ftype)))
	if !dense {
		add(a+".expert_feed_forward_length", u(c.MoeIntermediateSize))
		add(a+".expert_shared_feed_forward_length", u(c.SharedExpertIntermed))
	}
	add(a+".nextn_predict_layers", u(m.MTPDepth))
	add(a+".ssm.conv_kernel", u(c.LinearConvKernelDim))
	add(a+".ssm.state_size", u(c.LinearKeyHeadDim))
	add(a+".ssm.group_count", u(c.LinearNumKeyHeads))
	add(a+".ssm.time_step_rank", u(c.LinearNumValueHeads))
	add(a+".ssm.inner_size", u(c.LinearValueHeadDim*c.LinearNumValueHeads))
	var rec []bool
	for _, t := range m.LayerTypes {
		rec = append(rec, t == convert.LinearAttention)
	}
	for range m.MTPDepth {
		rec = append(rec, false)
	}
	add(a+".attention.recurrent_layers", gg.Bools(rec))
	add(a+".full_attention_interval", u(c.FullAttentionInterval))
	add(a+".rope.dimension_count", u(c.RotaryDim()))
	add("general.quantization_version", gg.U32(2))
	return append(kvs, vocab...)
}

// Token types, as llama.cpp numbers them.
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
)

// preTokenizer is what the reference converter's tokenizer detection answers
// for the official tokenizers of each family.
var preTokenizer = map[string]string{"qwen3_5_moe": "qwen35", "qwen3_5": "qwen35", "qwen3_next": "qwen2"}

type addedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

// vocabMetadata reads tokenizer.json and tokenizer_config.json the way the
// reference converter does for these models (a GPT-2 BPE vocabulary, padded
// to the config's vocab_size with [PAD{i}] tokens; merges; then gguf-py's
// SpecialVocab: special tokens, add_*_token, the chat template). A
// vocabulary whose token list would not be one string per id, each once, in
// valid UTF-8, is refused with the token named.
func vocabMetadata(m *convert.Model, h hparams) ([]gg.KV, error) {
	n, ok := h.int("vocab_size")
	if !ok {
		n = int64(m.Config.VocabSize)
	}
	tf, err := readTokenizer(m.Checkpoint.Source, m.Checkpoint.Source.Name(), n)
	if err != nil {
		return nil, err
	}
	if tf.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q, not the BPE vocabulary of these models", tf.Model.Type)
	}
	v := newVocabulary(n)
	if err := v.readVocab(tf.Model.Vocab); err != nil {
		return nil, err
	}
	added, err := v.readAdded(tf.Added)
	if err != nil {
		return nil, err
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	at := make(map[string]int64, len(v.byID))
	for i := int64(0); i < n; i++ {
		t, ok := v.byID[i]
		switch a, isAdded := v.added[i]; {
		case !ok:
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), tokUnused
		case isAdded && (a.Special || looksSpecial(t)):
			tokens[i], types[i] = t, tokControl
		case isAdded:
			tokens[i], types[i] = strings.ReplaceAll(t, "\u2581", " "), tokUserDefined
		default:
			tokens[i], types[i] = t, tokNormal
		}
		if j, dup := at[tokens[i]]; dup {
			return nil, fmt.Errorf("tokenizer.json: ids %d and %d would both be the token %q in the GGUF vocabulary (llama.cpp refuses a duplicate)", j, i, tokens[i])
		}
		at[tokens[i]] = i
	}
	var merges []string
	for _, mr := range tf.Model.Merges {
		var s string
		if json.Unmarshal(mr, &s) == nil {
			merges = append(merges, s)
			continue
		}
		var pair []string
		if err := json.Unmarshal(mr, &pair); err != nil || len(pair) != 2 {
			return nil, fmt.Errorf("tokenizer.json: merge %s is neither \"a b\" nor [a, b]", mr)
		}
		merges = append(merges, pair[0]+" "+pair[1])
	}
	kvs := []gg.KV{
		gg.Pair("tokenizer.ggml.model", gg.Str("gpt2")),
		gg.Pair("tokenizer.ggml.pre", gg.Str(preTokenizer[m.Family])),
		gg.Pair("tokenizer.ggml.tokens", gg.Strings(tokens)),
		gg.Pair("tokenizer.ggml.token_type", gg.Int32s(types)),
		gg.Pair("tokenizer.ggml.merges", gg.Strings(merges)),
	}
	sv, err := readSpecialVocab(m, tf, added, n)
	if err != nil {
		return nil, err
	}
	return append(kvs, sv.kvs()...), nil
}

// looksSpecial is the reference converter's does_token_look_special.
func looksSpecial(t string) bool {
	switch t {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(t, "<|") && strings.HasSuffix(t, "|>") ||
		strings.HasPrefix(t, "<｜") && strings.HasSuffix(t, "｜>") ||
		strings.HasPrefix(t, "<unused") && strings.HasSuffix(t, ">")
}
