// Package fakellama is a stand-in for llama-server in tests: a test binary
// whose TestMain calls Main when Env is set serves /health, /props,
// /completion and /metrics as llama-server 0.3.36 does (draft_n and
// draft_n_accepted absent when nothing was drafted; spec-decode counters per
// position), with the behaviour its --model file asks for, so that bench's
// schedule, parsing and process handling are tested without a model.
package fakellama

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Env, set to "1", makes a test binary act as llama-server.
const Env = "MTPCONV_FAKE_LLAMA_SERVER"

// Behaviour is the --model file's JSON.
type Behaviour struct {
	Accept     float64 `json:"accept"`      // fraction of drafts accepted
	NoDraft    bool    `json:"no_draft"`    // the MTP arm drafts nothing
	PlainNoise bool    `json:"plain_noise"` // the plain arm's answer differs between starts
	PlainTPS   float64 `json:"plain_tps,omitempty"`
	MTPTPS     float64 `json:"mtp_tps,omitempty"`
	DieAfter   int     `json:"die_after"` // exit 3 on this many-th completion (0: never)
	FailStart  bool    `json:"fail_start"`
	ArgsFile   string  `json:"args_file"` // where each start appends its command line, one per line
}

// Main serves until killed. It never returns.
func Main(args []string) {
	var model, port, spec string
	k := 3
	for i := 0; i < len(args); i++ {
		next := func() string { i++; return args[i] }
		switch args[i] {
		case "--help":
			fmt.Println("--spec-type [none|draft-simple|draft-mtp|...]")
			os.Exit(0)
		case "-m":
			model = next()
		case "--port":
			port = next()
		case "--spec-type":
			spec = next()
		case "--spec-draft-n-max":
			k, _ = strconv.Atoi(next())
		case "-md", "--host", "-np":
			next()
		}
	}
	b := Behaviour{PlainTPS: 10, MTPTPS: 10}
	raw, err := os.ReadFile(model)
	if err == nil {
		err = json.Unmarshal(raw, &b)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "llama_model_load: error loading model:", err)
		os.Exit(1)
	}
	if b.ArgsFile != "" {
		f, err := os.OpenFile(b.ArgsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintln(f, strings.Join(args, " "))
			f.Close()
		}
	}
	mtp := spec == "draft-mtp"
	if b.FailStart && mtp {
		fmt.Fprintln(os.Stderr, "common_speculative_init: model doesn't contain MTP layers")
		os.Exit(1)
	}
	var mu sync.Mutex
	var done, draftTokens, accepted, drafts int
	perPos := make([]int, k)
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	http.HandleFunc("/props", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"build_info":"b0-unknown"}`) })
	http.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter\nllamacpp:spec_decode_num_draft_tokens_total %d\n", draftTokens)
		fmt.Fprintf(w, "llamacpp:spec_decode_num_accepted_tokens_total %d\nllamacpp:spec_decode_num_drafts_total %d\n", accepted, drafts)
		for i, v := range perPos {
			fmt.Fprintf(w, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"%d\"} %d\n", i, v)
		}
	})
	http.HandleFunc("/completion", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt   string `json:"prompt"`
			NPredict int    `json:"n_predict"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		defer mu.Unlock()
		done++
		if b.DieAfter > 0 && done >= b.DieAfter {
			fmt.Fprintln(os.Stderr, "GGML_ASSERT(n_tokens <= n_batch) failed")
			os.Exit(3)
		}
		var words []string
		var ids []int
		for i := range req.NPredict {
			id := (len(req.Prompt)*31 + i*7) % 300
			if !mtp && b.PlainNoise && i == req.NPredict/2 {
				id = (id + os.Getpid()) % 300
			}
			ids = append(ids, id)
			words = append(words, fmt.Sprintf("w%d", id))
		}
		timings := map[string]any{"prompt_n": len(req.Prompt), "prompt_ms": 1.5, "predicted_n": req.NPredict,
			"predicted_ms": 1000 * float64(req.NPredict) / b.PlainTPS, "predicted_per_second": b.PlainTPS}
		if mtp {
			timings["predicted_per_second"] = b.MTPTPS
			if !b.NoDraft {
				steps := max(1, req.NPredict/(k+1))
				d := steps * k
				a := int(b.Accept * float64(d))
				timings["draft_n"], timings["draft_n_accepted"] = d, a
				draftTokens, accepted, drafts = draftTokens+d, accepted+a, drafts+steps
				for i, left := 0, a; i < k && left > 0; i++ {
					n := min(left, steps)
					perPos[i] += n
					left -= n
				}
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"content": strings.Join(words, " "), "tokens": ids,
			"tokens_evaluated": len(req.Prompt), "timings": timings})
	})
	fmt.Fprintln(os.Stderr, "main: server is listening on http://127.0.0.1:"+port)
	err = http.ListenAndServe("127.0.0.1:"+port, nil)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// Model writes a --model file with behaviour b (named .gguf, as bench infers llama.cpp from it).
func Model(dir string, b Behaviour) (string, error) {
	raw, _ := json.Marshal(b)
	p := dir + "/fake.gguf"
	return p, os.WriteFile(p, raw, 0o644)
}
