package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fakehub"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testfs"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

const hubRepo = "Qwen/Qwen3.6-35B-A3B"

// exportFiles runs an export and returns its model files (manifest and card
// name the source, so they are left out of byte comparisons).
func exportFiles(t *testing.T, src string, extra ...string) (map[string][]byte, exportSummary) {
	t.Helper()
	return exportWith(t, src, append([]string{"--target", "mlx", "--head-precision", "int4"}, extra...)...)
}

// exportWith exports src with the given target options and returns the
// files but the manifest and card, and the --json summary.
func exportWith(t *testing.T, src string, opts ...string) (map[string][]byte, exportSummary) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "o")
	args := append([]string{"export", "--src", src, "--out", out, "--json"}, opts...)
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

// sameModelFiles compares the files of out, but for the manifest and card
// (which name the source), with local.
func sameModelFiles(t *testing.T, local map[string][]byte, out string) {
	t.Helper()
	remote := readDir(t, out)
	delete(remote, "mtpconv-manifest.json")
	delete(remote, "README.md")
	sameFiles(t, local, remote)
}

// neededBytes is what a head export must read: every mtp.* tensor and every shard header.
func neededBytes(t *testing.T, dir string) int64 {
	ck, err := st.Open(source.Dir(dir))
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

// hubEnv points the Hub client at endpoint, with no token (not even the
// caller's token file) and not offline.
func hubEnv(t *testing.T, endpoint string) {
	t.Setenv("HF_ENDPOINT", endpoint)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", filepath.Join(t.TempDir(), "no-token"))
	t.Setenv("HF_HUB_OFFLINE", "")
}

func TestExportFromHubReadsOnlyWhatItNeeds(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	local, _ := exportFiles(t, dir)
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	hubEnv(t, hub.URL)
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
	hubEnv(t, hub.URL)
	hub.Inject(fakehub.Fault{File: "model-00003-of-00003.safetensors", Kind: "drop", Times: 2})
	hub.Inject(fakehub.Fault{File: "model-00002-of-00003.safetensors", Kind: "503", Times: 2})
	hub.Inject(fakehub.Fault{File: "config.json", Kind: "429", Times: 1})
	out := filepath.Join(t.TempDir(), "o")
	code, _, stderr := runCLI(t, "export", "--src", "hf://"+hubRepo, "--out", out, "--target", "mlx", "--head-precision", "int4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sameModelFiles(t, local, out)
	// Each of the five faults is retried once, and each retry is one line on stderr.
	retries := 0
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "hub: retry ") {
			retries++
		}
	}
	if retries != 5 {
		t.Errorf("%d retry lines, want 5:\n%s", retries, stderr)
	}
	if testing.Verbose() {
		t.Logf("stderr:\n%s", stderr)
	}
}

// TestHubWithoutSizes: a listing without sizes and a server that answers a
// range with the whole file (200) is legal, and used to panic (makeslice).
func TestHubWithoutSizes(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	local, _ := exportFiles(t, dir)
	cases := []struct {
		name  string
		files []string
		kind  string
		want  string // "" for an export equal to the local one
	}{
		{"small files answer 200", []string{"config.json", "model.safetensors.index.json"}, "full", ""},
		{"a shard answers 200 without a length", []string{"model-00002-of-00003.safetensors"}, "full-nolength", "neither does the server's Content-Length"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := fakehub.New(hubRepo, dir)
			defer hub.Close()
			hubEnv(t, hub.URL)
			hub.NoSizes = true
			for _, f := range c.files {
				hub.Inject(fakehub.Fault{File: f, Kind: c.kind})
			}
			out := filepath.Join(t.TempDir(), "o")
			code, _, stderr := runCLI(t, "export", "--src", "hf://"+hubRepo, "--out", out, "--target", "mlx", "--head-precision", "int4")
			if c.want != "" {
				if code != exitFailure || !strings.Contains(stderr, c.want) {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			sameModelFiles(t, local, out)
		})
	}
}

func TestHubOffline(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	hub := fakehub.New(hubRepo, dir)
	defer hub.Close()
	hubEnv(t, hub.URL)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "1")
	code, _, stderr := runCLI(t, "inspect", "hf://"+hubRepo)
	if code != exitFailure || !strings.Contains(stderr, "HF_HUB_OFFLINE") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := len(hub.Requests()); n != 0 {
		t.Errorf("offline, yet the hub got %d requests", n)
	}
}

func TestHubTokenGoesOnlyToTheEndpoint(t *testing.T) {
	dir := fixtures.Ensure(t, fixtures.Qwen36)
	// The CDN the endpoint (127.0.0.1) redirects to: another port, or another host.
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		t.Run(addr, func(t *testing.T) {
			cdn, err := fakehub.NewAt(addr, hubRepo, dir)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			defer cdn.Close()
			hub := fakehub.New(hubRepo, dir)
			defer hub.Close()
			hub.RedirectTo = cdn.URL
			hubEnv(t, hub.URL)
			t.Setenv("HF_TOKEN", "hf_secret_token_123")
			out := filepath.Join(t.TempDir(), "o")
			code, stdout, stderr := runCLI(t, "export", "--src", "hf://"+hubRepo, "--out", out, "--target", "mlx", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if len(hub.Tokens) == 0 || hub.Tokens[0] != "Bearer hf_secret_token_123" {
				t.Errorf("the endpoint got tokens %v", hub.Tokens)
			}
			if len(cdn.Requests()) == 0 || len(cdn.Tokens) != 0 {
				t.Errorf("the CDN got %d requests, %d with the token", len(cdn.Requests()), len(cdn.Tokens))
			}
			if strings.Contains(stdout+stderr, "hf_secret") {
				t.Errorf("the output shows the token")
			}
			for name, b := range readDir(t, out) {
				if bytes.Contains(b, []byte("hf_secret")) {
					t.Errorf("%s contains the token", name)
				}
			}
		})
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
			hubEnv(t, hub.URL)
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
	cacheSnapshot(t, cache, hubRepo, fakehub.Commit, dir)
	t.Setenv("HF_HUB_CACHE", cache)
	hubEnv(t, "http://127.0.0.1:9") // nothing listens: any network use fails
	for _, offline := range []string{"", "1"} {
		t.Setenv("HF_HUB_OFFLINE", offline)
		cached, _ := exportFiles(t, hubRepo)
		sameFiles(t, local, cached)
		pinned, _ := exportFiles(t, hubRepo+"@"+fakehub.Commit)
		sameFiles(t, local, pinned)
	}
}

// cacheSnapshot lays out cache as a Hugging Face cache holding repo at
// commit (refs/main points there), its snapshot symlinking the files of
// dir as the cache links its blobs.
func cacheSnapshot(t *testing.T, cache, repo, commit, dir string) {
	t.Helper()
	root := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	snap := filepath.Join(root, "snapshots", commit)
	for _, d := range []string{snap, filepath.Join(root, "refs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "refs", "main"), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
	testfs.LinkDir(t, dir, snap)
}

// The GLM families from the Hub and from a Hugging Face cache: the gguf
// sidecar (and GLM-4.7-Flash's mlx-vlm drafter) read by range from the
// (fake) Hub and from a cache snapshot equals the local export byte for
// byte; the Hub sends no byte of a trunk layer (only the NextN layer,
// the embedding and lm_head, the shard headers and the small files), and
// the cache export sends nothing.
func TestGLMFromHubAndCache(t *testing.T) {
	cases := []struct {
		fixture, repo string
		targets       [][]string
	}{
		{fixtures.GLM45, "zai-org/GLM-4.5-Air", [][]string{{"--target", "gguf"}, {"--target", "gguf", "--gguf-type", "Q4_K_M"}}},
		{fixtures.GLM47Flash, "zai-org/GLM-4.7-Flash", [][]string{{"--target", "gguf"}, {"--target", "mlx"}}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			dir := fixtures.Ensure(t, c.fixture)
			hub := fakehub.New(c.repo, dir)
			defer hub.Close()
			hubEnv(t, hub.URL)
			cache := t.TempDir()
			cacheSnapshot(t, cache, c.repo, fakehub.Commit, dir)
			t.Setenv("HF_HUB_CACHE", cache)
			trunk := trunkLayers(t, dir)
			for _, target := range c.targets {
				name := strings.Join(target, " ")
				local, _ := exportWith(t, dir, append(target, "--base-model", c.repo)...)
				before, logged := hub.Sent(), len(hub.Requests())
				remote, sum := exportWith(t, "hf://"+c.repo, target...)
				sent := hub.Sent() - before
				sameFiles(t, local, remote)
				if got := fetchedTensors(t, hub.Requests()[logged:], trunk); len(got) != 0 {
					t.Errorf("%s: fetched trunk tensors %v", name, got)
				}
				var trunkBytes int64
				for _, tn := range trunk {
					trunkBytes += tn.Bytes()
				}
				if sent == 0 || sent > sum.SourceTotal-trunkBytes {
					t.Errorf("%s: fetched %d of %d bytes, of which %d are trunk layers", name, sent, sum.SourceTotal, trunkBytes)
				}
				t.Logf("%s: fetched %d of %d bytes (%.0f%%; trunk layers %d)", name, sent, sum.SourceTotal, 100*float64(sent)/float64(sum.SourceTotal), trunkBytes)
				cached, _ := exportWith(t, c.repo, target...)
				sameFiles(t, local, cached)
				if d := hub.Sent() - before - sent; d != 0 {
					t.Errorf("%s: the cache export fetched %d bytes", name, d)
				}
			}
		})
	}
}

// trunkLayers lists the tensors of dir's decoder layers below
// num_hidden_layers (the trunk's, which a head export never reads).
func trunkLayers(t *testing.T, dir string) []*st.Tensor {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Layers int `json:"num_hidden_layers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Layers == 0 {
		t.Fatalf("config.json: num_hidden_layers %d, %v", cfg.Layers, err)
	}
	ck, err := st.Open(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []*st.Tensor
	for _, name := range ck.Names {
		rest, ok := strings.CutPrefix(name, "model.layers.")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(rest[:strings.IndexByte(rest, '.')]); err != nil || i < cfg.Layers {
			out = append(out, ck.Tensors[name])
		}
	}
	return out
}

// fetchedTensors names the tensors among ts of which a byte was asked for
// in reqs (ranged file requests of the fake Hub).
func fetchedTensors(t *testing.T, reqs []fakehub.Request, ts []*st.Tensor) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		spec, ok := strings.CutPrefix(r.Range, "bytes=")
		if !ok {
			continue
		}
		from, to, _ := strings.Cut(spec, "-")
		lo, err1 := strconv.ParseInt(from, 10, 64)
		hi, err2 := strconv.ParseInt(to, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: range %q", r.Path, r.Range)
		}
		for _, tn := range ts {
			start := tn.Shard.Header.DataStart
			if path.Base(r.Path) == tn.Shard.Name && lo < start+tn.End && hi >= start+tn.Begin {
				out = append(out, tn.Name)
			}
		}
	}
	return out
}

// inspect --strict of a quantized repo on the Hub judges declared against
// present from config.json and the safetensors headers alone (issue 38): a
// W8A8 repo declaring a head it does not hold, and Step-3.7-Flash-NVFP4's
// kind (no head, per-layer lists cut), are named after the server sent the
// shards' headers, the config and the index, not one tensor's data.
func TestInspectOfHubRepoReadsHeaders(t *testing.T) {
	const ct = `{"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
		"weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel"}}}, "ignore": ["lm_head"]}`
	for _, c := range []struct {
		name string
		rs   testmodel.HFRepo
		want string
	}{
		{"W8A8, headless", testmodel.HFRepo{Fixture: fixtures.Qwen36, Quant: ct, Storage: testmodel.TrunkInt8}, "holds no MTP head"},
		{"Step-3.7 NVFP4, headless, lists cut", testmodel.HFRepo{Fixture: fixtures.Step37, Quant: `{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}`, CutLayerLists: true},
			"text_config.layer_types: has 4 entries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.rs.Write(t)
			ck, err := st.Open(source.Dir(dir))
			if err != nil {
				t.Fatal(err)
			}
			var headers int64
			for _, s := range ck.Shards {
				headers += s.Header.DataStart
			}
			ck.Close()
			hub := fakehub.New(hubRepo, dir)
			defer hub.Close()
			hubEnv(t, hub.URL)
			code, _, stderr := runCLI(t, "inspect", "hf://"+hubRepo, "--strict")
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, want 1 naming %q: %s", code, c.want, stderr)
			}
			const slack = 32 << 10 // config.json, the index, range coalescing
			if got := hub.Sent(); got > headers+slack {
				t.Errorf("the server sent %d bytes; the headers are %d (+%d slack)", got, headers, slack)
			}
		})
	}
}
