package gguf_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
)

// tokenizerSource is a fixture with the tiny test tokenizer whose files are
// edited: vocab is spliced in as model.vocab's raw JSON ("" keeps it),
// added is appended to added_tokens as raw JSON, edit changes the rest of tokenizer.json, files adds or replaces files.
func tokenizerSource(t *testing.T, vocab, added string, edit func(map[string]any), files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fixtures.Qwen36)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, fixtures.Ensure(t, fixtures.Qwen36), dir)
	tiny := filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny")
	raw, err := os.ReadFile(filepath.Join(tiny, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]any
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	model := tj["model"].(map[string]any)
	if vocab != "" {
		model["vocab"] = "@VOCAB@"
	}
	var addedRaw []json.RawMessage
	if added != "" {
		for _, a := range tj["added_tokens"].([]any) {
			b, _ := json.Marshal(a)
			addedRaw = append(addedRaw, b)
		}
		tj["added_tokens"] = "@ADDED@"
	}
	if edit != nil {
		edit(tj)
	}
	out, _ := json.Marshal(tj)
	text := strings.Replace(string(out), `"@VOCAB@"`, vocab, 1)
	if added != "" {
		var b strings.Builder
		b.WriteString("[")
		for _, a := range addedRaw {
			b.Write(a)
			b.WriteString(",")
		}
		b.WriteString(added + "]")
		text = strings.Replace(text, `"@ADDED@"`, b.String(), 1)
	}
	all := map[string]string{"tokenizer.json": text}
	if _, ok := files["tokenizer_config.json"]; !ok {
		tc, err := os.ReadFile(filepath.Join(tiny, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		all["tokenizer_config.json"] = string(tc)
	}
	for k, v := range files {
		all[k] = v
	}
	for name, body := range all {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyVocab is the test tokenizer's model.vocab as raw JSON entries, plus extra.
func tinyVocab(t *testing.T, extra ...string) string {
	raw, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "tokenizer-tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(tj.Model.Vocab))
	v = strings.TrimSuffix(v, "}")
	for _, e := range extra {
		v += "," + e
	}
	return v + "}"
}

func planGGUF(t *testing.T, dir string) (*plan.Plan, error) {
	t.Helper()
	m, err := model.Load(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	tg, _ := targets.LookupTarget("gguf")
	return tg.Plan(m, targets.Options{})
}

// A vocabulary that is not one string per id, each once, in valid UTF-8, is
// refused with the token named: before, two tokens sharing an id made the
// file depend on Go's map order, a negative id was dropped, invalid UTF-8
// became U+FFFD, and llama.cpp aborted on a duplicate string.
func TestVocabularyRefusals(t *testing.T) {
	cases := []struct {
		name  string
		vocab string
		added string // an added token appended to added_tokens
		want  []string
	}{
		{"shared id", tinyVocab(t, `"zz":5`), "", []string{`"zz"`, "share the id 5"}},
		{"token twice", tinyVocab(t, `"!":400`), "", []string{`"!"`, "twice"}},
		{"same token and id twice", tinyVocab(t, `"!":0`), "", []string{`"!"`, "twice"}},
		{"negative id", tinyVocab(t, `"zz":-1`), "", []string{`"zz"`, "negative id -1"}},
		{"fractional id", tinyVocab(t, `"zz":1.5`), "", []string{`"zz"`, "not an integer"}},
		{"id past vocab_size", tinyVocab(t, `"zz":512`), "", []string{"512", "vocab_size 512", `"zz"`}},
		{"invalid UTF-8", tinyVocab(t, "\"z\xffz\":400"), "", []string{`token "z\xffz" is`, "not valid UTF-8"}},
		{"lone surrogate", tinyVocab(t, `"z\ud800z":400`), "", []string{`token "z\ud800z" is`, "not valid UTF-8"}},
		{"added token with a vocabulary string", "", `{"id":330,"content":"!","special":false}`, []string{`"!"`, "two ids, 0 and 330"}},
		{"added token on a vocabulary id", "", `{"id":5,"content":"<|x|>","special":true}`, []string{`"<|x|>"`, "share the id 5"}},
		{"added token invalid", "", `{"id":330,"content":"<\udfff>","special":true}`, []string{`added token 330 ({"id":330,"content":"<\udfff>","special":true})`, "not valid UTF-8"}},
		{"padding collides", tinyVocab(t, `"[PAD400]":401`), "", []string{"[PAD400]", "ids 400 and 401"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := planGGUF(t, tokenizerSource(t, c.vocab, c.added, nil, nil))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: lacks %q", err, w)
				}
			}
		})
	}
}

// A tokenizer.json far larger than vocab_size can describe is refused by its
// size, before it is read (a 10M-token file took 18 s and 1.3 GiB before
// being refused for its ids).
func TestOversizedTokenizerRefusedBySize(t *testing.T) {
	dir := tokenizerSource(t, "", "", nil, nil)
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.Truncate(p, 512*256+16<<20+1); err != nil { // sparse: no disk
		t.Fatal(err)
	}
	_, err := planGGUF(t, dir)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json is 16908289 bytes, over the 16908288-byte limit") || !strings.Contains(err.Error(), "vocab_size 512") {
		t.Fatalf("got %v", err)
	}
}

// kvsOf plans the sidecar and returns its metadata keys from tokenizer.ggml.bos_token_id on.
func specialKVs(t *testing.T, dir string) []gg.KV {
	t.Helper()
	p, err := planGGUF(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []gg.KV
	for _, kv := range p.GGUF {
		if strings.HasPrefix(kv.Key, "tokenizer.") && !strings.HasPrefix(kv.Key, "tokenizer.ggml.t") &&
			kv.Key != "tokenizer.ggml.model" && kv.Key != "tokenizer.ggml.pre" && kv.Key != "tokenizer.ggml.merges" {
			out = append(out, kv)
		}
	}
	return out
}

func kvString(kvs []gg.KV) string {
	var b strings.Builder
	for _, kv := range kvs {
		v := kv.Value.V
		if s, ok := v.(string); ok && len(s) > 12 {
			v = s[:12] + "…"
		}
		b.WriteString(kv.Key + "=" + strings.TrimSpace(strings.ReplaceAll(jsonString(v), "\n", " ")) + " ")
	}
	return strings.TrimSpace(b.String())
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

// The special-token keys follow gguf-py's SpecialVocab (llama.cpp's copy,
// which convert_hf_to_gguf.py runs): add_bos/add_eos from tokenizer.json's
// post_processor as well as tokenizer_config.json (the post-processor wins),
// ids in the order SpecialVocab finds them (tokenizer_config.json, then
// config.json), no key for cls, the template from chat_template.jinja only
// with a tokenizer_config.json, the normalizer's flags.
func TestSpecialVocabLikeGGUFPy(t *testing.T) {
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tmpl := func(single ...any) map[string]any {
		return map[string]any{"type": "TemplateProcessing", "single": single}
	}
	special := func(id string) any { return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": 0}} }
	seq := map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}
	post := func(p any) func(map[string]any) { return func(tj map[string]any) { tj["post_processor"] = p } }
	cases := []struct {
		name  string
		edit  func(map[string]any)
		files map[string]string
		want  string
	}{
		{"the test tokenizer (ByteLevel, add_bos_token false)", nil, nil,
			`tokenizer.ggml.eos_token_id=322 tokenizer.ggml.padding_token_id=320 tokenizer.ggml.add_bos_token=false tokenizer.ggml.add_eos_token=false tokenizer.chat_template="{% for m in …"`},
		{"ByteLevel under a Sequence, tokenizer_config says add_bos_token true", post(map[string]any{"type": "Sequence", "processors": []any{byteLevel}}),
			map[string]string{"tokenizer_config.json": `{"add_bos_token":true,"eos_token":"<|im_end|>"}`},
			`tokenizer.ggml.eos_token_id=322 tokenizer.ggml.add_bos_token=false tokenizer.ggml.add_eos_token=false`},
		{"no post_processor", post(nil), map[string]string{"tokenizer_config.json": `{"add_eos_token":true,"bos_token":{"content":"<|im_start|>"}}`},
			`tokenizer.ggml.bos_token_id=321 tokenizer.ggml.add_eos_token=true`},
		{"TemplateProcessing bos A eos", post(tmpl(special("<|im_start|>"), seq, special("<|im_end|>"))),
			map[string]string{"tokenizer_config.json": `{"bos_token":"<|im_start|>","eos_token":"<|im_end|>","add_bos_token":false}`},
			`tokenizer.ggml.bos_token_id=321 tokenizer.ggml.eos_token_id=322 tokenizer.ggml.add_bos_token=true tokenizer.ggml.add_eos_token=true`},
		{"TemplateProcessing with another trailing token: eos moves, the old one becomes eot", post(tmpl(seq, special("<|endoftext|>"))),
			map[string]string{"tokenizer_config.json": `{"eos_token":"<|im_end|>"}`},
			`tokenizer.ggml.eos_token_id=320 tokenizer.ggml.eot_token_id=322 tokenizer.ggml.add_eos_token=true`},
		{"config.json ids after tokenizer_config's", post(nil), map[string]string{"tokenizer_config.json": `{"eos_token":"<|im_end|>"}`},
			`tokenizer.ggml.eos_token_id=322 tokenizer.ggml.bos_token_id=321`},
		{"cls stands in for bos and has no key", post(nil), map[string]string{"tokenizer_config.json": `{"eos_token":"<|im_end|>","cls_token":"<|im_start|>"}`},
			`tokenizer.ggml.bos_token_id=321 tokenizer.ggml.eos_token_id=322`},
		{"chat_template.jinja needs a tokenizer_config.json", nil, map[string]string{"tokenizer_config.json": `{}`, "chat_template.jinja": "x"},
			`tokenizer.ggml.add_bos_token=false tokenizer.ggml.add_eos_token=false`},
		{"chat_template.jinja when tokenizer_config has none", nil, map[string]string{"tokenizer_config.json": `{"eos_token":"<|im_end|>"}`, "chat_template.jinja": "jinja"},
			`tokenizer.ggml.eos_token_id=322 tokenizer.ggml.add_bos_token=false tokenizer.ggml.add_eos_token=false tokenizer.chat_template="jinja"`},
		{"normalizer flags", func(tj map[string]any) {
			tj["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}, map[string]string{"tokenizer_config.json": `{"eos_token":"<|im_end|>"}`},
			`tokenizer.ggml.eos_token_id=322 tokenizer.ggml.add_bos_token=false tokenizer.ggml.add_eos_token=false tokenizer.ggml.normalizer.lowercase=true`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := tokenizerSource(t, "", "", c.edit, c.files)
			if strings.HasPrefix(c.name, "config.json ids") {
				// config.json's bos_token_id fills the bos tokenizer_config.json leaves out.
				raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
				var cfg map[string]any
				json.Unmarshal(raw, &cfg)
				cfg["bos_token_id"] = 321
				b, _ := json.Marshal(cfg)
				os.Remove(filepath.Join(dir, "config.json"))
				if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := kvString(specialKVs(t, dir)); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}
