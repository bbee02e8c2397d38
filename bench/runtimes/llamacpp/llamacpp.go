// Package llamacpp is bench's llama.cpp runtime: it starts llama-server (from
// PATH or --llama-server) on a free loopback port, plain or with
// `--spec-type draft-mtp` (the bundled or grafted file alone, or `-md
// SIDECAR`) drafting a fixed number of tokens, and reads each request's
// `timings` (draft_n and draft_n_accepted are absent, not 0, when nothing
// was drafted) and the `/metrics` spec-decode counters per draft position,
// before and after the request. With --endpoint and --plain-endpoint it
// measures servers the user runs instead.
package llamacpp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/proc"
	"github.com/mtpconv/mtpconv/formats/gguf"
)

// Name is the --runtime name.
const Name = "llama.cpp"

// Binary is the server's executable name.
const Binary = "llama-server"

// HealthTimeout bounds how long a start may take to load the model.
var HealthTimeout = 10 * time.Minute

// RequestTimeout bounds one request.
const RequestTimeout = 30 * time.Minute

// install is what the errors tell a user without a usable llama-server.
const install = "install llama.cpp's llama-server with MTP speculative decoding (`--spec-type draft-mtp`; " +
	"https://github.com/ggml-org/llama.cpp) and put it on PATH or give --llama-server PATH"

// reserved are the server arguments bench sets itself: the user's own after `--` may not repeat them.
var reserved = []string{"-m", "--model", "-md", "--model-draft", "--host", "--port", "--spec-type", "--spec-draft-n-max",
	"--spec-draft-n-min", "--metrics"}

type runtime struct {
	mu      sync.Mutex
	checked map[string]error // binary path → whether it knows draft-mtp
}

func init() { runtimes.Register(&runtime{checked: map[string]error{}}) }

func (*runtime) Name() string { return Name }

func (*runtime) Check(s runtimes.Setup) error {
	if s.Python != "" {
		return fmt.Errorf("--python does not apply to --runtime %s", Name)
	}
	if (s.Endpoint == "") != (s.PlainEndpoint == "") {
		return errors.New("--endpoint and --plain-endpoint go together: the MTP arm's server and the plain arm's")
	}
	if s.Endpoint != "" {
		if s.Binary != "" || s.Head != "" || len(s.RuntimeArgs) > 0 {
			return errors.New("--endpoint measures servers you run: --llama-server, --head and arguments after -- do not apply")
		}
		return nil
	}
	if s.Model == "" {
		return errors.New("give the model: --model FILE.gguf (the trunk, or the bundled/grafted file)")
	}
	for _, a := range s.RuntimeArgs {
		name, _, _ := strings.Cut(a, "=")
		for _, r := range reserved {
			if name == r {
				return fmt.Errorf("%s after -- is bench's to set (it starts llama-server once per arm with its own %s)", a, name)
			}
		}
	}
	for _, f := range []struct{ flag, path string }{{"--model", s.Model}, {"--head", s.Head}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
	}
	return nil
}

func (*runtime) Claims(s runtimes.Setup) bool {
	return strings.HasSuffix(strings.ToLower(s.Model), ".gguf")
}

// HeadCount is the nextn_predict_layers the head's (or the bundled model's) GGUF declares.
func (*runtime) HeadCount(s runtimes.Setup) int {
	path := s.Head
	if path == "" {
		path = s.Model
	}
	f, _, err := gguf.Open(path)
	if err != nil {
		return 0
	}
	n, _ := f.Uint(f.String("general.architecture") + ".nextn_predict_layers")
	return int(n)
}

// binary finds llama-server and checks, once per path, that it knows draft-mtp.
func (rt *runtime) binary(s runtimes.Setup) (string, error) {
	path := s.Binary
	if path == "" {
		p, err := exec.LookPath(Binary)
		if err != nil {
			return "", fmt.Errorf("%s is not on PATH: %s", Binary, install)
		}
		path = p
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err, ok := rt.checked[path]; ok {
		return path, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--help")
	cmd.Env = append(os.Environ(), libraryPath(path))
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && len(out) == 0:
		err = fmt.Errorf("%s does not run (%v): %s", path, err, install)
	case !bytes.Contains(out, []byte("draft-mtp")):
		err = fmt.Errorf("%s is too old: its --help names no `--spec-type draft-mtp`; %s", path, install)
	default:
		err = nil
	}
	rt.checked[path] = err
	return path, err
}

// libraryPath lets a llama-server find the shared libraries built beside it (as llama.cpp's release archives ship them).
func libraryPath(bin string) string {
	dir := filepath.Dir(bin)
	if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
		dir += string(os.PathListSeparator) + old
	}
	return "LD_LIBRARY_PATH=" + dir
}

func (rt *runtime) Start(ctx context.Context, s runtimes.Setup, a runtimes.Arm) (runtimes.Session, error) {
	if s.Endpoint != "" {
		url := s.PlainEndpoint
		if a.MTP {
			url = s.Endpoint
		}
		return attach(ctx, strings.TrimRight(url, "/"), s.Concurrency)
	}
	bin, err := rt.binary(s)
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-m", s.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--metrics"}
	if s.Concurrency > 1 && !hasArg(s.RuntimeArgs, "-np", "--parallel") {
		args = append(args, "-np", strconv.Itoa(s.Concurrency))
	}
	if a.MTP {
		if s.Head != "" {
			args = append(args, "-md", s.Head)
		}
		args = append(args, "--spec-type", "draft-mtp", "--spec-draft-n-max", strconv.Itoa(a.DraftTokens))
	}
	args = append(args, s.RuntimeArgs...)
	log := ""
	if s.Dir != "" {
		log = filepath.Join(s.Dir, fmt.Sprintf("llama-server-%s-%d.log", strings.NewReplacer("(", "-", ")", "").Replace(a.String()), port))
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := proc.Serve(ctx, Binary, bin, args, []string{libraryPath(bin)}, log, base+"/health", HealthTimeout)
	if err != nil {
		return nil, err
	}
	sess := &session{base: base, p: p, client: &http.Client{Timeout: RequestTimeout}, perRequestMetrics: s.Concurrency <= 1}
	if err := sess.readVersion(ctx); err != nil {
		p.Stop(proc.StopGrace)
		return nil, p.Explain(err)
	}
	return sess, nil
}

func hasArg(args []string, names ...string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		for _, n := range names {
			if name == n {
				return true
			}
		}
	}
	return false
}

// attach measures a server the user runs.
func attach(ctx context.Context, base string, concurrency int) (*session, error) {
	sess := &session{base: base, client: &http.Client{Timeout: RequestTimeout}, perRequestMetrics: concurrency <= 1}
	if err := sess.readVersion(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	return sess, nil
}

type session struct {
	base              string
	p                 *proc.Process // nil for an endpoint
	client            *http.Client
	version           string
	perRequestMetrics bool // one request at a time: the /metrics difference is the request's
}

// readVersion reads /props build_info; the vendored build of llama-cpp-python says "b0-unknown".
func (s *session) readVersion(ctx context.Context) error {
	var props struct {
		BuildInfo string `json:"build_info"`
	}
	if err := s.getJSON(ctx, "/props", &props); err != nil {
		return err
	}
	s.version = props.BuildInfo
	if s.version == "" || strings.Contains(s.version, "unknown") && strings.HasPrefix(s.version, "b0") {
		s.version = "unknown"
	}
	return nil
}

func (s *session) Version() string { return s.version }

func (s *session) PeakRSS() (int64, bool) {
	if s.p == nil {
		return 0, false
	}
	return s.p.PeakRSS()
}

func (s *session) Close() error {
	if s.p == nil {
		return nil
	}
	return s.p.Stop(proc.StopGrace)
}

func (s *session) getJSON(ctx context.Context, path string, out any) error {
	return s.call(ctx, http.MethodGet, path, nil, out)
}

func (s *session) postJSON(ctx context.Context, path string, in, out any) error {
	return s.call(ctx, http.MethodPost, path, in, out)
}

// call sends one request (a JSON body when in is not nil) and decodes a 200's JSON answer into out.
func (s *session) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	return json.Unmarshal(raw, out)
}

// Timings is the `timings` object of a llama-server response. DraftN and
// DraftNAccepted are nil when the server left them out (nothing drafted).
type Timings struct {
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             *int    `json:"draft_n"`
	DraftNAccepted     *int    `json:"draft_n_accepted"`
}

type completion struct {
	Content         string  `json:"content"`
	Tokens          []int   `json:"tokens"`
	TokensEvaluated int     `json:"tokens_evaluated"`
	Timings         Timings `json:"timings"`
}

// CompletionRequest is the /completion body bench sends: the prompt cache off
// (every arm processes the whole prompt), the token ids returned.
func CompletionRequest(prompt string, r runtimes.Request) map[string]any {
	body := map[string]any{"prompt": prompt, "n_predict": r.MaxTokens, "seed": r.Seed, "cache_prompt": false, "return_tokens": true}
	if r.Greedy {
		body["temperature"] = 0
		body["top_k"] = 1
	}
	return body
}

func (s *session) Generate(ctx context.Context, r runtimes.Request) (runtimes.Result, error) {
	res, err := s.generate(ctx, r)
	if err != nil && s.p != nil {
		err = s.p.Explain(err)
	}
	return res, err
}

func (s *session) generate(ctx context.Context, r runtimes.Request) (runtimes.Result, error) {
	prompt := r.Prompt
	if r.Messages != nil {
		var t struct {
			Prompt string `json:"prompt"`
		}
		if err := s.postJSON(ctx, "/apply-template", map[string]any{"messages": r.Messages}, &t); err != nil {
			return runtimes.Result{}, fmt.Errorf("the chat prompt through the model's chat template: %w", err)
		}
		prompt = t.Prompt
	}
	var before metrics
	if s.perRequestMetrics {
		before, _ = s.metrics(ctx)
	}
	var c completion
	if err := s.postJSON(ctx, "/completion", CompletionRequest(prompt, r), &c); err != nil {
		return runtimes.Result{}, err
	}
	res := runtimes.Result{Text: c.Content, Tokens: c.Tokens, PromptTokens: c.TokensEvaluated, DecodeTokens: c.Timings.PredictedN,
		DecodePerSecond: c.Timings.PredictedPerSecond, TimeToFirstToken: time.Duration(c.Timings.PromptMS * float64(time.Millisecond))}
	if c.Timings.DraftN != nil {
		res.Counted, res.Drafted = true, *c.Timings.DraftN
		if c.Timings.DraftNAccepted != nil {
			res.Accepted = *c.Timings.DraftNAccepted
		}
	}
	if s.perRequestMetrics && before.ok {
		if after, err := s.metrics(ctx); err == nil && after.ok {
			d := after.minus(before)
			// The difference is this request's only if it counts what timings counted (no one else's traffic).
			if d.draftTokens == res.Drafted && d.accepted == res.Accepted {
				res.VerifySteps = d.drafts
				if res.Drafted > 0 {
					res.AcceptedPerPos = d.perPos
				}
			}
		}
	}
	return res, nil
}

// metrics are llama-server's spec-decode counters (with --metrics).
type metrics struct {
	ok                            bool
	draftTokens, accepted, drafts int
	perPos                        []int
}

func (a metrics) minus(b metrics) metrics {
	d := metrics{ok: true, draftTokens: a.draftTokens - b.draftTokens, accepted: a.accepted - b.accepted, drafts: a.drafts - b.drafts}
	for i, v := range a.perPos {
		if i < len(b.perPos) {
			v -= b.perPos[i]
		}
		d.perPos = append(d.perPos, v)
	}
	return d
}

func (s *session) metrics(ctx context.Context) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return metrics{}, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return metrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // a user's server without --metrics
		io.Copy(io.Discard, resp.Body)
		return metrics{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// ParseMetrics reads the spec-decode counters of llama-server's Prometheus text.
func ParseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		v := int(f)
		switch {
		case name == "llamacpp:spec_decode_num_draft_tokens_total":
			m.draftTokens, seen = v, seen+1
		case name == "llamacpp:spec_decode_num_accepted_tokens_total":
			m.accepted, seen = v, seen+1
		case name == "llamacpp:spec_decode_num_drafts_total":
			m.drafts, seen = v, seen+1
		case strings.HasPrefix(name, `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="`):
			pos, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="`), `"}`))
			if err != nil || pos < 0 || pos > 1<<10 {
				continue
			}
			for len(m.perPos) <= pos {
				m.perPos = append(m.perPos, 0)
			}
			m.perPos[pos] = v
		}
	}
	m.ok = seen == 3
	return m, sc.Err()
}
