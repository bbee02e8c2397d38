package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fakehub"
	"github.com/mtpconv/mtpconv/internal/fixtures"
)

const hubRepo = "Qwen/Qwen3.6-35B-A3B"

// exportFiles runs an export and returns its model files (manifest and card
// name the source, so they are left out of byte comparisons).
func exportFiles(t *testing.T, src string, extra ...string) (map[string][]byte, exportSummary) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	args := append([]string{"export", "--src", src, "--out", out, "--target", "mlx", "--head-precision", "int4", "--json"}, extra...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("export from %s: exit %d: %s", src, code, stderr)
	}
	var sum exportSummary
	json.Unmarshal([]byte(stdout), &sum)
	files := readDir(t, out)
	delete(files, "mtpconv-manifest.json")
	delete(files, "README.md")
	return files, sum
}

func sameFiles(t *testing.T, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("file sets differ: %d vs %d", len(a), len(b))
	}
	for n := range a {
		if !bytes.Equal(a[n], b[n]) {
			t.Errorf("%s differs", n)
		}
	}
}

// neededBytes is what a head export must read: every mtp.* tensor and every shard header.
func neededBytes(t *testing.T, dir string) int64 {
	ck, err := st.Open(st.DirSource(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var n int64
	for _, name := range ck.Names {
		if strings.HasPrefix(name, "mtp.") || name == "lm_head.weight" {
			n += ck.Tensors[name].Bytes()
		}
	}
	for _, s := range ck.Shards {
		n += s.Header.DataStart
	}
	return n
}

func TestExportFromHubReadsOnlyWhatItNeeds(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	local, _ := exportFiles(t, dir)
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "")
	remote, sum := exportFiles(t, "hf://"+hubRepo)
	sameFiles(t, local, remote)
	need := neededBytes(t, dir)
	const slack = 256 << 10 // config, index, coalescing gaps
	if got := hub.Sent(); got > need+slack || got < need/2 {
		t.Errorf("server sent %d bytes; the head needs %d (+%d slack)", got, need, slack)
	}
	// The client also counts the API listing, which the server's file count leaves out.
	if d := sum.BytesFetched - hub.Sent(); d < 0 || d > 16<<10 || sum.SourceTotal < 3*need {
		t.Errorf("summary fetched %d of %d; server sent %d", sum.BytesFetched, sum.SourceTotal, hub.Sent())
	}
	t.Logf("fetched %d of %d bytes (head needs %d)", hub.Sent(), sum.SourceTotal, need)
}

func TestHubFaultsAreSurvived(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	local, _ := exportFiles(t, dir)
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	t.Setenv("HF_ENDPOINT", hub.URL)
	hub.Inject(fakehub.Fault{File: "model-00003-of-00003.safetensors", Kind: "drop", Times: 2})
	hub.Inject(fakehub.Fault{File: "model-00002-of-00003.safetensors", Kind: "503", Times: 2})
	hub.Inject(fakehub.Fault{File: "config.json", Kind: "429", Times: 1})
	remote, _ := exportFiles(t, "hf://"+hubRepo)
	sameFiles(t, local, remote)
}

func TestHubTokenGoesOnlyToTheEndpoint(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	cdn := fakehub.New(hubRepo, dir)
	defer cdn.Close()
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	// The CDN is another host: 127.0.0.1 versus localhost.
	hub.RedirectTo = strings.Replace(cdn.URL, "127.0.0.1", "localhost", 1)
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "hf_secret_token_123")
	files, _ := exportFiles(t, "hf://"+hubRepo)
	if len(hub.Tokens) == 0 || hub.Tokens[0] != "Bearer hf_secret_token_123" {
		t.Errorf("the endpoint got tokens %v", hub.Tokens)
	}
	if len(cdn.Tokens) != 0 {
		t.Errorf("the CDN got the token: %v", cdn.Tokens)
	}
	for name, b := range files {
		if bytes.Contains(b, []byte("hf_secret")) {
			t.Errorf("%s contains the token", name)
		}
	}
}

func TestHubPermanentErrors(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	cases := []struct {
		name  string
		setup func(h *fakehub.Server)
		src   string
		want  string
	}{
		{"size mismatch", func(h *fakehub.Server) { h.SizeLie = 1 }, "hf://" + hubRepo, "size mismatch"},
		{"shard gone", func(h *fakehub.Server) {
			h.Inject(fakehub.Fault{File: "model-00002-of-00003.safetensors", Kind: "404"})
		}, "hf://" + hubRepo, "not found (404)"},
		{"unknown revision", func(h *fakehub.Server) {}, "hf://" + hubRepo + "@nope", "not found (404)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := fakehub.New(hubRepo, dir)
			defer hub.Close()
			c.setup(hub)
			t.Setenv("HF_ENDPOINT", hub.URL)
			parent := t.TempDir()
			code, _, stderr := runCLI(t, "export", "--src", c.src, "--out", filepath.Join(parent, "o"), "--target", "mlx")
			if code != exitFailure || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("left %v", left)
			}
		})
	}
}

func TestExportFromHFCacheWithoutNetwork(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	local, _ := exportFiles(t, dir)
	cache := t.TempDir()
	repo := filepath.Join(cache, "models--Qwen--Qwen3.6-35B-A3B")
	snap := filepath.Join(repo, "snapshots", fakehub.Commit)
	os.MkdirAll(snap, 0o755)
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(fakehub.Commit), 0o644)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		// The cache keeps blobs elsewhere and symlinks them into the snapshot.
		os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(snap, e.Name()))
	}
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:9") // nothing listens: any network use fails
	cached, _ := exportFiles(t, hubRepo)
	sameFiles(t, local, cached)
	pinned, _ := exportFiles(t, hubRepo+"@"+fakehub.Commit)
	sameFiles(t, local, pinned)
}
