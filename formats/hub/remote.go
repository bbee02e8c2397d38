package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// RemoteOptions configure reading from the Hub.
type RemoteOptions struct {
	Endpoint  string        // default $HF_ENDPOINT, else https://huggingface.co
	Token     string        // default $HF_TOKEN; sent only to Endpoint's host, never printed or stored
	Client    *http.Client  // default: 60 s per request
	Parallel  int           // concurrent range requests; default 4
	Retries   int           // attempts per request after the first; default 6
	BaseDelay time.Duration // first backoff; default 250 ms, doubling, capped at 8 s
	MaxGap    int64         // neighbouring ranges closer than this are fetched as one; default 64 KiB
	SpoolDir  string        // where prefetched ranges are kept during the run; default the system temp dir
	Context   context.Context
}

func (o *RemoteOptions) defaults() {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Token == "" {
		o.Token = os.Getenv("HF_TOKEN")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 60 * time.Second}
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Retries <= 0 {
		o.Retries = 6
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 250 * time.Millisecond
	}
	if o.MaxGap <= 0 {
		o.MaxGap = 64 << 10
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
}

// Remote is a Hub repo pinned to one commit, read by HTTP range requests.
type Remote struct {
	repo, commit string
	opt          RemoteOptions
	sizes        map[string]int64
	fetched      atomic.Int64
	spool        string
	mu           sync.Mutex
	spools       map[string]*spoolFile
}

// OpenRemote resolves rev to a commit and lists the repo's files and sizes,
// so that every byte read later comes from that commit.
func OpenRemote(repo, rev string, opt RemoteOptions) (*Remote, error) {
	opt.defaults()
	r := &Remote{repo: repo, opt: opt, spools: map[string]*spoolFile{}}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", opt.Endpoint, repo, url.PathEscape(rev))
	body, err := r.get(u, -1, 0)
	if err != nil {
		return nil, fmt.Errorf("hf://%s@%s: %w", repo, rev, err)
	}
	var info struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			Name string `json:"rfilename"`
			Size *int64 `json:"size"`
			LFS  *struct {
				Size int64 `json:"size"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	if err := json.Unmarshal(body, &info); err != nil || !commitHash.MatchString(info.SHA) {
		return nil, fmt.Errorf("hf://%s@%s: the Hub's answer names no commit", repo, rev)
	}
	r.commit = info.SHA
	r.sizes = map[string]int64{}
	for _, s := range info.Siblings {
		switch {
		case s.LFS != nil:
			r.sizes[s.Name] = s.LFS.Size
		case s.Size != nil:
			r.sizes[s.Name] = *s.Size
		default:
			r.sizes[s.Name] = -1 // size unknown: taken from the first range answer
		}
	}
	return r, nil
}

// Name is hf://ORG/NAME@COMMIT.
func (r *Remote) Name() string { return "hf://" + r.repo + "@" + r.commit }

// Commit is the pinned commit.
func (r *Remote) Commit() string { return r.commit }

// BytesFetched counts the bytes received from the server.
func (r *Remote) BytesFetched() int64 { return r.fetched.Load() }

// TotalBytes is the size of every file of the repo.
func (r *Remote) TotalBytes() int64 {
	var n int64
	for _, s := range r.sizes {
		if s > 0 {
			n += s
		}
	}
	return n
}

// Close removes the spooled ranges. A nil Remote (a local source) has nothing to close.
func (r *Remote) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spools {
		s.f.Close()
	}
	r.spools = map[string]*spoolFile{}
	if r.spool != "" {
		return os.RemoveAll(r.spool)
	}
	return nil
}

func (r *Remote) fileURL(name string) string {
	return fmt.Sprintf("%s/%s/resolve/%s/%s", r.opt.Endpoint, r.repo, r.commit, name)
}

// Open opens a file of the repo for range reads.
func (r *Remote) Open(name string) (st.File, error) {
	if err := st.CheckLocalName(name); err != nil {
		return nil, err
	}
	size, ok := r.sizes[name]
	if !ok {
		return nil, fmt.Errorf("%s: %s: %w", r.Name(), name, fs.ErrNotExist)
	}
	if size < 0 {
		if _, err := r.get(r.fileURL(name), 0, 1); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		size = r.sizes[name]
	}
	return &remoteFile{r: r, name: name, size: size}, nil
}

type remoteFile struct {
	r      *Remote
	name   string
	size   int64
	mu     sync.Mutex
	prefix []byte // bytes [0, len(prefix)) already fetched: the header region
}

func (f *remoteFile) Size() int64  { return f.size }
func (f *remoteFile) Close() error { return nil }

// maxPrefix bounds the header bytes kept per file.
const maxPrefix = st.MaxHeaderSize + 8

func (f *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > f.size {
		return 0, fmt.Errorf("%s: read [%d, %d) past the %d-byte file: %w", f.name, off, off+int64(len(p)), f.size, io.ErrUnexpectedEOF)
	}
	f.mu.Lock()
	if off+int64(len(p)) <= int64(len(f.prefix)) {
		copy(p, f.prefix[off:])
		f.mu.Unlock()
		return len(p), nil
	}
	f.mu.Unlock()
	if f.r.readSpool(f.name, p, off) {
		return len(p), nil
	}
	b, err := f.r.get(f.r.fileURL(f.name), off, int64(len(p)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.name, err)
	}
	copy(p, b)
	f.mu.Lock()
	if off == int64(len(f.prefix)) && off+int64(len(p)) <= maxPrefix {
		f.prefix = append(f.prefix, b...)
	}
	f.mu.Unlock()
	return len(p), nil
}

// errPermanent marks answers that retrying cannot fix.
type errPermanent struct{ error }

// get fetches url, or the n bytes at off when n > 0, retrying transient
// failures (connection errors, short bodies, 429, 5xx) with capped backoff.
func (r *Remote) get(u string, off, n int64) ([]byte, error) {
	var last error
	delay := r.opt.BaseDelay
	for attempt := 0; attempt <= r.opt.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(delay):
			case <-r.opt.Context.Done():
				return nil, r.opt.Context.Err()
			}
			delay = min(2*delay, 8*time.Second)
		}
		b, wait, err := r.getOnce(u, off, n)
		if err == nil {
			return b, nil
		}
		var perm errPermanent
		if errors.As(err, &perm) {
			return nil, perm.error
		}
		if r.opt.Context.Err() != nil {
			return nil, r.opt.Context.Err()
		}
		last = err
		if wait > 0 {
			delay = min(wait, 30*time.Second)
		}
	}
	return nil, fmt.Errorf("giving up after %d attempts: %w", r.opt.Retries+1, last)
}

func (r *Remote) getOnce(u string, off, n int64) ([]byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(r.opt.Context, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, errPermanent{err}
	}
	if n > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	if r.opt.Token != "" && sameHost(u, r.opt.Endpoint) {
		req.Header.Set("Authorization", "Bearer "+r.opt.Token)
	}
	resp, err := r.opt.Client.Do(req)
	if err != nil {
		return nil, 0, err // connection refused, reset, timeout: transient
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, 0, errPermanent{fmt.Errorf("%s: not found (404)", redact(u))}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, 0, errPermanent{fmt.Errorf("%s: access denied (%d); gated repos need HF_TOKEN", redact(u), resp.StatusCode)}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		}
		return nil, wait, fmt.Errorf("%s: %s", redact(u), resp.Status)
	case n > 0 && resp.StatusCode == http.StatusPartialContent:
		if err := r.checkRange(u, resp.Header.Get("Content-Range"), off, n); err != nil {
			return nil, 0, errPermanent{err}
		}
	case resp.StatusCode == http.StatusOK:
		if n > 0 {
			if resp.ContentLength >= 0 && r.knownSize(u) >= 0 && resp.ContentLength != r.knownSize(u) {
				return nil, 0, errPermanent{fmt.Errorf("%s: the server's size %d differs from the listed %d", redact(u), resp.ContentLength, r.knownSize(u))}
			}
			// A server that ignores Range: read up to the wanted bytes only.
			if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
				return nil, 0, err
			}
		}
	default:
		return nil, 0, errPermanent{fmt.Errorf("%s: unexpected answer %s", redact(u), resp.Status)}
	}
	var body []byte
	if n > 0 {
		body = make([]byte, n)
		k, err := io.ReadFull(resp.Body, body)
		r.fetched.Add(int64(k))
		if err != nil {
			return nil, 0, fmt.Errorf("%s: connection dropped after %d of %d bytes: %w", redact(u), k, n, err)
		}
		return body, 0, nil
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	r.fetched.Add(int64(len(body)))
	if err != nil {
		return nil, 0, err
	}
	return body, 0, nil
}

// checkRange checks a Content-Range answer against the request and the listed size.
func (r *Remote) checkRange(u, cr string, off, n int64) error {
	var a, b, total int64
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &a, &b, &total); err != nil {
		return fmt.Errorf("%s: malformed Content-Range %q", redact(u), cr)
	}
	if a != off || b != off+n-1 {
		return fmt.Errorf("%s: asked for bytes %d-%d, got %d-%d", redact(u), off, off+n-1, a, b)
	}
	name := r.nameOf(u)
	r.mu.Lock()
	defer r.mu.Unlock()
	if want, ok := r.sizes[name]; ok {
		if want < 0 {
			r.sizes[name] = total
		} else if want != total {
			return fmt.Errorf("%s: the server says the file has %d bytes, the Hub listing says %d (size mismatch)", name, total, want)
		}
	}
	return nil
}

func (r *Remote) nameOf(u string) string {
	return strings.TrimPrefix(u, fmt.Sprintf("%s/%s/resolve/%s/", r.opt.Endpoint, r.repo, r.commit))
}

func (r *Remote) knownSize(u string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sizes[r.nameOf(u)]; ok {
		return s
	}
	return -1
}

func sameHost(u, endpoint string) bool {
	a, err1 := url.Parse(u)
	b, err2 := url.Parse(endpoint)
	return err1 == nil && err2 == nil && a.Scheme == b.Scheme && a.Host == b.Host
}

// redact drops the query (never holds a token here, but keeps messages short).
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// Range is a byte range [Begin, End) of a file.
type Range struct{ Begin, End int64 }

// Coalesce sorts ranges and merges those closer than gap.
func Coalesce(rs []Range, gap int64) []Range {
	rs = append([]Range(nil), rs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Begin < rs[j].Begin })
	var out []Range
	for _, x := range rs {
		if x.End <= x.Begin {
			continue
		}
		if n := len(out); n > 0 && x.Begin <= out[n-1].End+gap {
			out[n-1].End = max(out[n-1].End, x.End)
			continue
		}
		out = append(out, x)
	}
	return out
}

// spoolFile holds prefetched ranges of one remote file on local disk.
type spoolFile struct {
	f       *os.File
	covered []Range // sorted, disjoint
}

// Prefetch fetches the given ranges of each file (coalesced, in pieces of at
// most 64 MiB, Parallel at a time) into a local spool, so the conversion that
// follows reads them from disk in bounded memory.
func (r *Remote) Prefetch(ranges map[string][]Range) error {
	if r.spool == "" {
		d, err := os.MkdirTemp(r.opt.SpoolDir, "mtpconv-hub-")
		if err != nil {
			return err
		}
		r.spool = d
	}
	g, _ := errgroup.WithContext(r.opt.Context)
	g.SetLimit(r.opt.Parallel)
	files := make([]string, 0, len(ranges))
	for f := range ranges {
		files = append(files, f)
	}
	sort.Strings(files)
	for i, name := range files {
		sf, err := os.Create(filepath.Join(r.spool, fmt.Sprintf("%d.part", i)))
		if err != nil {
			return err
		}
		spool := &spoolFile{f: sf}
		r.mu.Lock()
		r.spools[name] = spool
		r.mu.Unlock()
		var pieces []Range
		for _, c := range Coalesce(ranges[name], r.opt.MaxGap) {
			for b := c.Begin; b < c.End; b += 64 << 20 {
				pieces = append(pieces, Range{b, min(c.End, b+64<<20)})
			}
		}
		for _, p := range pieces {
			name, p := name, p
			g.Go(func() error {
				b, err := r.get(r.fileURL(name), p.Begin, p.End-p.Begin)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if _, err := spool.f.WriteAt(b, p.Begin); err != nil {
					return err
				}
				r.mu.Lock()
				spool.covered = append(spool.covered, p)
				spool.covered = Coalesce(spool.covered, 0)
				r.mu.Unlock()
				return nil
			})
		}
	}
	return g.Wait()
}

func (r *Remote) readSpool(name string, p []byte, off int64) bool {
	r.mu.Lock()
	s, ok := r.spools[name]
	covered := false
	if ok {
		end := off + int64(len(p))
		i := sort.Search(len(s.covered), func(i int) bool { return s.covered[i].End > off })
		covered = i < len(s.covered) && s.covered[i].Begin <= off && s.covered[i].End >= end
	}
	r.mu.Unlock()
	if !covered {
		return false
	}
	_, err := s.f.ReadAt(p, off)
	return err == nil
}
