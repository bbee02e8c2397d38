package gguf

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// Metadata is every key the reference converter writes for the MTP-only
// sidecar but general.name's provenance siblings (general.* from the model
// card), in its order: the general keys, the family's architecture keys
// with general.file_type after its base ones, the vocabulary.
func Metadata(m *model.Model, h model.Hparams, ftype gg.FileType, name string, vocab []gg.KV) ([]gg.KV, error) {
	kvs := []gg.KV{
		gg.Pair("general.architecture", gg.Str(m.Family.GGUF.Arch)),
		gg.Pair("general.type", gg.Str("model")),
		gg.Pair("general.name", gg.Str(name)),
	}
	base, own, err := m.GGUFMetadata(h)
	if err != nil {
		return nil, err
	}
	kvs = append(kvs, base...)
	kvs = append(kvs, gg.Pair("general.file_type", gg.U32(uint32(ftype))))
	kvs = append(kvs, own...)
	kvs = append(kvs, gg.Pair("general.quantization_version", gg.U32(2)))
	return append(kvs, vocab...), nil
}

// Token types, as llama.cpp numbers them.
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
)

type addedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

// VocabMetadata reads tokenizer.json and tokenizer_config.json the way the
// reference converter does for these models (a GPT-2 BPE vocabulary, padded
// to the config's vocab_size with [PAD{i}] tokens; merges; then gguf-py's
// SpecialVocab: special tokens, add_*_token, the chat template). A
// vocabulary whose token list would not be one string per id, each once, in
// valid UTF-8, is refused with the token named.
func VocabMetadata(m *model.Model, h model.Hparams) ([]gg.KV, error) {
	n, tf, err := sourceTokenizer(m, h)
	if err != nil {
		return nil, err
	}
	if m.Family.GGUF.HFVocab != "" {
		return llamaHFVocabMetadata(m, n, tf)
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
	merges, err := readMerges(tf)
	if err != nil {
		return nil, err
	}
	kvs := []gg.KV{
		gg.Pair("tokenizer.ggml.model", gg.Str("gpt2")),
		gg.Pair("tokenizer.ggml.pre", gg.Str(m.Family.GGUF.PreTokenizer)),
		gg.Pair("tokenizer.ggml.tokens", gg.Strings(tokens)),
		gg.Pair("tokenizer.ggml.token_type", gg.Int32s(types)),
		gg.Pair("tokenizer.ggml.merges", gg.Strings(merges)),
	}
	sv, err := readSpecialVocab(m, tf, added, n)
	if err != nil {
		return nil, err
	}
	if err := sv.familyTokens(m.Family.GGUF.SpecialTokens); err != nil {
		return nil, err
	}
	return append(kvs, sv.kvs()...), nil
}

// sourceTokenizer is the source's tokenizer.json, read for vocab_size
// (the converter's hparams, else the config's) tokens.
func sourceTokenizer(m *model.Model, h model.Hparams) (int64, *tokenizerFile, error) {
	n, ok := h.Int("vocab_size")
	if !ok {
		n = int64(m.Config.VocabSize)
	}
	tf, err := readTokenizer(m.Checkpoint.Source, m.Checkpoint.Source.Name(), n)
	return n, tf, err
}

// readMerges is tokenizer.json's merges as "a b" strings (SpecialVocab's
// load_merges), from either spelling.
func readMerges(tf *tokenizerFile) ([]string, error) {
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
	return merges, nil
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
