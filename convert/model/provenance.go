package model

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// hubID is what the Hub accepts as a repo id: ORG/NAME.
var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// IsHubID reports whether s is a Hub repo id (ORG/NAME).
func IsHubID(s string) bool { return hubID.MatchString(s) && !strings.Contains(s, "..") }

// BaseModelGuess names the source model for cards: config.json's
// _name_or_path when it is a Hub id, the repo of a Hugging Face cache
// snapshot path or of a hf:// source; "" when none is known.
func (m *Model) BaseModelGuess() string {
	var c struct {
		NameOrPath string `json:"_name_or_path"`
	}
	if json.Unmarshal(m.Config.Raw, &c) == nil && IsHubID(c.NameOrPath) {
		return c.NameOrPath
	}
	dir := filepath.Clean(m.Checkpoint.Source.Name())
	parts := strings.Split(filepath.ToSlash(dir), "/")
	for i, p := range parts {
		if rest, ok := strings.CutPrefix(p, "models--"); ok && i+2 < len(parts) && parts[i+1] == "snapshots" {
			if id := strings.Replace(rest, "--", "/", 1); IsHubID(id) {
				return id
			}
		}
	}
	if rest, ok := strings.CutPrefix(m.Checkpoint.Source.Name(), "hf://"); ok {
		if id, _, _ := strings.Cut(rest, "@"); IsHubID(id) {
			return id
		}
	}
	return ""
}

// License reads the license from the front matter of the source's README.md,
// as the Hub writes it; "other" when there is none.
func (m *Model) License() string {
	b, err := st.ReadSmallFile(m.Checkpoint.Source, "README.md", 4<<20)
	if err != nil {
		return "other"
	}
	if v := FrontMatter(b, "license"); v != "" {
		return v
	}
	return "other"
}

// FrontMatter is the value of key in a model card's YAML front matter, as
// the Hub writes it ("key: value", or "key:" then a list whose first item
// is taken); "" when absent.
func FrontMatter(card []byte, key string) string {
	lines := strings.Split(string(card), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return ""
	}
	for i, l := range lines[1:] {
		if strings.TrimSpace(l) == "---" {
			break
		}
		v, ok := strings.CutPrefix(l, key+":")
		if !ok {
			continue
		}
		if v = strings.TrimSpace(v); v == "" && i+2 < len(lines) {
			v, _ = strings.CutPrefix(strings.TrimSpace(lines[i+2]), "- ")
		}
		return strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return ""
}
