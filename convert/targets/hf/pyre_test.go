package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtpconv/mtpconv/internal/fixtures"
)

// pyreCase is a row of testdata/pyre_cases.json, the table
// interop/test_pyre.py runs Python's re over: the pattern, the name, our
// verdict, and Python's re.match (true, false or "error").
type pyreCase struct {
	Pattern string `json:"pattern"`
	Name    string `json:"name"`
	MTPConv string `json:"mtpconv"`
	Python  any    `json:"python"`
	Why     string `json:"why"`
}

func pyreCases(t *testing.T) []pyreCase {
	b, err := os.ReadFile(filepath.Join(fixtures.Root(), "testdata", "pyre_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []pyreCase
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// Every pattern gets the table's verdict; a judged one agrees with
// Python's re.match (which the interop test checks the table's "python"
// against), an invalid one is one Python rejects.
func TestPythonPatterns(t *testing.T) {
	t.Parallel()
	cs := pyreCases(t)
	if len(cs) < 40 {
		t.Fatalf("%d cases", len(cs))
	}
	for _, c := range cs {
		got := compilePattern(c.Pattern).Match(c.Name)
		if got != c.MTPConv {
			t.Errorf("%q on %q (%s): %s, want %s", c.Pattern, c.Name, c.Why, got, c.MTPConv)
		}
		switch got {
		case patternMatch, patternNoMatch:
			if c.Python != (got == patternMatch) {
				t.Errorf("%q on %q: judged %s, Python's re.match says %v", c.Pattern, c.Name, got, c.Python)
			}
		case patternInvalid:
			if c.Python != "error" {
				t.Errorf("%q: called invalid, Python's re compiles it", c.Pattern)
			}
		}
	}
}

// A pattern is compiled once, however often it is matched.
func TestPatternCompiledOnce(t *testing.T) {
	t.Parallel()
	p := compilePattern(`^mtp\.compiled-once\..*`)
	if compilePattern(`^mtp\.compiled-once\..*`) != p {
		t.Error("compiled again")
	}
}
