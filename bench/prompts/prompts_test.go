package prompts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prompts")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       []string // texts, or "chat:<first content>"
		wantErr    string
	}{
		{"lines", "first\n\nsecond\n", []string{"first", "second"}, ""},
		{"one per line", "a b\nc d\n", []string{"a b", "c d"}, ""},
		{"blocks", "line one\nline two\n\nblock two\n", []string{"line one\nline two", "block two"}, ""},
		{"jsonl", `{"prompt": "p1"}` + "\n" + `{"messages": [{"role": "user", "content": "hi"}], "class": "chat"}` + "\n",
			[]string{"p1", "chat:hi"}, ""},
		{"jsonl both", `{"prompt": "p", "messages": [{"role": "user", "content": "x"}]}`, nil, "line 1: both"},
		{"jsonl none", `{"text": "p"}`, nil, "line 1: no \"prompt\""},
		{"jsonl bad message", `{"messages": [{"role": "user"}]}`, nil, "messages[0] needs"},
		{"jsonl broken", "{\"prompt\": \"a\"}\n{\"prompt\": \n", nil, "line 2:"},
		{"empty", "\n \n", nil, "no prompt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ps, err := Load(write(t, c.body))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				if p.Messages != nil {
					got = append(got, "chat:"+p.Messages[0].Content)
				} else {
					got = append(got, p.Text)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a folder: %v", err)
	}
}

func TestBuiltinCoversEveryClass(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, p := range Builtin() {
		seen[p.Class]++
		if ids[p.ID] {
			t.Errorf("id %s twice", p.ID)
		}
		ids[p.ID] = true
		if (p.Text == "") == (p.Messages == nil) {
			t.Errorf("%s: exactly one of text and messages must be set", p.ID)
		}
	}
	for _, c := range Classes {
		if seen[c] == 0 {
			t.Errorf("no built-in prompt of class %s", c)
		}
	}
	if len(seen) != len(Classes) {
		t.Errorf("classes %v, want %v", seen, Classes)
	}
}

func TestPadAndHash(t *testing.T) {
	t.Parallel()
	ps := Builtin()
	h := SHA256(ps)
	padded := Pad(ps, 400)
	if SHA256(ps) != h {
		t.Error("Pad changed its input")
	}
	if SHA256(padded) == h {
		t.Error("padding did not change the hash")
	}
	for _, p := range padded {
		text := p.Text
		if p.Messages != nil {
			for _, m := range p.Messages {
				if m.Role == "user" {
					text = m.Content
				}
			}
		}
		if n := len(strings.Fields(text)); n < 300 || n > 400 {
			t.Errorf("%s: %d words for about 400 tokens", p.ID, n)
		}
	}
	if got := Pad(ps, 0); SHA256(got) != h {
		t.Error("--context 0 padded")
	}
}
