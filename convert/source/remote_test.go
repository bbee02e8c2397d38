package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/fakehub"
)

const (
	testRepo  = "org/name"
	testToken = "hf_test_secret_4711"
	stall     = 200 * time.Millisecond
)

// testFiles are the repo's files: a small one and one larger than progressCredit.
var testFiles = func() map[string][]byte {
	big := make([]byte, 600<<10)
	rand.New(rand.NewSource(1)).Read(big)
	return map[string][]byte{"config.json": []byte(`{"model_type": "qwen3_5_moe", "pad": "` + strings.Repeat("x", 300) + `"}`), "big.bin": big}
}()

// isolate keeps the caller's token, token file, endpoint and offline setting out of a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(k, "")
	}
	t.Setenv("HF_TOKEN_PATH", filepath.Join(t.TempDir(), "no-token"))
}

func repoDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, b := range testFiles {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func newHub(t *testing.T, dir string) *fakehub.Server {
	t.Helper()
	h := fakehub.New(testRepo, dir)
	t.Cleanup(h.Close)
	return h
}

// syncBuffer is a log the fetching goroutines can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines() []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func fastOptions(h *fakehub.Server, log *syncBuffer) RemoteOptions {
	return RemoteOptions{Endpoint: h.URL, Token: testToken, Retries: 3, BaseDelay: time.Millisecond,
		MaxDelay: 10 * time.Millisecond, StallTimeout: stall, Log: log}
}

// readAll reads a file of r through Open and ReadAt and checks it.
func readAndCheck(r *Remote, name string, off, n int64) error {
	f, err := r.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Size() != int64(len(testFiles[name])) {
		return fmt.Errorf("size %d, want %d", f.Size(), len(testFiles[name]))
	}
	p := make([]byte, n)
	if _, err := f.ReadAt(p, off); err != nil {
		return err
	}
	if !bytes.Equal(p, testFiles[name][off:off+n]) {
		return errors.New("wrong bytes")
	}
	return nil
}

func TestTokenGoesOnlyToTheEndpointOrigin(t *testing.T) {
	isolate(t)
	dir := repoDir(t)
	cases := []struct {
		name string
		cdn  string // address of the redirect target; "" for a redirect on the endpoint's own origin
	}{
		{"other port", "127.0.0.1:0"},
		{"other host", "127.0.0.2:0"},
		{"same origin resolve-cache", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(t, dir)
			var cdn *fakehub.Server
			if c.cdn != "" {
				var err error
				if cdn, err = fakehub.NewAt(c.cdn, testRepo, dir); err != nil {
					t.Skipf("cannot listen on %s: %v", c.cdn, err)
				}
				t.Cleanup(cdn.Close)
				h.RedirectTo = cdn.URL
			} else {
				h.ResolveCache = true
			}
			log := &syncBuffer{}
			r, err := OpenRemote(testRepo, "main", fastOptions(h, log))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := readAndCheck(r, "big.bin", 1000, 5000); err != nil {
				t.Fatal(err)
			}
			if err := r.Prefetch(map[string][]Range{"big.bin": {{100 << 10, 200 << 10}}}); err != nil {
				t.Fatal(err)
			}
			if err := readAndCheck(r, "big.bin", 150<<10, 10<<10); err != nil {
				t.Fatal(err)
			}
			reqs := h.Requests()
			cached := 0
			for _, q := range reqs {
				if q.Authorization != "Bearer "+testToken {
					t.Errorf("the endpoint got %s without the token", q.Path)
				}
				if strings.HasPrefix(q.Path, "/api/resolve-cache/") {
					cached++
				}
			}
			if cdn != nil {
				if got := cdn.Requests(); len(got) == 0 || len(cdn.Tokens) != 0 {
					t.Errorf("redirect target: %d requests, %d with the token", len(got), len(cdn.Tokens))
				}
			} else if cached == 0 {
				t.Errorf("no request followed the redirect to resolve-cache: %v", reqs)
			}
		})
	}
}

func TestFindToken(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string // "@file:CONTENT" writes CONTENT to a file and sets its path
		file string            // where the token file goes, relative to the temp dir ("" for none)
		want string
	}{
		{"HF_TOKEN", map[string]string{"HF_TOKEN": " hf_env\n"}, "p/token", "hf_env"},
		{"HF_TOKEN_PATH", map[string]string{"HF_TOKEN_PATH": "p/token"}, "p/token", "hf_file"},
		{"HF_HOME", map[string]string{"HF_HOME": "home"}, "home/token", "hf_file"},
		{"HF_TOKEN_PATH before HF_HOME", map[string]string{"HF_TOKEN_PATH": "p/token", "HF_HOME": "p"}, "p/token", "hf_file"},
		{"XDG_CACHE_HOME", map[string]string{"XDG_CACHE_HOME": "xdg"}, "xdg/huggingface/token", "hf_file"},
		{"home cache", map[string]string{"HOME": "."}, ".cache/huggingface/token", "hf_file"},
		{"no file", map[string]string{"HOME": "."}, "", ""},
		{"empty HF_TOKEN falls back", map[string]string{"HF_TOKEN": " ", "HF_HOME": "h"}, "h/token", "hf_file"},
		{"unreadable path", map[string]string{"HF_TOKEN_PATH": "dir"}, "dir/token", "error"},
		// A control character inside the token: refused at once, naming the token's origin.
		{"control character in HF_TOKEN", map[string]string{"HF_TOKEN": "hf_fi\x01le"}, "", "error:a control character at position 6"},
		{"space in HF_TOKEN", map[string]string{"HF_TOKEN": "hf_fi le"}, "", "error:$HF_TOKEN) has a space"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			for _, k := range []string{"HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "XDG_CACHE_HOME"} {
				t.Setenv(k, "")
			}
			t.Setenv("HOME", filepath.Join(tmp, "nohome"))
			for k, v := range c.env {
				if k != "HF_TOKEN" {
					v = filepath.Join(tmp, v)
				}
				t.Setenv(k, v)
			}
			if c.file != "" {
				p := filepath.Join(tmp, c.file)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("\n  hf_file \r\n"), 0o600)
			}
			got, err := FindToken()
			if want, ok := strings.CutPrefix(c.want, "error"); ok {
				if err == nil || strings.Contains(err.Error(), "hf_fi") || !strings.Contains(err.Error(), strings.TrimPrefix(want, ":")) {
					t.Fatalf("token %q, err %v", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("token %q, err %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestTokenFileIsSentToTheHub(t *testing.T) {
	isolate(t)
	h := newHub(t, repoDir(t))
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte(testToken+"\n"), 0o600)
	t.Setenv("HF_TOKEN_PATH", path)
	opt := fastOptions(h, &syncBuffer{})
	opt.Token = ""
	if _, err := OpenRemote(testRepo, "main", opt); err != nil {
		t.Fatal(err)
	}
	if len(h.Tokens) != 1 || h.Tokens[0] != "Bearer "+testToken {
		t.Fatalf("the hub got %v", h.Tokens)
	}
}

func TestOffline(t *testing.T) {
	cache := t.TempDir()
	snap := filepath.Join(cache, "models--org--name", "snapshots", fakehub.Commit)
	os.MkdirAll(snap, 0o755)
	os.MkdirAll(filepath.Join(cache, "models--org--name", "refs"), 0o755)
	os.WriteFile(filepath.Join(cache, "models--org--name", "refs", "main"), []byte(fakehub.Commit), 0o644)
	cases := []struct {
		value, src, want string
	}{
		{"1", "hf://org/name", "error: HF_HUB_OFFLINE"},
		{"true", "hf://org/name@dev", "error: HF_HUB_OFFLINE"},
		{"ON", "hf://org/name", "error: HF_HUB_OFFLINE"},
		{"1", "org/name", snap},
		{"1", "org/other", "error: HF_HUB_OFFLINE is set, so the Hub is not asked"},
		{"0", "hf://org/name", "hf://org/name@" + fakehub.Commit},
		{"", "hf://org/name", "hf://org/name@" + fakehub.Commit},
	}
	for _, c := range cases {
		t.Run(c.value+" "+c.src, func(t *testing.T) {
			isolate(t)
			t.Setenv("HF_HUB_CACHE", cache)
			h := newHub(t, repoDir(t))
			t.Setenv("HF_ENDPOINT", h.URL)
			t.Setenv("HF_TOKEN", testToken)
			t.Setenv("HF_HUB_OFFLINE", c.value)
			s, err := Resolve(c.src, RemoteOptions{Log: &syncBuffer{}})
			if want, ok := strings.CutPrefix(c.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), testToken) {
					t.Fatalf("err %v, want %q", err, want)
				}
				if n := len(h.Requests()); n != 0 {
					t.Errorf("offline, yet %d requests reached the hub", n)
				}
				return
			}
			if err != nil || s.Name() != c.want {
				t.Fatalf("%v, %v; want %s", s, err, c.want)
			}
		})
	}
}

// TestRemoteErrorPaths runs every fault the fake hub has through the whole
// remote API: each read gives the right bytes or an error, and never panics.
func TestRemoteErrorPaths(t *testing.T) {
	isolate(t)
	dir := repoDir(t)
	every := func(kind string) func(h *fakehub.Server) {
		return func(h *fakehub.Server) {
			for name := range testFiles {
				h.Inject(fakehub.Fault{File: name, Kind: kind})
			}
		}
	}
	noSizes := func(kind string) func(h *fakehub.Server) {
		return func(h *fakehub.Server) { h.NoSizes = true; every(kind)(h) }
	}
	api := func(kind string, times int) func(h *fakehub.Server) {
		return func(h *fakehub.Server) { h.Inject(fakehub.Fault{File: fakehub.API, Kind: kind, Times: times}) }
	}
	cases := []struct {
		name  string
		setup func(h *fakehub.Server)
		want  string // "ok": everything reads; else a substring of the first error
	}{
		{"healthy", func(*fakehub.Server) {}, "ok"},
		{"no sizes", func(h *fakehub.Server) { h.NoSizes = true }, "ok"},
		{"no sizes, 200 instead of 206", noSizes("full"), "ok"},
		{"no sizes, 200 without length", noSizes("full-nolength"), "neither does the server's Content-Length"},
		{"200 instead of 206", every("full"), "ok"},
		{"200 without length", every("full-nolength"), "ok"},
		{"short bodies", every("short"), "giving up"},
		{"short body once", func(h *fakehub.Server) {
			h.Inject(fakehub.Fault{File: "big.bin", Kind: "short", Times: 1})
		}, "ok"},
		{"drops", every("drop"), "giving up"},
		{"wrong Content-Range", every("badrange"), "Content-Range"},
		{"malformed Content-Range", every("badrange-syntax"), "malformed Content-Range"},
		{"negative total", every("negtotal"), "malformed Content-Range"},
		{"huge total", every("hugetotal"), "implausible size"},
		{"no sizes, huge total", noSizes("hugetotal"), "implausible size"},
		{"unknown total", every("startotal"), "ok"},
		{"no sizes, unknown total", noSizes("startotal"), "neither does the server's Content-Range"},
		{"negative Content-Length", every("neglength"), "Content-Length"},
		{"huge Content-Length", every("hugelength"), "implausible size"},
		{"no sizes, huge Content-Length", noSizes("hugelength"), "implausible size"},
		{"files 404", every("404"), "not found (404)"},
		{"files 500", every("500"), "giving up"},
		{"files 429", every("429"), "429 Too Many Requests"},
		{"files hang", every("hang"), "stalled: no answer for 100ms"},
		{"files stall", every("stall"), "stalled: no data for 100ms"},
		{"garbage listing", api("garbage", 0), "not a revision listing"},
		{"listing 404", api("404", 0), "not found (404)"},
		{"listing 500", api("500", 0), "giving up after 2 failed attempts"},
		{"listing 429 once", api("429", 1), "ok"},
		{"listing hangs", api("hang", 0), "stalled: no answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(t, dir)
			c.setup(h)
			log := &syncBuffer{}
			start := time.Now()
			var errs []error
			check := func(what string, err error) {
				if err != nil {
					if strings.Contains(err.Error(), testToken) {
						t.Errorf("%s: the error shows the token: %v", what, err)
					}
					errs = append(errs, fmt.Errorf("%s: %w", what, err))
				}
			}
			opt := fastOptions(h, log)
			opt.Retries, opt.StallTimeout = 1, 100*time.Millisecond
			r, err := OpenRemote(testRepo, "main", opt)
			check("open", err)
			if err == nil {
				defer r.Close()
				b, err := st.ReadSmallFile(r, "config.json", 1<<20)
				if err == nil && !bytes.Equal(b, testFiles["config.json"]) {
					err = errors.New("wrong bytes")
				}
				check("config.json", err)
				check("big.bin read", readAndCheck(r, "big.bin", 300<<10, 100<<10))
				err = r.Prefetch(map[string][]Range{"big.bin": {{10, 20}, {400 << 10, 600 << 10}}})
				if err == nil {
					err = readAndCheck(r, "big.bin", 450<<10, 100<<10)
				}
				check("big.bin prefetch", err)
			}
			if strings.Contains(log.String(), testToken) {
				t.Errorf("the log shows the token")
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s", d)
			}
			switch {
			case c.want == "ok" && len(errs) > 0:
				t.Fatalf("%v", errors.Join(errs...))
			case c.want != "ok" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), c.want)):
				t.Fatalf("errors %v, want %q", errs, c.want)
			}
			if len(errs) > 0 {
				t.Logf("%v", errs[0])
			}
		})
	}
}

func TestSlowLinks(t *testing.T) {
	isolate(t)
	dir := repoDir(t)
	const off, n = 5000, 64 << 10
	cases := []struct {
		name    string
		fault   fakehub.Fault
		retries int
		via     string // "read" or "prefetch"
		want    string // "ok" or a substring of the error
		ranges  []string
		maxTime time.Duration
		line    string // in the first log line
	}{
		// 64 KiB at 2 KiB per 25 ms takes ~800 ms, over three stall timeouts, but never stalls.
		{"trickle", fakehub.Fault{Kind: "trickle", Chunk: 2 << 10, Every: 25 * time.Millisecond}, 3, "read", "ok",
			[]string{"bytes=5000-70535"}, 2 * time.Second, ""},
		{"trickle prefetch", fakehub.Fault{Kind: "trickle", Chunk: 2 << 10, Every: 25 * time.Millisecond}, 3, "prefetch", "ok",
			[]string{"bytes=5000-70535"}, 2 * time.Second, ""},
		{"stall", fakehub.Fault{Kind: "stall", Chunk: 100}, -1, "read", "stalled: no data for 200ms after 100 of 65536 bytes",
			[]string{"bytes=5000-70535"}, stall + 500*time.Millisecond, ""},
		{"stall, retried", fakehub.Fault{Kind: "stall", Chunk: 100}, 1, "read", "giving up after 2 failed attempts in a row",
			[]string{"bytes=5000-70535", "bytes=5100-70535"}, 2*stall + 500*time.Millisecond, ""},
		{"stall once", fakehub.Fault{Kind: "stall", Chunk: 100, Times: 1}, 3, "read", "ok",
			[]string{"bytes=5000-70535", "bytes=5100-70535"}, stall + 500*time.Millisecond, "resuming at byte 5100 of 5000-70535: "},
		{"no answer", fakehub.Fault{Kind: "hang"}, -1, "read", "stalled: no answer for 200ms",
			[]string{"bytes=5000-70535"}, stall + 500*time.Millisecond, ""},
		{"drop", fakehub.Fault{Kind: "drop", Chunk: 1000, Times: 1}, 3, "read", "ok",
			[]string{"bytes=5000-70535", "bytes=6000-70535"}, time.Second, "retry 1 of 3 in 1ms, resuming at byte 6000 of 5000-70535: "},
		{"drop twice", fakehub.Fault{Kind: "drop", Chunk: 1000, Times: 2}, 3, "read", "ok",
			[]string{"bytes=5000-70535", "bytes=6000-70535", "bytes=7000-70535"}, time.Second, ""},
		{"drop prefetch", fakehub.Fault{Kind: "drop", Chunk: 1000, Times: 1}, 3, "prefetch", "ok",
			[]string{"bytes=5000-70535", "bytes=6000-70535"}, time.Second, ""},
		{"drop with Range ignored", fakehub.Fault{Kind: "drop", Chunk: 1000, Times: 1}, 3, "full", "ok",
			[]string{"bytes=5000-70535", "bytes=6000-70535"}, time.Second, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(t, dir)
			log := &syncBuffer{}
			opt := fastOptions(h, log)
			opt.Retries = c.retries
			r, err := OpenRemote(testRepo, "main", opt)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			f, err := r.Open("big.bin")
			if err != nil {
				t.Fatal(err)
			}
			c.fault.File = "big.bin"
			h.Inject(c.fault)
			if c.via == "full" {
				h.Inject(fakehub.Fault{File: "big.bin", Kind: "full"}) // after the drop: 200s
			}
			start := time.Now()
			p := make([]byte, n)
			if c.via == "prefetch" {
				err = r.Prefetch(map[string][]Range{"big.bin": {{off, off + n}}})
			}
			if err == nil {
				_, err = f.ReadAt(p, off)
			}
			took := time.Since(start)
			t.Logf("%s in %s; log:\n%s", errString(err), took, log)
			if took > c.maxTime {
				t.Errorf("took %s, over %s", took, c.maxTime)
			}
			if c.want == "ok" {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(p, testFiles["big.bin"][off:off+n]) {
					t.Fatal("wrong bytes")
				}
			} else if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			var ranges []string
			for _, q := range h.Requests() {
				if strings.HasSuffix(q.Path, "/big.bin") && q.Range != "bytes=0-0" {
					ranges = append(ranges, q.Range)
				}
			}
			if strings.Join(ranges, " ") != strings.Join(c.ranges, " ") {
				t.Errorf("ranges asked %v, want %v", ranges, c.ranges)
			}
			// One log line per retry (and one saying the server ignores Range).
			lines := log.lines()
			retries := len(c.ranges) - 1
			if c.via == "full" {
				retries++
			}
			if len(lines) != retries {
				t.Errorf("%d log lines, want %d", len(lines), retries)
			}
			if c.line != "" && (len(lines) == 0 || !strings.Contains(lines[0], c.line)) {
				t.Errorf("log %q, want a line with %q", lines, c.line)
			}
			if c.name == "trickle" && took < 3*stall {
				t.Errorf("the trickle took only %s: not slower than the stall timeout", took)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// A token that cannot go into a header fails at once, saying the token is
// the cause, before any request (it used to be retried as a network error).
func TestBadTokenFailsBeforeAnyRequest(t *testing.T) {
	isolate(t)
	h := newHub(t, repoDir(t))
	t.Setenv("HF_TOKEN", "hf_abc\x1bdef")
	opt := fastOptions(h, &syncBuffer{})
	opt.Token = ""
	start := time.Now()
	_, err := OpenRemote(testRepo, "main", opt)
	if err == nil || !strings.Contains(err.Error(), "the Hugging Face token (from $HF_TOKEN) has a control character") || strings.Contains(err.Error(), "hf_abc") {
		t.Fatalf("err %v", err)
	}
	if n := len(h.Requests()); n != 0 || time.Since(start) > time.Second {
		t.Errorf("%d requests, %v", n, time.Since(start))
	}
}

// A Hub whose name does not resolve (offline, or a wrong HF_ENDPOINT) fails
// at once, naming the host, instead of retrying with backoff; a DNS timeout
// or a temporary resolver failure is retried, as a dropped connection is.
func TestUnresolvableHostFailsFast(t *testing.T) {
	isolate(t)
	cases := []struct {
		name      string
		dnsErr    net.DNSError
		retried   bool
		errSubstr string
	}{
		{"no such host", net.DNSError{Err: "no such host", Name: "hub.example", IsNotFound: true}, false, "the host hub.example does not resolve"},
		{"resolver timeout", net.DNSError{Err: "i/o timeout", Name: "hub.example", IsTimeout: true}, true, "giving up after 3 failed attempts"},
		{"temporary failure", net.DNSError{Err: "server misbehaving", Name: "hub.example", IsTemporary: true}, true, "giving up after 3 failed attempts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dials := 0
			client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
				dials++
				e := c.dnsErr
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &e}
			}}}
			log := &syncBuffer{}
			opt := RemoteOptions{Endpoint: "https://hub.example", Client: client, Retries: 2, BaseDelay: time.Millisecond,
				MaxDelay: 10 * time.Millisecond, StallTimeout: time.Second, Log: log}
			_, err := OpenRemote(testRepo, "main", opt)
			if err == nil || !strings.Contains(err.Error(), c.errSubstr) {
				t.Fatalf("err %v, want %q", err, c.errSubstr)
			}
			if want := map[bool]int{false: 1, true: 3}[c.retried]; dials != want {
				t.Errorf("%d attempts, want %d (log %q)", dials, want, log.String())
			}
			if got := strings.Contains(log.String(), "retry"); got != c.retried {
				t.Errorf("log %q: retried %v, want %v", log.String(), got, c.retried)
			}
		})
	}
}
