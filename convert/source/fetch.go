package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// errPermanent marks answers that retrying cannot fix.
type errPermanent struct{ error }

func (e errPermanent) Unwrap() error { return e.error }

// maxAPIAnswer bounds a listing.
const maxAPIAnswer = 64 << 20

// progressCredit is how many bytes an attempt must bring for its failure not
// to count against Retries: a link that keeps delivering before it drops is
// resumed as often as it takes.
const progressCredit = 256 << 10

// origin is a URL's scheme://host:port, the port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// authorize gives req the token if, and only if, it goes to the endpoint's origin.
func (r *Remote) authorize(req *http.Request) {
	req.Header.Del("Authorization")
	if r.opt.Token != "" && origin(req.URL) == r.origin {
		req.Header.Set("Authorization", "Bearer "+r.opt.Token)
	}
}

// wrapClient copies c (or a default client) so that every redirect is
// authorized anew: Go's client would re-send the header to the same host on
// any port and to its subdomains.
func (r *Remote) wrapClient(c *http.Client) *http.Client {
	cc := &http.Client{}
	if c != nil {
		*cc = *c
	}
	next := cc.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		r.authorize(req)
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return cc
}

// logf writes one line to the log, never the token.
func (r *Remote) logf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if r.opt.Token != "" {
		msg = strings.ReplaceAll(msg, r.opt.Token, "[token]")
	}
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintln(r.opt.Log, msg)
}

// retry runs try until it succeeds, fails for good, or fails Retries+1
// times in a row with capped backoff, logging each retry. An attempt that
// brought progressCredit bytes or more before failing starts the count anew.
func (r *Remote) retry(ctx context.Context, try func() (progress int64, resume string, wait time.Duration, err error)) error {
	delay := r.opt.BaseDelay
	failures := 0
	for {
		progress, resume, wait, err := try()
		if err == nil {
			return nil
		}
		if perm := (errPermanent{}); errors.As(err, &perm) {
			return perm.error
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if progress >= progressCredit {
			failures, delay = 0, r.opt.BaseDelay
		}
		failures++
		if failures > r.opt.Retries && failures == 1 {
			return err
		}
		if failures > r.opt.Retries {
			return fmt.Errorf("giving up after %d failed attempts in a row: %w", failures, err)
		}
		pause := delay
		if wait > 0 {
			pause = wait
		}
		pause = min(pause, r.opt.MaxDelay)
		r.logf("hub: retry %d of %d in %s%s: %v", failures, r.opt.Retries, pause, resume, err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay = min(2*delay, 8*time.Second, r.opt.MaxDelay)
	}
}

// watchdog cancels an attempt that receives nothing for d: a stall, as
// opposed to a slow link, which keeps it alive with every byte.
type watchdog struct {
	d     time.Duration
	t     *time.Timer
	fired atomic.Bool
}

func (w *watchdog) stalled() bool { return w.fired.Load() }

type watchedReader struct {
	r io.Reader
	w *watchdog
}

func (x watchedReader) Read(p []byte) (int, error) {
	n, err := x.r.Read(p)
	if n > 0 {
		x.w.t.Reset(x.w.d)
	}
	return n, err
}

// send starts one attempt. The caller reads the body through body and calls done.
func (r *Remote) send(ctx context.Context, u, rng string) (*http.Response, io.Reader, *watchdog, func(), error) {
	actx, cancel := context.WithCancel(ctx)
	wd := &watchdog{d: r.opt.StallTimeout}
	wd.t = time.AfterFunc(wd.d, func() { wd.fired.Store(true); cancel() })
	stop := func() { wd.t.Stop(); cancel() }
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		stop()
		return nil, nil, nil, nil, errPermanent{fmt.Errorf("%s: %v", redact(u), err)}
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	r.authorize(req)
	resp, err := r.client.Do(req)
	if err != nil {
		stop()
		if wd.stalled() {
			return nil, nil, nil, nil, fmt.Errorf("%s: stalled: no answer for %s", redact(u), wd.d)
		}
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound && !dns.IsTemporary && !dns.IsTimeout {
			// The resolver answered that the name does not exist: offline, or a
			// wrong HF_ENDPOINT. Retrying would only make the user wait.
			return nil, nil, nil, nil, errPermanent{fmt.Errorf("%s: the host %s does not resolve (offline, or a wrong HF_ENDPOINT?); "+
				"a model in the Hugging Face cache is read without the Hub as ORG/NAME, without hf://", redact(u), dns.Name)}
		}
		return nil, nil, nil, nil, err // connection refused, reset, a DNS timeout: transient
	}
	return resp, watchedReader{resp.Body, wd}, wd, func() { resp.Body.Close(); stop() }, nil
}

// status sorts out the answers that carry no wanted body.
func status(u string, resp *http.Response) (time.Duration, error) {
	switch c := resp.StatusCode; {
	case c == http.StatusOK || c == http.StatusPartialContent:
		return 0, nil
	case c == http.StatusNotFound:
		return 0, errPermanent{fmt.Errorf("%s: not found (404)", redact(u))}
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		return 0, errPermanent{fmt.Errorf("%s: access denied (%d); gated or private repos need a token (HF_TOKEN, or the Hugging Face CLI's login)", redact(u), c)}
	case c == http.StatusTooManyRequests || c >= 500:
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 && s < 3600 {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("%s: %s", redact(u), resp.Status)
	default:
		return 0, errPermanent{fmt.Errorf("%s: unexpected answer %s", redact(u), resp.Status)}
	}
}

// getAll fetches a whole (API) answer of at most maxAPIAnswer bytes.
func (r *Remote) getAll(ctx context.Context, u string) ([]byte, error) {
	var out []byte
	err := r.retry(ctx, func() (int64, string, time.Duration, error) {
		resp, body, wd, done, err := r.send(ctx, u, "")
		if err != nil {
			return 0, "", 0, err
		}
		defer done()
		if wait, err := status(u, resp); err != nil {
			return 0, "", wait, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, "", 0, errPermanent{fmt.Errorf("%s: unexpected answer %s", redact(u), resp.Status)}
		}
		b, err := io.ReadAll(io.LimitReader(body, maxAPIAnswer+1))
		r.fetched.Add(int64(len(b)))
		switch {
		case err != nil && wd.stalled():
			return 0, "", 0, fmt.Errorf("%s: stalled: no data for %s", redact(u), wd.d)
		case err != nil:
			return 0, "", 0, fmt.Errorf("%s: connection dropped after %d bytes: %w", redact(u), len(b), err)
		case len(b) > maxAPIAnswer:
			return 0, "", 0, errPermanent{fmt.Errorf("%s: the answer is over %d bytes", redact(u), maxAPIAnswer)}
		}
		out = b
		return 0, "", 0, nil
	})
	return out, err
}

// sliceAt is a WriterAt into p, which holds the file's bytes from off.
type sliceAt struct {
	p   []byte
	off int64
}

func (s *sliceAt) WriteAt(b []byte, at int64) (int, error) {
	if at < s.off || at-s.off > int64(len(s.p)) || int64(len(b)) > int64(len(s.p))-(at-s.off) {
		return 0, errors.New("write outside the buffer")
	}
	return copy(s.p[at-s.off:], b), nil
}

// fetch writes bytes [off, off+n) of u into w at their file offsets. A
// dropped or stalled answer is resumed from the last byte received.
func (r *Remote) fetch(ctx context.Context, u string, off, n int64, w io.WriterAt) error {
	if off < 0 || n <= 0 || n > maxFileSize {
		return fmt.Errorf("%s: bad range of %d bytes at %d", redact(u), n, off)
	}
	pos, end := off, off+n
	return r.retry(ctx, func() (int64, string, time.Duration, error) {
		got, wait, err := r.fetchOnce(ctx, u, pos, end, w)
		pos += got
		resume := ""
		if pos > off {
			resume = fmt.Sprintf(", resuming at byte %d of %d-%d", pos, off, end-1)
		}
		return got, resume, wait, err
	})
}

// fetchOnce is one attempt at bytes [start, end): it returns how many
// arrived (and were written) from start on.
func (r *Remote) fetchOnce(ctx context.Context, u string, start, end int64, w io.WriterAt) (int64, time.Duration, error) {
	resp, body, wd, done, err := r.send(ctx, u, fmt.Sprintf("bytes=%d-%d", start, end-1))
	if err != nil {
		return 0, 0, err
	}
	defer done()
	if wait, err := status(u, resp); err != nil {
		return 0, wait, err
	}
	want := end - start
	if resp.StatusCode == http.StatusPartialContent {
		last, err := r.checkRange(u, resp.Header.Get("Content-Range"), start)
		if err != nil {
			return 0, 0, errPermanent{err}
		}
		want = min(want, last+1-start)
	} else {
		// 200: the server ignores Range and sends the whole file, which is legal.
		if err := r.checkWhole(u, resp.ContentLength, end); err != nil {
			return 0, 0, errPermanent{err}
		}
		r.noRange.Do(func() {
			r.logf("hub: %s ignores Range requests: reading from the start of each file to the bytes needed", redact(u))
		})
		k, err := io.CopyN(io.Discard, body, start)
		r.fetched.Add(k)
		if err != nil {
			return 0, 0, r.dropped(u, wd, start, end, 0, err)
		}
	}
	got, err := copyAt(w, body, start, want, &r.fetched)
	if err != nil {
		var werr writeError
		if errors.As(err, &werr) {
			return got, 0, errPermanent{werr.error}
		}
		return got, 0, r.dropped(u, wd, start, end, got, err)
	}
	if start+got < end {
		return got, 0, fmt.Errorf("%s: the server sent bytes %d-%d of the %d-%d asked", redact(u), start, start+got-1, start, end-1)
	}
	return got, 0, nil
}

func (r *Remote) dropped(u string, wd *watchdog, start, end, got int64, err error) error {
	if wd.stalled() {
		return fmt.Errorf("%s: stalled: no data for %s after %d of %d bytes", redact(u), wd.d, got, end-start)
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%s: connection dropped after %d of %d bytes: %w", redact(u), got, end-start, err)
}

type writeError struct{ error }

// copyAt copies n bytes of body into w from offset at, counting them in fetched.
func copyAt(w io.WriterAt, body io.Reader, at, n int64, fetched *atomic.Int64) (int64, error) {
	var buf []byte
	if s, ok := w.(*sliceAt); ok && at >= s.off && at-s.off+n <= int64(len(s.p)) {
		buf = s.p[at-s.off : at-s.off+n] // read straight into the caller's slice
		k, err := io.ReadFull(body, buf)
		fetched.Add(int64(k))
		return int64(k), err
	}
	buf = make([]byte, min(n, 256<<10))
	var got int64
	for got < n {
		k, err := io.ReadFull(body, buf[:min(int64(len(buf)), n-got)])
		fetched.Add(int64(k))
		if k > 0 {
			if _, werr := w.WriteAt(buf[:k], at+got); werr != nil {
				return got, writeError{werr}
			}
			got += int64(k)
		}
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// checkRange checks a Content-Range answer "bytes A-B/TOTAL" against a
// request starting at start and the listed size, learns the size if it was
// unknown, and returns B.
func (r *Remote) checkRange(u, cr string, start int64) (int64, error) {
	bad := fmt.Errorf("%s: malformed Content-Range %q", redact(u), cr)
	rest, ok := strings.CutPrefix(cr, "bytes ")
	span, tot, ok2 := strings.Cut(rest, "/")
	as, bs, ok3 := strings.Cut(span, "-")
	if !ok || !ok2 || !ok3 {
		return 0, bad
	}
	a, err1 := strconv.ParseInt(as, 10, 64)
	b, err2 := strconv.ParseInt(bs, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < a {
		return 0, bad
	}
	total := int64(-1)
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t <= b {
			return 0, bad
		}
		total = t
	}
	if a != start {
		return 0, fmt.Errorf("%s: asked for bytes from %d, got %d-%d", redact(u), start, a, b)
	}
	return b, r.learnSize(u, total, "the server's Content-Range")
}

// checkWhole checks a 200 answer's Content-Length (-1 when not given)
// against the listed size and the bytes wanted, and learns the size.
func (r *Remote) checkWhole(u string, length, end int64) error {
	if err := r.learnSize(u, length, "the server's Content-Length"); err != nil {
		return err
	}
	if length >= 0 && length < end {
		return fmt.Errorf("%s: the server sends %d bytes, fewer than the %d needed", redact(u), length, end)
	}
	return nil
}

// learnSize records a file's size from an answer (-1: not told) or checks
// it against the one listed.
func (r *Remote) learnSize(u string, size int64, from string) error {
	name, ok := r.nameOf(u)
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want, ok := r.sizes[name]
	switch {
	case !ok:
		return nil
	case size > maxFileSize:
		return fmt.Errorf("%s gives an implausible size of %d bytes", from, size)
	case size < 0 && want < 0:
		return fmt.Errorf("the Hub listing gives no size, and neither does %s", from)
	case size < 0:
		return nil
	case want < 0:
		r.sizes[name] = size
	case want != size:
		return fmt.Errorf("the server says the file has %d bytes, the Hub listing says %d (size mismatch)", size, want)
	}
	return nil
}

func (r *Remote) nameOf(u string) (string, bool) {
	return strings.CutPrefix(u, fmt.Sprintf("%s/%s/resolve/%s/", r.opt.Endpoint, r.repo, r.commit))
}

// redact drops the query (never holds a token here, but keeps messages short).
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}
