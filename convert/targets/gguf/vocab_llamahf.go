package gguf

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// tokByte is llama.cpp's BYTE token type (a byte-fallback token <0xNN>).
const tokByte = 6

// byteToken is gguf-py's LlamaHfVocab test for a byte token.
var byteToken = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

// specialTokenKeys are the tokenizer_config.json keys naming the
// tokenizer's special tokens (transformers' all_special_tokens, with the
// lists of additional ones).
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// llamaHFVocabMetadata is the vocabulary as gguf-py's LlamaHfVocab reads a
// BPE tokenizer with byte fallback, written under tokenizer.ggml.model
// GGUFSpec.HFVocab (Gemma4Model.set_vocab): every base token by id, then the
// added tokens past it by id; every score -1000; types BYTE (<0xNN>),
// CONTROL (a special token of tokenizer_config.json), NORMAL, and
// USER_DEFINED for added tokens that are not special and for the family's
// GGUFSpec.UserDefinedTokens; the merges and SpecialVocab's keys; then
// add_space_prefix false and add_bos_token true, as the family's set_vocab
// sets them. The converter does not pad: a vocab_size other than the
// token count is refused, as is an embedding it would trim.
func llamaHFVocabMetadata(m *model.Model, n int64, tf *tokenizerFile) ([]gg.KV, error) {
	gs := m.Family.GGUF
	if tf.Model.Type != "BPE" || tf.Model.ByteFallback == nil || !*tf.Model.ByteFallback || tf.Decoder.Type != "Sequence" {
		return nil, fmt.Errorf("tokenizer.json: not a BPE vocabulary with byte fallback and a Sequence decoder, the tokenizer llama.cpp's converter reads for %s", m.Family.Title)
	}
	v := newVocabulary(n)
	if err := v.readVocab(tf.Model.Vocab); err != nil {
		return nil, err
	}
	base := int64(len(v.byID))
	added, err := v.readAdded(tf.Added)
	if err != nil {
		return nil, err
	}
	sv, err := readSpecialVocab(m, tf, added, n)
	if err != nil {
		return nil, err
	}
	specials := map[string]bool{}
	for _, k := range specialTokenKeys {
		if s, ok := str(sv.tc[k]); ok {
			specials[s] = true
		} else if s, ok := str(get(sv.tc[k], "content")); ok {
			specials[s] = true
		}
	}
	for _, k := range []string{"additional_special_tokens", "extra_special_tokens"} {
		list, _ := sv.tc[k].([]any)
		for _, x := range list {
			if s, ok := str(x); ok {
				specials[s] = true
			} else if s, ok := str(get(x, "content")); ok {
				specials[s] = true
			}
		}
	}
	var extra []int64 // added tokens past the base vocabulary, by id
	for _, a := range added {
		if a.ID >= base && !slices.Contains(extra, a.ID) {
			extra = append(extra, a.ID)
		}
	}
	slices.Sort(extra)
	if total := base + int64(len(extra)); total != n {
		return nil, fmt.Errorf("tokenizer.json: %d tokens for vocab_size %d: llama.cpp's converter writes the tokens as they are, without padding (not ported)", total, n)
	}
	tokens := make([]string, 0, n)
	types := make([]int32, 0, n)
	for i := int64(0); i < base; i++ {
		t, ok := v.byID[i]
		if !ok {
			return nil, fmt.Errorf("tokenizer.json: no token has the id %d of the %d-token base vocabulary", i, base)
		}
		typ := int32(tokNormal)
		switch {
		case byteToken.MatchString(t):
			typ = tokByte
		case specials[t]:
			typ = tokControl
		}
		tokens, types = append(tokens, t), append(types, typ)
	}
	for _, id := range extra {
		t := v.byID[id]
		typ := int32(tokUserDefined)
		if specials[t] {
			typ = tokControl
		}
		tokens, types = append(tokens, t), append(types, typ)
	}
	for i, t := range tokens {
		if slices.Contains(gs.UserDefinedTokens, t) {
			types[i] = tokUserDefined
		}
	}
	merges, err := readMerges(tf)
	if err != nil {
		return nil, err
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = -1000
	}
	kvs := []gg.KV{
		gg.Pair("tokenizer.ggml.model", gg.Str(gs.HFVocab)),
		gg.Pair("tokenizer.ggml.tokens", gg.Strings(tokens)),
		gg.Pair("tokenizer.ggml.scores", gg.Float32s(scores)),
		gg.Pair("tokenizer.ggml.token_type", gg.Int32s(types)),
		gg.Pair("tokenizer.ggml.merges", gg.Strings(merges)),
	}
	if err := sv.familyTokens(gs.SpecialTokens); err != nil {
		return nil, err
	}
	kvs = append(append(kvs, sv.kvs()...), gg.Pair("tokenizer.ggml.add_space_prefix", gg.Bool(false)))
	if i := slices.IndexFunc(kvs, func(kv gg.KV) bool { return kv.Key == "tokenizer.ggml.add_bos_token" }); i >= 0 {
		kvs[i].Value = gg.Bool(true)
	} else {
		kvs = append(kvs, gg.Pair("tokenizer.ggml.add_bos_token", gg.Bool(true)))
	}
	return kvs, nil
}
