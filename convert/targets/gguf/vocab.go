package gguf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// tokenizer.json is bounded by the vocabulary it may describe before any of
// it is parsed: the published Qwen files take under 100 bytes per token (a
// vocab entry and a merge); added tokens and templates get the slack.
const (
	tokenizerBytesPerToken = 256
	tokenizerSlack         = 16 << 20
)

// tokenizerFile is tokenizer.json as the reference converter reads it. The
// vocabulary and the added tokens stay raw: they are read in file order and
// checked token by token (readVocab, readAdded).
type tokenizerFile struct {
	Model struct {
		Type         string            `json:"type"`
		Vocab        json.RawMessage   `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		ByteFallback *bool             `json:"byte_fallback"`
	} `json:"model"`
	Decoder struct {
		Type string `json:"type"`
	} `json:"decoder"`
	Added         []json.RawMessage `json:"added_tokens"`
	Normalizer    json.RawMessage   `json:"normalizer"`
	PostProcessor json.RawMessage   `json:"post_processor"`
}

func readTokenizer(src st.Opener, name string, n int64) (*tokenizerFile, error) {
	limit := n*tokenizerBytesPerToken + tokenizerSlack
	raw, err := st.ReadSmallFile(src, "tokenizer.json", limit)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: tokenizer.json is missing (llama.cpp needs the vocabulary in the GGUF)", name)
		}
		return nil, fmt.Errorf("%s: %w (vocab_size %d allows %d bytes per token)", name, err, n, tokenizerBytesPerToken)
	}
	var tf tokenizerFile
	if err := json.Unmarshal(raw, &tf); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return &tf, nil
}

// vocabulary is the tokens of tokenizer.json by id, each id and each string once.
type vocabulary struct {
	n     int64 // vocab_size: every id is below it
	byID  map[int64]string
	ids   map[string]int64
	added map[int64]addedToken
}

func newVocabulary(n int64) *vocabulary {
	return &vocabulary{n: n, byID: map[int64]string{}, ids: map[string]int64{}, added: map[int64]addedToken{}}
}

// add records a token, refusing what would make the token list depend on
// map order or make llama.cpp abort: a negative id, an id at or past
// vocab_size, two tokens sharing an id, one token with two ids. An added
// token may repeat a vocabulary entry exactly (as many tokenizers list them).
func (v *vocabulary) add(tok string, id int64, where string) error {
	switch {
	case id < 0:
		return fmt.Errorf("tokenizer.json: %s token %q has the negative id %d", where, tok, id)
	case id >= v.n:
		return fmt.Errorf("tokenizer.json: token id %d is not below vocab_size %d (%s token %q)", id, v.n, where, tok)
	}
	if prev, ok := v.byID[id]; ok && (prev != tok || where == "model.vocab") {
		return fmt.Errorf("tokenizer.json: tokens %q and %q share the id %d (%s)", prev, tok, id, where)
	}
	if prev, ok := v.ids[tok]; ok && prev != id {
		return fmt.Errorf("tokenizer.json: token %q has two ids, %d and %d (%s)", tok, prev, id, where)
	}
	v.byID[id], v.ids[tok] = tok, id
	return nil
}

// readVocab reads model.vocab entry by entry, in file order, refusing a
// token named twice and a token that is not valid UTF-8 (Go's decoder would
// silently turn it into U+FFFD). raw is valid JSON (the whole file was
// parsed): a plain scan is enough, and several times faster than a
// json.Decoder's tokens.
func (v *vocabulary) readVocab(raw json.RawMessage) error {
	bad := errors.New("tokenizer.json: model.vocab is not an object of token: id")
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return bad
	}
	for i++; ; {
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		if i >= len(raw) || raw[i] == '}' {
			return nil
		}
		if raw[i] != '"' {
			return bad
		}
		end := stringEnd(raw, i)
		lit := raw[i:end]
		tok, ok := decodeString(lit)
		if !ok {
			return fmt.Errorf("tokenizer.json: model.vocab token %s is not valid UTF-8", showLiteral(lit))
		}
		if _, dup := v.ids[tok]; dup {
			return fmt.Errorf("tokenizer.json: model.vocab names the token %q twice", tok)
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return bad
		}
		i = skipSpace(raw, i+1)
		j := i
		for j < len(raw) && bytes.IndexByte([]byte("-+.eE0123456789"), raw[j]) >= 0 {
			j++
		}
		id, err := strconv.ParseInt(string(raw[i:j]), 10, 64)
		if err != nil {
			return fmt.Errorf("tokenizer.json: model.vocab token %q: its id is not an integer", tok)
		}
		if err := v.add(tok, id, "model.vocab"); err != nil {
			return err
		}
		i = j
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index after the JSON string literal that starts at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// decodeString decodes a JSON string literal; ok is false when it does not
// hold valid UTF-8.
func decodeString(lit []byte) (string, bool) {
	if bytes.IndexByte(lit, '\\') < 0 {
		body := lit[1 : len(lit)-1]
		return string(body), utf8.Valid(body)
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return "", false
	}
	return s, validString(lit, s)
}

// readAdded reads added_tokens with the same checks as the vocabulary.
func (v *vocabulary) readAdded(raws []json.RawMessage) ([]addedToken, error) {
	var out []addedToken
	for _, raw := range raws {
		var a addedToken
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("tokenizer.json: added token %s: %w", raw, err)
		}
		if !validString(raw, a.Content) {
			return nil, fmt.Errorf("tokenizer.json: added token %d (%s) is not valid UTF-8", a.ID, showLiteral(raw))
		}
		if err := v.add(a.Content, a.ID, "added_tokens"); err != nil {
			return nil, err
		}
		if prev, dup := v.added[a.ID]; dup && prev.Content == a.Content {
			return nil, fmt.Errorf("tokenizer.json: added_tokens lists %q (id %d) twice", a.Content, a.ID)
		}
		v.added[a.ID] = a
		out = append(out, a)
	}
	return out, nil
}

// showLiteral prints JSON text as it is written, its bytes that are not
// UTF-8 as \xNN.
func showLiteral(lit []byte) string {
	var b strings.Builder
	for len(lit) > 0 {
		r, size := utf8.DecodeRune(lit)
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "\\x%02x", lit[0])
		} else {
			b.Write(lit[:size])
		}
		lit = lit[size:]
	}
	return b.String()
}

// validString reports whether the JSON text lit, decoded as s, held valid
// UTF-8: raw bytes that are not UTF-8 and lone surrogate escapes both decode
// to U+FFFD, so s may hold only the U+FFFD that lit spells out.
func validString(lit []byte, s string) bool {
	if !utf8.Valid(lit) {
		return false
	}
	n := strings.Count(s, "\uFFFD")
	if n == 0 {
		return true
	}
	spelled := bytes.Count(lit, []byte("\uFFFD")) + bytes.Count(bytes.ToLower(lit), []byte(`\ufffd`))
	return n <= spelled
}
