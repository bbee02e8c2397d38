package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCoalesce(t *testing.T) {
	got := Coalesce([]Range{{100, 200}, {0, 10}, {15, 20}, {200, 300}, {500, 500}, {1000, 1100}}, 8)
	want := []Range{{0, 20}, {100, 300}, {1000, 1100}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	commit := strings.Repeat("ab", 20)
	repo := filepath.Join(cache, "models--org--name")
	os.MkdirAll(filepath.Join(repo, "snapshots", commit), 0o755)
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit+"\n"), 0o644)
	cases := []struct {
		src, want string
	}{
		{"org/name", filepath.Join(repo, "snapshots", commit)},
		{"org/name@" + commit, filepath.Join(repo, "snapshots", commit)},
		{"org/name@dev", "error: no refs/dev"},
		{"org/other", "error: not in the Hugging Face cache"},
		{"hf://not a repo", "error: is not a Hub repo id"},
		{"a/b/c", "error: a/b/c: no such file or folder"},
		{"org/x.gguf", "error: org/x.gguf: no such file or folder"}, // not sent to the cache or the Hub
		{"org/name@dev", "error: org/name@dev: no such file or folder, and not in the Hugging Face cache"},
		{"org/name@../../x", "error: not a branch"},
	}
	for _, c := range cases {
		s, err := Resolve(c.src, RemoteOptions{})
		switch {
		case strings.HasPrefix(c.want, "error: "):
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(c.want, "error: ")) {
				t.Errorf("%s: err %v, want %q", c.src, err, c.want)
			}
		case err != nil:
			t.Errorf("%s: %v", c.src, err)
		case s.Name() != c.want:
			t.Errorf("%s: resolved to %s", c.src, s.Name())
		}
	}
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_HOME", "/x/hf")
	if CacheDir() != "/x/hf/hub" {
		t.Errorf("HF_HOME cache dir %s", CacheDir())
	}
}
