package hf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// vLLM and SGLang evaluate a config's patterns ("re:" entries, GPTQ's
// dynamic keys) with Python's re.match; mtpconv with Go's RE2. The two
// read a subset of the syntax alike, and only that subset is evaluated:
// literals, ".", the escapes of ASCII punctuation and \d \D \w \W \s \S,
// classes of literals, ranges and those escapes (no POSIX [[:x:]], no
// nested "["), groups (...) and (?:...), alternation, the quantifiers
// * + ? {m} {m,} {m,n} (counts up to RE2's 1000) and their lazy forms,
// the anchors ^ and $. A pattern Python rejects is invalid (vLLM fails to
// load the config); any other construct mtpconv cannot judge. Module names
// are ASCII without a newline, where \d, \w, \s and $ mean the same in both
// engines; on another name a pattern using them is not judged either.

// pyPattern is one pattern as both engines read it.
type pyPattern struct {
	re *regexp.Regexp // ^(?:pattern): re.match anchors at the start only
	// Invalid is Python's objection (re.error); Unjudged names the construct
	// outside the subset. At most one is set; neither: re is the pattern.
	Invalid, Unjudged string
	// textSensitive: the pattern uses \d \D \w \W \s \S or $, whose meaning
	// differs between the engines on non-ASCII text or a newline.
	textSensitive bool
}

// Pattern verdicts, as the shared case table (testdata/pyre_cases.json) spells them.
const (
	patternMatch    = "match"
	patternNoMatch  = "nomatch"
	patternInvalid  = "invalid"
	patternUnjudged = "unjudged"
)

// patterns caches each pattern compiled once: a config may list tens of
// thousands of entries, each tried against every module of the head.
var patterns sync.Map // string -> *pyPattern

// compilePattern reads a pattern once.
func compilePattern(src string) *pyPattern {
	if p, ok := patterns.Load(src); ok {
		return p.(*pyPattern)
	}
	p := parsePattern(src)
	if p.Invalid == "" && p.Unjudged == "" {
		re, err := regexp.Compile(`^(?:` + src + `)`)
		if err != nil {
			p.Unjudged = "Go's RE2 does not compile it: " + err.Error()
		}
		p.re = re
	}
	patterns.Store(src, p)
	return p
}

// Match is the pattern's verdict on a name: patternMatch, patternNoMatch,
// patternInvalid or patternUnjudged.
func (p *pyPattern) Match(name string) string {
	switch {
	case p.Invalid != "":
		return patternInvalid
	case p.Unjudged != "" || p.textSensitive && !plainText(name):
		return patternUnjudged
	case p.re.MatchString(name):
		return patternMatch
	}
	return patternNoMatch
}

// plainText: ASCII without a newline.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == '\n' {
			return false
		}
	}
	return true
}

// pythonEscapes are the ASCII letters Python's re knows after a backslash
// (outside the subset but valid); any other letter is its "bad escape".
const pythonEscapes = "abfnrtvxuUNAZBdDsSwW"

// parsePattern checks a pattern's syntax against the subset, saying where
// Python rejects it or where it leaves the subset.
func parsePattern(src string) *pyPattern {
	p := &pyPattern{}
	bad := func(format string, a ...any) *pyPattern { p.Invalid = fmt.Sprintf(format, a...); return p }
	out := func(format string, a ...any) *pyPattern { p.Unjudged = fmt.Sprintf(format, a...); return p }
	depth := 0
	repeatable := false // the previous item takes a quantifier
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '\\':
			kind, why, n := escape(src, i)
			switch kind {
			case escInvalid:
				return bad("%s at position %d", why, i)
			case escOutside:
				return out("%s at position %d", why, i)
			case escClass:
				p.textSensitive = true
			}
			i += n - 1
			repeatable = true
		case '.':
			repeatable = true
		case '^', '$':
			p.textSensitive = p.textSensitive || c == '$'
			repeatable = false
			if i+1 < len(src) && strings.IndexByte("*+?{", src[i+1]) >= 0 {
				if _, _, ok := quantifier(src, i+1); ok {
					return bad("nothing to repeat at position %d", i+1)
				}
			}
		case '|':
			repeatable = false
		case '(':
			if strings.HasPrefix(src[i:], "(?") {
				if !strings.HasPrefix(src[i:], "(?:") {
					return out("the group %q at position %d (lookaround, named group or flags)", src[i:min(i+4, len(src))], i)
				}
				i += 2
			}
			depth++
			repeatable = false
		case ')':
			if depth == 0 {
				return bad("unbalanced parenthesis at position %d", i)
			}
			depth--
			repeatable = true
		case '[':
			n, why, invalid := class(src, i, p)
			if why != "" {
				if invalid {
					return bad("%s", why)
				}
				return out("%s", why)
			}
			i += n - 1
			repeatable = true
		case '*', '+', '?', '{':
			n, why, ok := quantifier(src, i)
			if !ok {
				return out("%s", why)
			}
			if why != "" {
				return bad("%s", why)
			}
			if !repeatable {
				if i > 0 && strings.IndexByte("*+?}", src[i-1]) >= 0 {
					return bad("multiple repeat at position %d", i)
				}
				return bad("nothing to repeat at position %d", i)
			}
			i += n - 1
			switch {
			case i+1 < len(src) && src[i+1] == '?':
				i++ // lazy: the same strings match
				if i+1 < len(src) && strings.IndexByte("*+?{", src[i+1]) >= 0 {
					if _, _, ok := quantifier(src, i+1); ok {
						return bad("multiple repeat at position %d", i+1)
					}
				}
			case i+1 < len(src) && src[i+1] == '+':
				return out("the possessive quantifier at position %d (Python 3.11+ only)", i+1)
			}
			repeatable = false
		case '}', ']':
			return out("a lone %q at position %d", c, i)
		default:
			if c < 0x20 || c == 0x7f {
				return out("the control character %q at position %d", c, i)
			}
			repeatable = true
		}
	}
	if depth > 0 {
		return bad("missing ), unterminated subpattern")
	}
	return p
}

// quantifier reads a quantifier at src[i]: its length; ok false when it is
// a "{" the subset does not read ({,n}: Python's {0,n}, RE2's literal; a
// count above RE2's 1000; a "{" that quantifies nothing, a literal to
// both); why when Python rejects it.
func quantifier(src string, i int) (n int, why string, ok bool) {
	if src[i] != '{' {
		return 1, "", true
	}
	end := strings.IndexByte(src[i:], '}')
	if end < 0 {
		return 0, fmt.Sprintf("the %q at position %d that is no quantifier", '{', i), false
	}
	body := src[i+1 : i+end]
	lo, hi, comma := strings.Cut(body, ",")
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	switch {
	case !digits(lo) && comma && digits(hi) && lo == "":
		return 0, fmt.Sprintf("{,%s} at position %d (Python reads {0,%s}, RE2 a literal)", hi, i, hi), false
	case !digits(lo) || comma && hi != "" && !digits(hi):
		return 0, fmt.Sprintf("the %q at position %d that is no quantifier", '{', i), false
	}
	m, _ := strconv.Atoi(lo)
	x := m
	if comma && hi != "" {
		x, _ = strconv.Atoi(hi)
	}
	if len(lo) > 4 || len(hi) > 4 || m > 1000 || x > 1000 {
		return 0, fmt.Sprintf("the count {%s} at position %d (RE2 counts to 1000)", body, i), false
	}
	if x < m {
		return end + 1, fmt.Sprintf("min repeat greater than max repeat at position %d", i+1), true
	}
	return end + 1, "", true
}

// Escape kinds.
const (
	escLiteral = iota // an escaped ASCII punctuation character
	escClass          // \d \D \w \W \s \S
	escOutside        // valid in Python, outside the subset
	escInvalid        // Python's "bad escape"
)

// escape reads the escape at src[i] ('\\'): its kind, why (unless a
// literal or class) and length.
func escape(src string, i int) (kind int, why string, n int) {
	if i+1 >= len(src) {
		return escInvalid, "bad escape (end of pattern)", 1
	}
	c := src[i+1]
	switch {
	case strings.IndexByte("dDwWsS", c) >= 0:
		return escClass, "", 2
	case c >= 0x21 && c <= 0x7e && !isAlnum(c):
		return escLiteral, "", 2
	case isLetter(c) && strings.IndexByte(pythonEscapes, c) < 0:
		return escInvalid, fmt.Sprintf("bad escape \\%c", c), 2
	case isLetter(c):
		return escOutside, fmt.Sprintf("the escape \\%c", c), 2
	case c >= '0' && c <= '9':
		return escOutside, fmt.Sprintf("the backreference or octal escape \\%c", c), 2
	}
	return escOutside, fmt.Sprintf("the escaped character %q", src[i+1:min(i+2, len(src))]), 2
}

// class reads a character class at src[i] ('['): its length, or why not
// and whether Python rejects it.
func class(src string, i int, p *pyPattern) (n int, why string, invalid bool) {
	j := i + 1
	if j < len(src) && src[j] == '^' {
		j++
	}
	if j < len(src) && src[j] == ']' {
		return 0, fmt.Sprintf("the class at position %d that opens with ] (a literal to Python, to RE2 too, but not read here)", i), false
	}
	prevLiteral := false // the previous item is one character (a range's start)
	var prev byte
	for ; j < len(src); j++ {
		c := src[j]
		switch {
		case c == ']':
			return j - i + 1, "", false
		case c == '[':
			return 0, fmt.Sprintf("the %q inside the class at position %d (RE2: a POSIX class such as [[:punct:]]; Python: a literal)", '[', j), false
		case j+1 < len(src) && src[j+1] == c && strings.IndexByte("&~|-", c) >= 0:
			return 0, fmt.Sprintf("%q%q inside the class at position %d (a set operation Python may read in future)", c, c, j), false
		case c == '\\':
			kind, w, m := escape(src, j)
			switch kind {
			case escInvalid:
				return 0, fmt.Sprintf("%s at position %d", w, j), true
			case escOutside:
				return 0, fmt.Sprintf("%s at position %d", w, j), false
			case escClass:
				p.textSensitive = true
				prevLiteral = false
			default:
				prevLiteral, prev = true, src[j+1]
			}
			j += m - 1
		case c == '-' && prevLiteral && j+1 < len(src) && src[j+1] != ']':
			hi, m := src[j+1], 1
			if hi == '\\' {
				kind, w, k := escape(src, j+1)
				if kind == escInvalid {
					return 0, fmt.Sprintf("%s at position %d", w, j+1), true
				}
				if kind != escLiteral {
					return 0, fmt.Sprintf("bad character range at position %d", j-1), kind == escClass
				}
				hi, m = src[j+2], k
			} else if hi == '[' {
				return 0, fmt.Sprintf("the %q inside the class at position %d", '[', j+1), false
			}
			if hi < prev {
				return 0, fmt.Sprintf("bad character range %c-%c at position %d", prev, hi, j-1), true
			}
			j += m
			prevLiteral = false
		case c < 0x20 || c >= 0x7f:
			return 0, fmt.Sprintf("the character %q inside the class at position %d (only ASCII is read here)", c, j), false
		default:
			prevLiteral, prev = true, c
		}
	}
	return 0, fmt.Sprintf("unterminated character set at position %d", i), true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool  { return isLetter(c) || c >= '0' && c <= '9' }
