package source

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"golang.org/x/sync/errgroup"
)

// RemoteOptions configure reading from the Hub.
type RemoteOptions struct {
	Endpoint string // default $HF_ENDPOINT, else https://huggingface.co
	// Token defaults to $HF_TOKEN, else the token file of the Hugging Face
	// CLI's login (see FindToken). It is sent only to Endpoint's exact origin
	// (scheme, host and port), also after a redirect that stays there, and is
	// never printed or stored.
	Token string
	// Client defaults to one without a total timeout: StallTimeout bounds each
	// request instead. Its CheckRedirect is wrapped (on a copy) to keep the
	// token on the endpoint's origin.
	Client       *http.Client
	Parallel     int           // concurrent range requests; default 4
	Retries      int           // failed attempts in a row retried; default 6, negative for none
	BaseDelay    time.Duration // first backoff; default 250 ms, doubling, capped at 8 s (and MaxDelay)
	MaxDelay     time.Duration // longest pause between attempts, a server's Retry-After included; default 30 s
	StallTimeout time.Duration // an attempt that receives no byte for this long is dropped (and resumed); default 30 s
	MaxGap       int64         // neighbouring ranges closer than this are fetched as one; default 64 KiB
	SpoolDir     string        // where prefetched ranges are kept during the run; default the system temp dir
	Log          io.Writer     // one line per retry; default os.Stderr (io.Discard silences)
	Context      context.Context
}

func (o *RemoteOptions) defaults() error {
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Token == "" {
		t, err := FindToken()
		if err != nil {
			return err
		}
		o.Token = t
	} else if err := checkToken(o.Token, "the caller"); err != nil {
		return err
	}
	switch {
	case o.Retries == 0:
		o.Retries = 6
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = 30 * time.Second
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 250 * time.Millisecond
	}
	o.BaseDelay = min(o.BaseDelay, o.MaxDelay)
	if o.StallTimeout <= 0 {
		o.StallTimeout = 30 * time.Second
	}
	if o.MaxGap <= 0 {
		o.MaxGap = 64 << 10
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	return nil
}

// maxFileSize bounds the file sizes believed from a listing or an answer (1 PiB).
const maxFileSize = 1 << 50

// Remote is a Hub repo pinned to one commit, read by HTTP range requests.
type Remote struct {
	repo, commit string
	opt          RemoteOptions
	origin       string // the endpoint's scheme://host:port, the only one the token goes to
	client       *http.Client
	fetched      atomic.Int64
	spool        string
	spoolLock    *os.File // held while the spool is in use (see lockSpool)
	mu           sync.Mutex
	sizes        map[string]int64 // -1: unknown until a range answer tells
	spools       map[string]*spoolFile
	logMu        sync.Mutex
	noRange      sync.Once
}

// OpenRemote resolves rev to a commit and lists the repo's files and sizes,
// so that every byte read later comes from that commit.
func OpenRemote(repo, rev string, opt RemoteOptions) (*Remote, error) {
	src := "hf://" + repo + "@" + rev
	if Offline() {
		return nil, fmt.Errorf("%s: HF_HUB_OFFLINE is set, so the Hub is not contacted: only the local Hugging Face cache can be used (--src %s@%s)", src, repo, rev)
	}
	if err := opt.defaults(); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	end, err := url.Parse(opt.Endpoint)
	if err != nil || (end.Scheme != "http" && end.Scheme != "https") || end.Host == "" {
		return nil, fmt.Errorf("%s: the endpoint (HF_ENDPOINT) is not an http(s) URL", src)
	}
	r := &Remote{repo: repo, opt: opt, origin: origin(end), spools: map[string]*spoolFile{}}
	r.client = r.wrapClient(opt.Client)
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", opt.Endpoint, repo, url.PathEscape(rev))
	body, err := r.getAll(opt.Context, u)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
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
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("%s: the Hub's answer is not a revision listing (%v)", src, err)
	}
	if !commitHash.MatchString(info.SHA) {
		return nil, fmt.Errorf("%s: the Hub's answer names no commit", src)
	}
	r.commit = info.SHA
	r.sizes = map[string]int64{}
	for _, s := range info.Siblings {
		size := int64(-1) // unknown: taken from the first range answer
		switch {
		case s.LFS != nil:
			size = s.LFS.Size
		case s.Size != nil:
			size = *s.Size
		}
		if size < 0 || size > maxFileSize {
			size = -1
		}
		r.sizes[s.Name] = size
	}
	return r, nil
}

// Name is hf://ORG/NAME@COMMIT.
func (r *Remote) Name() string { return "hf://" + r.repo + "@" + r.commit }

// BytesFetched counts the bytes received from the server.
func (r *Remote) BytesFetched() int64 { return r.fetched.Load() }

// TotalBytes is the size of every file of the repo (those of known size).
func (r *Remote) TotalBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
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
	var err error
	if r.spool != "" {
		err = os.RemoveAll(r.spool)
		r.spool = ""
	}
	if r.spoolLock != nil {
		r.spoolLock.Close()
		r.spoolLock = nil
	}
	return err
}

// A spool folder is SpoolDir/mtpconv-hub-PID-RANDOM holding the owner
// lock: a run killed before Close leaves it behind (gigabytes for a real
// model), and the next run removes those whose owner is gone.
const (
	spoolPrefix    = "mtpconv-hub-"
	spoolOwnerFile = "owner.lock"
)

// newSpool removes the spools of runs that are gone, then makes and locks
// this run's.
func (r *Remote) newSpool() error {
	base := r.opt.SpoolDir
	if base == "" {
		base = os.TempDir()
	}
	if entries, err := os.ReadDir(base); err == nil {
		for _, e := range entries {
			// Only real folders of our name; a symlink is never followed.
			if e.IsDir() && e.Type()&fs.ModeSymlink == 0 && strings.HasPrefix(e.Name(), spoolPrefix) {
				if dir := filepath.Join(base, e.Name()); spoolAbandoned(dir) {
					os.RemoveAll(dir)
				}
			}
		}
	}
	d, err := os.MkdirTemp(base, fmt.Sprintf("%s%d-", spoolPrefix, os.Getpid()))
	if err != nil {
		return err
	}
	lock, err := lockSpool(d)
	if err != nil {
		os.RemoveAll(d)
		return err
	}
	r.spool, r.spoolLock = d, lock
	return nil
}

func (r *Remote) fileURL(name string) string {
	return fmt.Sprintf("%s/%s/resolve/%s/%s", r.opt.Endpoint, r.repo, r.commit, name)
}

// size is a file's size, -1 when unknown; ok is false for a file not listed.
func (r *Remote) size(name string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sizes[name]
	return s, ok
}

// Open opens a file of the repo for range reads.
func (r *Remote) Open(name string) (File, error) {
	if err := st.CheckLocalName(name); err != nil {
		return nil, err
	}
	size, ok := r.size(name)
	if !ok {
		return nil, fmt.Errorf("%s: %s: %w", r.Name(), name, fs.ErrNotExist)
	}
	if size < 0 {
		// The listing gave no size: the first byte's answer tells it.
		var b [1]byte
		if err := r.fetch(r.opt.Context, r.fileURL(name), 0, 1, &sliceAt{b[:], 0}); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if size, _ = r.size(name); size < 0 {
			return nil, fmt.Errorf("%s: neither the Hub listing nor the server gives its size", name)
		}
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
	if off < 0 || off > f.size || int64(len(p)) > f.size-off {
		return 0, fmt.Errorf("%s: read [%d, %d) past the %d-byte file: %w", f.name, off, off+int64(len(p)), f.size, io.ErrUnexpectedEOF)
	}
	if len(p) == 0 {
		return 0, nil
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
	if err := f.r.fetch(f.r.opt.Context, f.r.fileURL(f.name), off, int64(len(p)), &sliceAt{p, off}); err != nil {
		return 0, fmt.Errorf("%s: %w", f.name, err)
	}
	f.mu.Lock()
	if off == int64(len(f.prefix)) && off+int64(len(p)) <= maxPrefix {
		f.prefix = append(f.prefix, p...)
	}
	f.mu.Unlock()
	return len(p), nil
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
// most 64 MiB, Parallel at a time) straight into a local spool, so the
// conversion that follows reads them from disk in bounded memory.
func (r *Remote) Prefetch(ranges map[string][]Range) error {
	if r.spool == "" {
		if err := r.newSpool(); err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(r.opt.Context)
	g.SetLimit(r.opt.Parallel)
	files := make([]string, 0, len(ranges))
	for f := range ranges {
		files = append(files, f)
	}
	sort.Strings(files)
	for i, name := range files {
		if _, ok := r.size(name); !ok {
			g.Wait()
			return fmt.Errorf("%s: %s: %w", r.Name(), name, fs.ErrNotExist)
		}
		sf, err := os.Create(filepath.Join(r.spool, fmt.Sprintf("%d.part", i)))
		if err != nil {
			g.Wait()
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
			g.Go(func() error {
				if p.Begin < 0 {
					return fmt.Errorf("%s: range [%d, %d) starts before the file", name, p.Begin, p.End)
				}
				if err := r.fetch(ctx, r.fileURL(name), p.Begin, p.End-p.Begin, spool.f); err != nil {
					return fmt.Errorf("%s: %w", name, err)
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
