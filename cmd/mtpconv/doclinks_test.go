package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// Every relative link of README.md and docs/*.md names a file that exists
// and, with an anchor, a heading of it (as GitHub makes anchors of
// headings): a page renamed or a section moved fails here, not in a reader's
// browser (docs/glm5.2.md linked a glm5.3-flash.md that was never written).
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	read := func(p string) (string, error) {
		b, err := os.ReadFile(p)
		return string(b), err
	}
	for _, p := range pages {
		for _, problem := range brokenLinks(p, read) {
			t.Errorf("%s: %s", strings.TrimPrefix(p, "../../"), problem)
		}
	}
	// The check itself: a missing page and a missing heading are both named.
	fake := map[string]string{"d/a.md": "# Title\n\n## A section\n[x](b.md) [y](#a-section) [z](#nope) [w](https://e.org/x.md)\n"}
	got := brokenLinks("d/a.md", func(p string) (string, error) {
		if s, ok := fake[filepath.ToSlash(p)]; ok {
			return s, nil
		}
		return "", os.ErrNotExist
	})
	if len(got) != 2 || !strings.Contains(got[0], "b.md") || !strings.Contains(got[1], "#nope") {
		t.Errorf("the check on a page with two broken links: %q", got)
	}
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]*)\)`)

// brokenLinks lists the relative links of the page whose file or heading is missing.
func brokenLinks(page string, read func(string) (string, error)) []string {
	text, err := read(page)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		body := text
		if file != "" {
			if body, err = read(filepath.Join(filepath.Dir(page), file)); err != nil {
				out = append(out, "links to "+target+": no such file")
				continue
			}
		}
		if anchor != "" && !strings.HasSuffix(file, ".md") && file != "" {
			continue // an anchor into a non-Markdown file is not checked
		}
		if anchor != "" && !headingAnchors(body)[anchor] {
			out = append(out, "links to "+target+": no heading #"+anchor)
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, spaces as hyphens, punctuation but hyphens and underscores dropped.
func headingAnchors(page string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}
