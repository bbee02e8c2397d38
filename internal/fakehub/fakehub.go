// Package fakehub is a Hugging Face Hub stand-in for tests: it serves a
// local checkpoint folder on a loopback address with Hub-style URLs and
// range support, counts the bytes it sends, records every request (and who
// sent a token), and injects faults on request.
package fakehub

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Commit is the revision the fake repo is at.
const Commit = "0123456789abcdef0123456789abcdef01234567"

// API is the Fault.File that names the revision listing (/api/models/REPO/revision/REV).
const API = "<api>"

// Fault is injected into the next matching requests.
type Fault struct {
	File string // file name the fault applies to, or API
	// Kind is one of
	//   "404", "429" (Retry-After: 1), "500", "503": that status;
	//   "drop": half the asked bytes (Chunk if set), then the connection closes;
	//   "short": a 206 whose Content-Length and body hold half the asked bytes;
	//   "full": ignores Range, 200 with the whole file and its Content-Length;
	//   "full-nolength": ignores Range, 200 with the whole file, chunked (no length);
	//   "badrange": 206 whose Content-Range starts one byte later than asked;
	//   "badrange-syntax": 206 with an unparsable Content-Range;
	//   "negtotal", "hugetotal", "startotal": 206 whose Content-Range total is -1, 2^62 or *;
	//   "neglength", "hugelength": 200 with Content-Length -5 or 2^62, then the file;
	//   "trickle": a correct 206 sent Chunk bytes at a time, Every apart;
	//   "stall": a correct 206 header and Chunk bytes, then nothing until the client leaves;
	//   "hang": no answer at all until the client leaves;
	//   "garbage" (API only): a listing that is not JSON.
	Kind  string
	Times int // how many requests it hits; 0 means every one
	Chunk int
	Every time.Duration
}

// Request is one request the server received.
type Request struct {
	Path          string
	Range         string
	Authorization string
}

// Server serves one repo.
type Server struct {
	*httptest.Server
	Repo string
	Dir  string
	mu   sync.Mutex
	// BytesSent counts file body bytes written (API answers excluded).
	BytesSent int64
	// Tokens records the Authorization headers received.
	Tokens []string
	// Log records every request.
	Log []Request
	// SizeLie adds this many bytes to the size the API lists for files ending in .safetensors.
	SizeLie int64
	// NoSizes makes the listing give no size for any file (no "size", no "lfs").
	NoSizes bool
	// RedirectTo, when set, answers file requests with a redirect to this base URL (a CDN).
	RedirectTo string
	// ResolveCache, when set, redirects file requests to this server's own
	// /api/resolve-cache/models/REPO/REV/FILE, as the Hub does for small files.
	ResolveCache bool
	faults       []*Fault
	quit         chan struct{}
	closeOnce    sync.Once
}

// New starts a server for repo backed by dir on 127.0.0.1.
func New(repo, dir string) *Server {
	s, err := NewAt("127.0.0.1:0", repo, dir)
	if err != nil {
		panic(err)
	}
	return s
}

// NewAt starts a server listening on addr (such as "127.0.0.2:0").
func NewAt(addr, repo, dir string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{Repo: repo, Dir: dir, quit: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Listener.Close()
	s.Server.Listener = l
	s.Server.Start()
	return s, nil
}

// Close releases stalled handlers, then shuts the server down.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.quit) })
	s.Server.Close()
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// Sent returns the file bytes sent so far.
func (s *Server) Sent() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BytesSent
}

// Requests returns a copy of the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.Log...)
}

func (s *Server) sent(n int) {
	s.mu.Lock()
	s.BytesSent += int64(n)
	s.mu.Unlock()
}

func (s *Server) fault(file string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.File == file && f.Times >= 0 {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					f.Times = -1
				}
			}
			c := *f
			return &c
		}
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if a := r.Header.Get("Authorization"); a != "" {
		s.Tokens = append(s.Tokens, a)
	}
	s.Log = append(s.Log, Request{Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")})
	s.mu.Unlock()
	api := "/api/models/" + s.Repo + "/revision/"
	if rev, ok := strings.CutPrefix(r.URL.Path, api); ok {
		if f := s.fault(API); f != nil && s.status(w, r, f) {
			return
		} else if f != nil && f.Kind == "garbage" {
			fmt.Fprint(w, `{"sha": ["not", "a", "commit"], "siblings": {`)
			return
		}
		if rev != "main" && rev != Commit {
			http.NotFound(w, r)
			return
		}
		s.listing(w)
		return
	}
	var rest string
	if x, ok := strings.CutPrefix(r.URL.Path, "/api/resolve-cache/models/"+s.Repo+"/"); ok {
		rest = x
	} else if x, ok := strings.CutPrefix(r.URL.Path, "/"+s.Repo+"/resolve/"); ok {
		rest = x
		if s.RedirectTo != "" {
			http.Redirect(w, r, s.RedirectTo+r.URL.Path, http.StatusFound)
			return
		}
		if s.ResolveCache {
			http.Redirect(w, r, "/api/resolve-cache/models/"+s.Repo+"/"+rest, http.StatusTemporaryRedirect)
			return
		}
	} else {
		http.NotFound(w, r)
		return
	}
	rev, file, _ := strings.Cut(rest, "/")
	if rev != Commit && rev != "main" {
		http.NotFound(w, r)
		return
	}
	path := filepath.Join(s.Dir, filepath.FromSlash(file))
	f := s.fault(file)
	if f == nil {
		fh, err := os.Open(path)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer fh.Close()
		http.ServeContent(&counting{ResponseWriter: w, s: s}, r, file, time.Time{}, fh)
		return
	}
	if s.status(w, r, f) {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	s.faulty(w, r, f, data)
}

// status answers the status-code faults.
func (s *Server) status(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	switch f.Kind {
	case "500":
		http.Error(w, "oops", http.StatusInternalServerError)
	case "503":
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case "429":
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case "404":
		http.NotFound(w, r)
	case "hang":
		s.wait(r)
	default:
		return false
	}
	return true
}

// wait blocks until the client leaves or the server closes (at most 10 s).
func (s *Server) wait(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.quit:
	case <-time.After(10 * time.Second):
	}
}

// faulty answers the body faults. Those that need it write raw HTTP on the hijacked connection.
func (s *Server) faulty(w http.ResponseWriter, r *http.Request, f *Fault, data []byte) {
	size := int64(len(data))
	a, b := int64(0), size-1
	ranged := false
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err == nil && a >= 0 && a <= b && a < size {
		b = min(b, size-1)
		ranged = true
	} else {
		a, b = 0, size-1
	}
	part := data[a : b+1]
	switch f.Kind {
	case "full", "full-nolength":
		if f.Kind == "full" {
			w.Header().Set("Content-Length", fmt.Sprint(size))
		}
		w.WriteHeader(http.StatusOK)
		n, _ := w.Write(data)
		s.sent(n)
		return
	case "trickle", "stall":
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
		w.Header().Set("Content-Length", fmt.Sprint(len(part)))
		w.WriteHeader(http.StatusPartialContent)
		w.(http.Flusher).Flush()
		chunk := max(f.Chunk, 0)
		if f.Kind == "trickle" {
			chunk = max(chunk, 1)
		}
		for len(part) > 0 {
			k := min(chunk, len(part))
			n, err := w.Write(part[:k])
			s.sent(n)
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
			part = part[k:]
			if f.Kind == "stall" {
				s.wait(r)
				return
			}
			select {
			case <-time.After(f.Every):
			case <-r.Context().Done():
				return
			case <-s.quit:
				return
			}
		}
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	head := func(status string, hdr ...string) {
		fmt.Fprintf(buf, "HTTP/1.1 %s\r\nConnection: close\r\n", status)
		for _, h := range hdr {
			fmt.Fprintf(buf, "%s\r\n", h)
		}
		fmt.Fprint(buf, "\r\n")
	}
	body := func(p []byte) {
		n, _ := buf.Write(p)
		buf.Flush()
		s.sent(n)
	}
	cr := func(total string) string { return fmt.Sprintf("Content-Range: bytes %d-%d/%s", a, b, total) }
	cl := func(n int) string { return fmt.Sprintf("Content-Length: %d", n) }
	switch f.Kind {
	case "drop":
		if !ranged {
			head("400 Bad Request", cl(0))
			return
		}
		half := len(part) / 2
		if f.Chunk > 0 {
			half = min(f.Chunk, len(part))
		}
		head("206 Partial Content", cr(fmt.Sprint(size)), cl(len(part)))
		body(part[:half])
	case "short":
		half := len(part) / 2
		head("206 Partial Content", cr(fmt.Sprint(size)), cl(half))
		body(part[:half])
	case "badrange":
		head("206 Partial Content", fmt.Sprintf("Content-Range: bytes %d-%d/%d", a+1, b+1, size), cl(len(part)))
		body(part)
	case "badrange-syntax":
		head("206 Partial Content", "Content-Range: lots of bytes", cl(len(part)))
		body(part)
	case "negtotal":
		head("206 Partial Content", cr("-1"), cl(len(part)))
		body(part)
	case "hugetotal":
		head("206 Partial Content", cr(fmt.Sprint(int64(1)<<62)), cl(len(part)))
		body(part)
	case "startotal":
		head("206 Partial Content", cr("*"), cl(len(part)))
		body(part)
	case "neglength":
		head("200 OK", "Content-Length: -5")
		body(data)
	case "hugelength":
		head("200 OK", fmt.Sprintf("Content-Length: %d", int64(1)<<62))
		body(data)
	default:
		head("500 Internal Server Error", cl(0))
	}
}

func (s *Server) listing(w http.ResponseWriter) {
	type lfs struct {
		Size int64 `json:"size"`
	}
	type sib struct {
		Name string `json:"rfilename"`
		Size *int64 `json:"size,omitempty"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var sibs []sib
	filepath.Walk(s.Dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			fi, err = os.Stat(p) // a folder of links (as the HF cache is) lists its files' sizes
		}
		if err != nil || fi.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(s.Dir, p)
		x := sib{Name: filepath.ToSlash(rel)}
		if !s.NoSizes {
			size := fi.Size()
			x.Size = &size
			if strings.HasSuffix(rel, ".safetensors") {
				x.LFS = &lfs{fi.Size() + s.SizeLie}
			}
		}
		sibs = append(sibs, x)
		return nil
	})
	json.NewEncoder(w).Encode(map[string]any{"id": s.Repo, "sha": Commit, "siblings": sibs})
}

type counting struct {
	http.ResponseWriter
	s *Server
}

func (c *counting) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.s.sent(n)
	return n, err
}
