// Package fakehub is a Hugging Face Hub stand-in for tests: it serves a
// local checkpoint folder on 127.0.0.1 with Hub-style URLs and range
// support, counts the bytes it sends, records who sent a token, and injects
// faults on request.
package fakehub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Commit is the revision the fake repo is at.
const Commit = "0123456789abcdef0123456789abcdef01234567"

// Fault is injected into the next matching file requests.
type Fault struct {
	File  string // file name the fault applies to
	Kind  string // "drop" (half the body, then the connection closes), "503", "429", "404"
	Times int    // how many requests it hits; 0 means every one
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
	// SizeLie adds this many bytes to the size the API lists for files ending in .safetensors.
	SizeLie int64
	// RedirectTo, when set, answers file requests with a redirect to this base URL (a CDN).
	RedirectTo string
	faults     []*Fault
}

// New starts a server for repo backed by dir.
func New(repo, dir string) *Server {
	s := &Server{Repo: repo, Dir: dir}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
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

func (s *Server) fault(file string) string {
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
			return f.Kind
		}
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if a := r.Header.Get("Authorization"); a != "" {
		s.Tokens = append(s.Tokens, a)
	}
	s.mu.Unlock()
	api := "/api/models/" + s.Repo + "/revision/"
	if rev, ok := strings.CutPrefix(r.URL.Path, api); ok {
		if rev != "main" && rev != Commit {
			http.NotFound(w, r)
			return
		}
		s.listing(w)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/"+s.Repo+"/resolve/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if s.RedirectTo != "" {
		http.Redirect(w, r, s.RedirectTo+r.URL.Path, http.StatusFound)
		return
	}
	rev, file, _ := strings.Cut(rest, "/")
	if rev != Commit && rev != "main" {
		http.NotFound(w, r)
		return
	}
	switch s.fault(file) {
	case "503":
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case "429":
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case "404":
		http.NotFound(w, r)
		return
	case "drop":
		s.drop(w, r, file)
		return
	}
	f, err := os.Open(filepath.Join(s.Dir, filepath.FromSlash(file)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, _ := f.Stat()
	http.ServeContent(&counting{ResponseWriter: w, s: s}, r, file, fi.ModTime(), f)
}

// drop answers a range request with half its bytes, then cuts the connection.
func (s *Server) drop(w http.ResponseWriter, r *http.Request, file string) {
	var a, b int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
		http.Error(w, "drop needs a range", http.StatusBadRequest)
		return
	}
	data, _ := os.ReadFile(filepath.Join(s.Dir, file))
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	half := (b - a + 1) / 2
	fmt.Fprintf(buf, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\n\r\n", a, b, len(data), b-a+1)
	buf.Write(data[a : a+half])
	buf.Flush()
	s.mu.Lock()
	s.BytesSent += half
	s.mu.Unlock()
}

func (s *Server) listing(w http.ResponseWriter) {
	type lfs struct {
		Size int64 `json:"size"`
	}
	type sib struct {
		Name string `json:"rfilename"`
		Size int64  `json:"size"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var sibs []sib
	filepath.Walk(s.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(s.Dir, p)
		x := sib{Name: filepath.ToSlash(rel), Size: fi.Size()}
		if strings.HasSuffix(rel, ".safetensors") {
			x.LFS = &lfs{fi.Size() + s.SizeLie}
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
	c.s.mu.Lock()
	c.s.BytesSent += int64(n)
	c.s.mu.Unlock()
	return n, err
}
