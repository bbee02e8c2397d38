// Package prompts is what bench asks the runtime: the user's --prompts file
// (JSONL with "prompt" or chat "messages", or plain text, one prompt per line
// or per blank-line block) or the built-in classes, padded to about
// --context N tokens with a neutral document, and the hash that names the set.
package prompts

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

// Prompt is one request's input. Exactly one of Text and Messages is set.
type Prompt struct {
	ID       string             `json:"id"`    // "code-1", or "3" for the third of the user's file
	Class    string             `json:"class"` // a built-in class, the file's "class", or "" (the user's)
	Text     string             `json:"prompt,omitempty"`
	Messages []runtimes.Message `json:"messages,omitempty"`
}

// Request is the runtime request asking p.
func (p Prompt) Request(maxTokens, seed int, greedy bool) runtimes.Request {
	return runtimes.Request{Prompt: p.Text, Messages: p.Messages, MaxTokens: maxTokens, Seed: seed, Greedy: greedy}
}

// MaxFileSize bounds a --prompts file.
const MaxFileSize = 64 << 20

// Load reads a --prompts file: JSON lines when every non-blank line is a JSON
// object, else plain text (blocks separated by blank lines when there are any,
// else one prompt per line).
func Load(path string) ([]Prompt, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("--prompts %s: not a regular file of at most %d MiB", path, MaxFileSize>>20)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	var ps []Prompt
	if jsonLines(b) {
		ps, err = parseJSONL(b)
	} else {
		ps = parseText(string(b))
	}
	if err != nil {
		return nil, fmt.Errorf("--prompts %s: %w", path, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("--prompts %s: no prompt in the file", path)
	}
	return ps, nil
}

func jsonLines(b []byte) bool {
	seen := false
	for _, l := range bytes.Split(b, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if l[0] != '{' {
			return false
		}
		seen = true
	}
	return seen
}

func parseJSONL(b []byte) ([]Prompt, error) {
	var ps []Prompt
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxFileSize)
	for line := 1; sc.Scan(); line++ {
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		var rec struct {
			ID       string             `json:"id"`
			Class    string             `json:"class"`
			Prompt   *string            `json:"prompt"`
			Messages []runtimes.Message `json:"messages"`
		}
		dec := json.NewDecoder(bytes.NewReader(l))
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		switch {
		case rec.Prompt != nil && rec.Messages != nil:
			return nil, fmt.Errorf("line %d: both \"prompt\" and \"messages\"; give one", line)
		case rec.Prompt != nil && strings.TrimSpace(*rec.Prompt) != "":
		case len(rec.Messages) > 0:
			for i, m := range rec.Messages {
				if m.Role == "" || m.Content == "" {
					return nil, fmt.Errorf("line %d: messages[%d] needs a \"role\" and a \"content\"", line, i)
				}
			}
		default:
			return nil, fmt.Errorf("line %d: no \"prompt\" text and no \"messages\"", line)
		}
		p := Prompt{ID: rec.ID, Class: rec.Class, Messages: rec.Messages}
		if rec.Prompt != nil {
			p.Text = *rec.Prompt
		}
		if p.ID == "" {
			p.ID = fmt.Sprint(len(ps) + 1)
		}
		ps = append(ps, p)
	}
	return ps, sc.Err()
}

func parseText(s string) []Prompt {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var parts []string
	if blocks := strings.Split(s, "\n\n"); len(blocks) > 1 {
		parts = blocks
	} else {
		parts = strings.Split(s, "\n")
	}
	var ps []Prompt
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, Prompt{ID: fmt.Sprint(len(ps) + 1), Text: p})
		}
	}
	return ps
}

// Classes are the built-in prompt classes, in the order bench reports them.
var Classes = []string{"code", "prose", "extraction", "math", "chat"}

// Builtin is the built-in set: two prompts of each class, the kinds of text
// MTP acceptance was reported to differ on.
func Builtin() []Prompt {
	raw := []struct{ class, text string }{
		{"code", "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring and type hints.\n\ndef fibonacci("},
		{"code", "// A Go function that reverses a slice of strings in place.\nfunc reverse(s []string) {"},
		{"prose", "Write a short story about a lighthouse keeper who finds a message in a bottle. The story begins:"},
		{"prose", "Describe, in a few paragraphs, how the seasons change in a small mountain village."},
		{"extraction", "Extract the name, date and amount from this invoice as JSON with keys name, date, amount.\n\nInvoice: Paid to Maria Lopez on 12 March 2024 the sum of 1,250.00 EUR for consulting services.\n\nJSON:"},
		{"extraction", "List every city mentioned in the text, one per line.\n\nText: The tour started in Lisbon, went on to Madrid and Lyon, and ended in Turin after a detour through Geneva.\n\nCities:"},
		{"math", "Solve step by step: a train travels 180 km in 2 hours and then 120 km in 1.5 hours. What is its average speed for the whole trip?"},
		{"math", "Compute 17 * 23 + 144 / 12 and explain each step."},
		{"chat", ""},
		{"chat", ""},
	}
	chats := [][]runtimes.Message{
		{{Role: "user", Content: "Hi! Can you suggest three names for a small bakery?"}},
		{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "What should I pack for a two-day hike in autumn?"}},
	}
	var ps []Prompt
	n := map[string]int{}
	for _, r := range raw {
		n[r.class]++
		p := Prompt{ID: fmt.Sprintf("%s-%d", r.class, n[r.class]), Class: r.class, Text: r.text}
		if r.class == "chat" {
			p.Text, p.Messages = "", chats[n[r.class]-1]
		}
		ps = append(ps, p)
	}
	return ps
}

// wordsPerToken is how many English words a token of a common tokenizer holds, about.
const wordsPerToken = 0.75

// neutral is the padding document: plain descriptive sentences unrelated to any prompt.
var neutral = strings.Fields(`The river runs through a wide valley where farmers grow wheat, barley and
vegetables. In spring the fields are green and the orchards bloom; in summer the grain turns gold and the
markets fill with fruit. The town at the river's mouth has a harbour, a library, a school and a small museum of
local history. Its streets are lined with stone houses built over several centuries. Visitors walk along the
quay, take boats to the islands, or follow the old road into the hills, where shepherds keep their flocks and
the views reach the sea.`)

// Pad prefixes each prompt with a neutral document of about contextTokens
// tokens (counted as words, at wordsPerToken: bench reports the runtime's own
// prompt token count). A chat prompt's first user message is padded.
func Pad(ps []Prompt, contextTokens int) []Prompt {
	if contextTokens <= 0 {
		return ps
	}
	n := int(float64(contextTokens) * wordsPerToken)
	w := make([]string, n)
	for i := range w {
		w[i] = neutral[i%len(neutral)]
	}
	doc := "Background document:\n" + strings.Join(w, " ") + "\n\nTask:\n"
	out := make([]Prompt, len(ps))
	for i, p := range ps {
		out[i] = p
		if p.Messages == nil {
			out[i].Text = doc + p.Text
			continue
		}
		out[i].Messages = append([]runtimes.Message{}, p.Messages...)
		for j, m := range out[i].Messages {
			if m.Role == "user" {
				out[i].Messages[j].Content = doc + m.Content
				break
			}
		}
	}
	return out
}

// SHA256 names the exact prompts asked (after padding): the hash of their JSON lines.
func SHA256(ps []Prompt) string {
	h := sha256.New()
	for _, p := range ps {
		b, _ := json.Marshal(p)
		h.Write(append(b, '\n'))
	}
	return hex.EncodeToString(h.Sum(nil))
}
