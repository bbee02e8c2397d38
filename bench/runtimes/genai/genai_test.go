package genai

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/bench/runtimes"
)

func write(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRegistered(t *testing.T) {
	t.Parallel()
	r, err := runtimes.Lookup("openvino-genai")
	if err != nil || r.Name() != "openvino-genai" {
		t.Fatal(r, err)
	}
}

func TestCheckClaimsHeadCount(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	withMTP := write(t, filepath.Join(root, "with"), map[string]string{"openvino_language_model.xml": "", mtpIR: "",
		"config.json": `{"text_config": {"mtp_num_hidden_layers": 1}}`})
	bare := write(t, filepath.Join(root, "bare"), map[string]string{"openvino_model.xml": "", "config.json": `{"num_nextn_predict_layers": 2}`})
	head := write(t, filepath.Join(root, "head"), map[string]string{mtpIR: ""})
	hf := write(t, filepath.Join(root, "hf"), map[string]string{"config.json": "{}"})
	r := rt
	cases := []struct {
		name      string
		s         runtimes.Setup
		check     string
		claims    bool
		headCount int
	}{
		{"head inside", runtimes.Setup{Model: withMTP}, "", true, 1},
		{"head apart", runtimes.Setup{Model: bare, Head: head}, "", true, 2},
		{"no head", runtimes.Setup{Model: bare}, "no openvino_mtp_model.xml in it: give the MTP model's folder as --head", true, 2},
		{"head without IR", runtimes.Setup{Model: bare, Head: hf}, "--head " + hf + ": no openvino_mtp_model.xml", true, 2},
		{"not OpenVINO", runtimes.Setup{Model: hf, Head: head}, "no openvino_language_model.xml or openvino_model.xml", false, 0},
		{"missing", runtimes.Setup{Model: filepath.Join(root, "nope")}, "--model " + filepath.Join(root, "nope") + ": no such file or directory", false, 0},
		{"endpoint", runtimes.Setup{Model: withMTP, PlainEndpoint: "http://127.0.0.1:1"}, "do not apply to openvino-genai", true, 1},
		{"concurrency", runtimes.Setup{Model: withMTP, Concurrency: 4}, "--concurrency 4 does not apply", true, 1},
	}
	for _, c := range cases {
		err := r.Check(c.s)
		if c.name == "missing" && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a missing folder is not fs.ErrNotExist (bench's exit 1): %v", err)
		}
		if (err == nil) != (c.check == "") || err != nil && !strings.Contains(err.Error(), c.check) {
			t.Errorf("%s: Check = %v, want %q", c.name, err, c.check)
		}
		if got := r.Claims(c.s); got != c.claims {
			t.Errorf("%s: Claims = %v", c.name, got)
		}
		if got := r.HeadCount(c.s); got != c.headCount {
			t.Errorf("%s: HeadCount = %d, want %d", c.name, got, c.headCount)
		}
	}
}
