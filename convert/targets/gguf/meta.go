package gguf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Metadata is every key the reference converter writes for the MTP-only
// sidecar but general.name's provenance siblings (general.* from the model
// card), in its order: the general keys, the family's architecture keys
// with general.file_type after its base ones, the vocabulary.
func Metadata(m *model.Model, h model.Hparams, ftype gg.FileType, name string, vocab []gg.KV) []gg.KV {
	kvs := []gg.KV{
		gg.Pair("general.architecture", gg.Str(m.Spec.GGUF.Arch)),
		gg.Pair("general.type", gg.Str("model")),
		gg.Pair("general.name", gg.Str(name)),
	}
	base, own := m.Spec.GGUF.Metadata(m, h)
	kvs = append(kvs, base...)
	kvs = append(kvs, gg.Pair("general.file_type", gg.U32(uint32(ftype))))
	kvs = append(kvs, own...)
	kvs = append(kvs, gg.Pair("general.quantization_version", gg.U32(2)))
	return append(kvs, vocab...)
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
// to the config's vocab_size with [PAD{i}] tokens; special tokens from
// tokenizer_config.json; merges; the chat template).
func VocabMetadata(m *model.Model, h model.Hparams) ([]gg.KV, error) {
	src := m.Checkpoint.Source
	raw, err := st.ReadSmallFile(src, "tokenizer.json", 256<<20)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: tokenizer.json is missing (llama.cpp needs the vocabulary in the GGUF)", src.Name())
		}
		return nil, err
	}
	var tj struct {
		Model struct {
			Type   string            `json:"type"`
			Vocab  map[string]int64  `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
		Added []addedToken `json:"added_tokens"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q, not the BPE vocabulary of these models", tj.Model.Type)
	}
	reverse := map[int64]string{}
	maxID := int64(-1)
	for t, id := range tj.Model.Vocab {
		reverse[id] = t
		maxID = max(maxID, id)
	}
	added := map[int64]addedToken{}
	for _, a := range tj.Added {
		reverse[a.ID] = a.Content
		added[a.ID] = a
		maxID = max(maxID, a.ID)
	}
	n, ok := h.Int("vocab_size")
	if !ok {
		n = int64(len(reverse))
	}
	if maxID >= n {
		return nil, fmt.Errorf("tokenizer.json: token id %d is not below vocab_size %d", maxID, n)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for i := int64(0); i < n; i++ {
		t, ok := reverse[i]
		switch a, isAdded := added[i]; {
		case !ok:
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), tokUnused
		case isAdded && (a.Special || looksSpecial(t)):
			tokens[i], types[i] = t, tokControl
		case isAdded:
			tokens[i], types[i] = strings.ReplaceAll(t, "\u2581", " "), tokUserDefined
		default:
			tokens[i], types[i] = t, tokNormal
		}
	}
	var merges []string
	for _, mr := range tj.Model.Merges {
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
		gg.Pair("tokenizer.ggml.pre", gg.Str(m.Spec.GGUF.PreTokenizer)),
		gg.Pair("tokenizer.ggml.tokens", gg.Strings(tokens)),
		gg.Pair("tokenizer.ggml.token_type", gg.Int32s(types)),
		gg.Pair("tokenizer.ggml.merges", gg.Strings(merges)),
	}
	special, err := specialTokens(m, tj.Added, n)
	if err != nil {
		return nil, err
	}
	return append(kvs, special...), nil
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

// specialTokens is gguf-py's SpecialVocab for these models: the ids of the
// special tokens tokenizer_config.json names (config.json's *_token_id
// when it names none), add_bos/add_eos, and the chat template
// (tokenizer_config.json's, else chat_template.jinja).
func specialTokens(m *model.Model, added []addedToken, n int64) ([]gg.KV, error) {
	src := m.Checkpoint.Source
	var tc map[string]json.RawMessage
	if raw, err := st.ReadSmallFile(src, "tokenizer_config.json", 64<<20); err == nil {
		if err := json.Unmarshal(raw, &tc); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var cfg map[string]json.RawMessage
	json.Unmarshal(m.Config.Raw, &cfg)
	var kvs []gg.KV
	ids := map[string]int64{}
	for _, typ := range []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"} {
		content := tokenContent(tc[typ+"_token"])
		found := false
		if content != "" {
			for _, a := range added {
				if a.Content == content {
					ids[typ], found = a.ID, true
					break
				}
			}
		}
		if !found {
			var id int64
			if raw, ok := cfg[typ+"_token_id"]; ok && json.Unmarshal(raw, &id) == nil && id >= 0 && id < n {
				ids[typ], found = id, true
			}
		}
	}
	keyName := map[string]string{"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
		"pad": "padding_token_id", "cls": "cls_token_id", "mask": "mask_token_id"}
	types := make([]string, 0, len(ids))
	for t := range ids {
		types = append(types, t)
	}
	order := map[string]int{"bos": 0, "eos": 1, "unk": 2, "sep": 3, "pad": 4, "cls": 5, "mask": 6}
	sort.Slice(types, func(i, j int) bool { return order[types[i]] < order[types[j]] })
	for _, t := range types {
		kvs = append(kvs, gg.KV{Key: "tokenizer.ggml." + keyName[t], Value: gg.U32(uint32(ids[t]))})
	}
	for _, k := range []string{"add_bos_token", "add_eos_token", "add_sep_token"} {
		var b bool
		if raw, ok := tc[k]; ok && json.Unmarshal(raw, &b) == nil {
			kvs = append(kvs, gg.KV{Key: "tokenizer.ggml." + k, Value: gg.Bool(b)})
		}
	}
	var tmpl string
	if raw, ok := tc["chat_template"]; ok {
		json.Unmarshal(raw, &tmpl)
	}
	if tmpl == "" {
		if raw, err := st.ReadSmallFile(src, "chat_template.jinja", 64<<20); err == nil {
			tmpl = string(raw)
		}
	}
	if tmpl != "" {
		kvs = append(kvs, gg.KV{Key: "tokenizer.chat_template", Value: gg.Str(tmpl)})
	}
	return kvs, nil
}

// tokenContent reads a special token given as a string or as {"content": ...}.
func tokenContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content
	}
	return ""
}
