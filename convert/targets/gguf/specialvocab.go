package gguf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// specialVocab is gguf-py's SpecialVocab (the reference converter's own
// copy, vendored with llama.cpp) for these tokenizers: what it reads from
// tokenizer.json (normalizer, post_processor), tokenizer_config.json (the
// special tokens, add_*_token, the chat template), chat_template.jinja or
// chat_template.json and config.json (*_token_id), with its precedence and
// its key order. Not read: an additional_chat_templates folder (a source
// gives files by name and cannot list one).
type specialVocab struct {
	types    []string          // special token types, as SpecialVocab extends them (eot, eom)
	ids      []typedID         // in the order SpecialVocab sets them
	add      []typedBool       // add_{typ}_token, in the order set
	template any               // string or [{name, template}], nil when none
	lower    *bool             // normalizer.lowercase
	strip    *bool             // normalizer.strip_accents
	tc       map[string]any    // tokenizer_config.json, as SpecialVocab rewrites it
	added    []addedToken      // tokenizer.json's added_tokens, in file order
	cfg      map[string]any    // config.json
	n        int64             // vocab_size
	seen     map[string]bool   // types with an id
	addIndex map[string]int    // position of each add entry
	files    map[string][]byte // optional files that exist
}

type typedID struct {
	typ string
	id  int64
}

type typedBool struct {
	typ string
	v   bool
}

// readSpecialVocab runs SpecialVocab over the source's files.
func readSpecialVocab(m *model.Model, tf *tokenizerFile, added []addedToken, n int64) (*specialVocab, error) {
	src := m.Checkpoint.Source
	sv := &specialVocab{types: []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"}, added: added, n: n,
		seen: map[string]bool{}, addIndex: map[string]int{}, files: map[string][]byte{}}
	if raw, err := st.ReadSmallFile(src, "tokenizer_config.json", 64<<20); err == nil {
		if err := json.Unmarshal(raw, &sv.tc); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, f := range []string{"chat_template.jinja", "chat_template.json"} {
		if raw, err := st.ReadSmallFile(src, f, 64<<20); err == nil {
			sv.files[f] = raw
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	d := json.NewDecoder(bytes.NewReader(m.Config.Raw))
	d.UseNumber()
	if err := d.Decode(&sv.cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	var norm, post any
	json.Unmarshal(tf.Normalizer, &norm)
	json.Unmarshal(tf.PostProcessor, &post)
	if m, ok := norm.(map[string]any); ok && len(m) > 0 {
		sv.normalizer(m)
	}
	sv.postProcessor(post)
	if truthy(sv.tc) {
		if err := sv.fromTokenizerConfig(); err != nil {
			return nil, err
		}
	}
	if err := sv.fromConfig(); err != nil {
		return nil, err
	}
	return sv, nil
}

// truthy is Python's truth value of a JSON value.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case float64:
		return v != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// str is v when it is a JSON string.
func str(v any) (string, bool) { s, ok := v.(string); return s, ok }

// equal is Python's == between a JSON string and any JSON value.
func equal(s string, v any) bool { t, ok := v.(string); return ok && t == s }

func get(m any, key string) any {
	if o, ok := m.(map[string]any); ok {
		return o[key]
	}
	return nil
}

func (sv *specialVocab) setAdd(typ string, v bool, keep bool) {
	if i, ok := sv.addIndex[typ]; ok {
		if !keep {
			sv.add[i].v = v
		}
		return
	}
	sv.addIndex[typ] = len(sv.add)
	sv.add = append(sv.add, typedBool{typ, v})
}

func (sv *specialVocab) normalizer(n map[string]any) {
	t := true
	switch get(n, "type") {
	case "Lowercase":
		sv.lower = &t
	case "StripAccents":
		sv.strip = &t
	case "BertNormalizer":
		if b, ok := n["lowercase"].(bool); ok {
			sv.lower = &b
		}
		if b, ok := n["strip_accents"].(bool); ok {
			sv.strip = &b
		}
	case "Sequence":
		if ns, ok := n["normalizers"].([]any); ok {
			for _, x := range ns {
				if m, ok := x.(map[string]any); ok {
					sv.normalizer(m)
				}
			}
		}
	}
}

// specialToken reads the first SpecialToken id of a template piece.
func specialToken(piece any) any { return get(get(piece, "SpecialToken"), "id") }

// postProcessor reads add_bos/add_eos/add_sep from tokenizer.json's
// post_processor as SpecialVocab does: ByteLevel means neither (unless a
// processor before it said otherwise), RobertaProcessing all three,
// TemplateProcessing what its single and pair templates put first and last.
func (sv *specialVocab) postProcessor(post any) {
	tc := sv.tc
	bos, cls, eos, sep := get(tc, "bos_token"), get(tc, "cls_token"), get(tc, "eos_token"), get(tc, "sep_token")
	if !truthy(bos) && truthy(cls) && truthy(tc) {
		tc["bos_token"], bos = cls, cls
	}
	if !truthy(eos) && truthy(sep) && truthy(tc) {
		tc["eos_token"], eos = sep, sep
	}
	if !truthy(post) {
		return
	}
	procs := []any{post}
	if ps, ok := post.(map[string]any)["processors"]; ok {
		procs, _ = ps.([]any)
	}
	for _, p := range procs {
		switch get(p, "type") {
		case "ByteLevel":
			sv.setAdd("bos", false, true)
			sv.setAdd("eos", false, true)
		case "RobertaProcessing":
			sv.setAdd("bos", true, false)
			sv.setAdd("eos", true, false)
			sv.setAdd("sep", true, false)
			if !truthy(cls) && truthy(tc) {
				cls = bos
				if l, ok := get(p, "cls").([]any); ok && len(l) > 0 {
					cls = l[0]
				}
				tc["cls_token"] = cls
			}
			if !truthy(sep) && truthy(tc) {
				sep = eos
				if l, ok := get(p, "sep").([]any); ok && len(l) > 0 {
					sep = l[0]
				}
				tc["sep_token"] = sep
			}
		case "TemplateProcessing":
			single, _ := get(p, "single").([]any)
			pair, _ := get(p, "pair").([]any)
			var first, last any
			if len(single) > 1 {
				if first = specialToken(single[0]); truthy(first) {
					f, _ := str(first)
					if !truthy(tc) {
						bos = first
					} else if !equal(f, bos) && !equal(f, cls) {
						if !truthy(bos) {
							tc["bos_token"], bos = first, first
						}
						if !truthy(cls) {
							tc["cls_token"], cls = first, first
						}
					}
					sv.setAdd("bos", equal(f, bos) || equal(f, cls), false)
				}
				if last = specialToken(single[len(single)-1]); truthy(last) {
					l, _ := str(last)
					if !truthy(tc) {
						eos = last
					} else if !equal(l, eos) {
						switch {
						case !slices.Contains(sv.types, "eot"):
							sv.types = append(sv.types, "eot")
							tc["eot_token"] = eos
						case !slices.Contains(sv.types, "eom"):
							sv.types = append(sv.types, "eom")
							tc["eom_token"] = eos
						}
						tc["eos_token"], eos = last, last
					}
					sv.setAdd("eos", equal(l, eos), false)
				}
			}
			if len(pair) > 0 {
				lo, hi := 0, len(pair)
				if f, ok := str(first); ok && f != "" && equal(f, specialToken(pair[0])) {
					lo = 1
				}
				if l, ok := str(last); ok && l != "" && equal(l, specialToken(pair[len(pair)-1])) {
					hi--
				}
				if lo >= hi {
					continue
				}
				pair = pair[lo:hi]
				a, b := get(get(pair[0], "Sequence"), "id"), get(get(pair[len(pair)-1], "Sequence"), "id")
				if a != "A" || b != "B" || len(pair) <= 2 {
					continue
				}
				mid := pair[1 : len(pair)-1]
				addSep := false
				if e := specialToken(mid[0]); truthy(e) {
					s, _ := str(e)
					if (equal(s, sep) || equal(s, eos)) && !truthy(last) {
						addSep = true
					}
				}
				if len(mid) == 2 {
					if e := specialToken(mid[1]); truthy(e) {
						s, _ := str(e)
						if equal(s, sep) || equal(s, eos) {
							addSep = true
						}
					}
				}
				sv.setAdd("sep", addSep, false)
				if addSep && !truthy(sep) && truthy(tc) {
					tc["sep_token"] = eos
				}
			}
		}
	}
}

// fromTokenizerConfig is the part SpecialVocab reads only from a non-empty
// tokenizer_config.json: the chat template, add_{typ}_token (a
// post_processor's answer wins) and the special tokens, matched by content
// against added_tokens.
func (sv *specialVocab) fromTokenizerConfig() error {
	var alt any
	if raw, ok := sv.files["chat_template.jinja"]; ok {
		alt = string(raw)
	} else if raw, ok := sv.files["chat_template.json"]; ok {
		var ct map[string]any
		if err := json.Unmarshal(raw, &ct); err != nil {
			return fmt.Errorf("chat_template.json: %w", err)
		}
		alt = ct["chat_template"]
	}
	tmpl, present := sv.tc["chat_template"]
	if !present {
		tmpl = alt
	}
	switch tmpl.(type) {
	case string, []any:
		sv.template = tmpl
	}
	for _, typ := range sv.types {
		if b, ok := sv.tc["add_"+typ+"_token"].(bool); ok {
			sv.setAdd(typ, b, true)
		}
		content, ok := str(sv.tc[typ+"_token"])
		if !ok {
			content, ok = str(get(sv.tc[typ+"_token"], "content"))
		}
		if !ok {
			continue
		}
		for _, a := range sv.added {
			if a.Content == content {
				if err := sv.setID(typ, a.ID); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// fromConfig fills the types still without an id from config.json's
// {typ}_token_id (text_config's when the root has none); a value that is not
// an integer (a list of eos ids) is skipped, as SpecialVocab does.
func (sv *specialVocab) fromConfig() error {
	for _, typ := range sv.types {
		v, ok := sv.cfg[typ+"_token_id"]
		if !ok || v == nil {
			v = get(sv.cfg["text_config"], typ+"_token_id")
		}
		num, ok := v.(json.Number)
		if !ok {
			continue
		}
		id, err := num.Int64() // 5.0 is a float to SpecialVocab, and skipped
		if err != nil {
			continue
		}
		if err := sv.setID(typ, id); err != nil {
			return err
		}
	}
	return nil
}

// setID is SpecialVocab's _set_special_token: the first id of a type wins.
// It leaves an id past the vocabulary unbounded; we refuse one, as it would
// name no token of the GGUF.
func (sv *specialVocab) setID(typ string, id int64) error {
	switch {
	case id < 0:
		return fmt.Errorf("the %s token has the negative id %d", typ, id)
	case id >= sv.n:
		return fmt.Errorf("the %s token id %d is not below vocab_size %d", typ, id, sv.n)
	case sv.seen[typ]:
		return nil
	}
	sv.seen[typ] = true
	sv.ids = append(sv.ids, typedID{typ, id})
	return nil
}

// familyTokens sets the special tokens the family's converter sets by token
// text after SpecialVocab has read the files (GLM's _set_vocab_glm), with
// _set_special_token's rule: a type that already has an id keeps it.
func (sv *specialVocab) familyTokens(toks []model.SpecialToken) error {
	for _, t := range toks {
		i := slices.IndexFunc(sv.added, func(a addedToken) bool { return a.Content == t.Content })
		if i < 0 {
			return fmt.Errorf("tokenizer.json: the %s token %q of this family is not among its added tokens", t.Type, t.Content)
		}
		if _, ok := idKeys[t.Type]; !ok {
			return fmt.Errorf("special token type %q has no GGUF key", t.Type)
		}
		if err := sv.setID(t.Type, sv.added[i].ID); err != nil {
			return fmt.Errorf("tokenizer.json: %w", err)
		}
	}
	return nil
}

// idKeys are the special token types the GGUF writer has a key for (it
// skips cls).
var idKeys = map[string]string{"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
	"pad": "padding_token_id", "mask": "mask_token_id", "eot": "eot_token_id", "eom": "eom_token_id"}

// kvs is SpecialVocab.add_to_gguf but for the merges: ids, add_*_token
// (bos, eos and sep have keys), the chat template(s), the normalizer flags.
func (sv *specialVocab) kvs() []gg.KV {
	var kvs []gg.KV
	for _, x := range sv.ids {
		if k, ok := idKeys[x.typ]; ok {
			kvs = append(kvs, gg.Pair("tokenizer.ggml."+k, gg.U32(uint32(x.id))))
		}
	}
	for _, x := range sv.add {
		if x.typ == "bos" || x.typ == "eos" || x.typ == "sep" {
			kvs = append(kvs, gg.Pair("tokenizer.ggml.add_"+x.typ+"_token", gg.Bool(x.v)))
		}
	}
	kvs = append(kvs, chatTemplateKVs(sv.template)...)
	if sv.lower != nil {
		kvs = append(kvs, gg.Pair("tokenizer.ggml.normalizer.lowercase", gg.Bool(*sv.lower)))
	}
	if sv.strip != nil {
		kvs = append(kvs, gg.Pair("tokenizer.ggml.normalizer.strip_accents", gg.Bool(*sv.strip)))
	}
	return kvs
}

// chatTemplateKVs is the GGUF writer's add_chat_template: a string as
// tokenizer.chat_template; a list of {name, template} as one
// tokenizer.chat_template.NAME each (NAME with [^A-Za-z0-9] as _), their
// names in tokenizer.chat_templates (sorted: the writer's order is a Python
// set's), and "default" as tokenizer.chat_template.
func chatTemplateKVs(t any) []gg.KV {
	if s, ok := t.(string); ok {
		return []gg.KV{gg.Pair("tokenizer.chat_template", gg.Str(s))}
	}
	list, _ := t.([]any)
	var kvs []gg.KV
	at := map[string]int{} // a name given twice: the writer overwrites the value in place
	var names []string
	var def *string
	for _, c := range list {
		name, _ := str(get(c, "name"))
		tmpl, ok := str(get(c, "template"))
		name = strings.Map(func(r rune) rune {
			if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return r
			}
			return '_'
		}, name)
		switch {
		case name == "" || !ok:
		case name == "default":
			def = &tmpl
		default:
			kv := gg.Pair("tokenizer.chat_template."+name, gg.Str(tmpl))
			if i, dup := at[name]; dup {
				kvs[i] = kv
				continue
			}
			at[name] = len(kvs)
			kvs = append(kvs, kv)
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		kvs = append(kvs, gg.Pair("tokenizer.chat_templates", gg.Strings(names)))
	}
	if def != nil {
		kvs = append(kvs, gg.Pair("tokenizer.chat_template", gg.Str(*def)))
	}
	return kvs
}
