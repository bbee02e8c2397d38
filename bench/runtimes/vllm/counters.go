package vllm

import (
	"fmt"
	"strconv"
)

// The Prometheus series vLLM's OpenAI server exports (vllm/v1/metrics/loggers.py,
// vllm/v1/spec_decode/metrics.py), summed over their label sets (engine,
// model_name). The spec-decode series exist only on a server started with a
// speculative config.
const (
	metricDrafts         = "vllm:spec_decode_num_drafts_total"
	metricDraftTokens    = "vllm:spec_decode_num_draft_tokens_total"
	metricAccepted       = "vllm:spec_decode_num_accepted_tokens_total"
	metricAcceptedPerPos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
	metricPromptTokens   = "vllm:prompt_tokens_total"
	metricGenTokens      = "vllm:generation_tokens_total"
	metricTTFTSum        = "vllm:time_to_first_token_seconds_sum"
	metricDecodeSum      = "vllm:request_decode_time_seconds_sum"
	metricDecodeCount    = "vllm:request_decode_time_seconds_count"
)

// counters is one reading of the server's cumulative counters.
type counters struct {
	Spec             bool // the spec-decode series are present
	Drafts           float64
	DraftTokens      float64
	Accepted         float64
	AcceptedPerPos   []float64 // index = the position label
	PromptTokens     float64
	GenerationTokens float64
	TTFTSeconds      float64 // sum over requests
	DecodeSeconds    float64 // sum over finished requests
	Finished         float64 // requests whose decode time was recorded
}

// readCounters picks the series bench reads out of a /metrics page.
func readCounters(samples []sample) (counters, error) {
	var c counters
	for _, s := range samples {
		switch s.Name {
		case metricDrafts:
			c.Spec = true
			c.Drafts += s.Value
		case metricDraftTokens:
			c.Spec = true
			c.DraftTokens += s.Value
		case metricAccepted:
			c.Spec = true
			c.Accepted += s.Value
		case metricAcceptedPerPos:
			p, err := strconv.Atoi(s.Labels["position"])
			if err != nil || p < 0 || p > 1024 {
				return counters{}, fmt.Errorf("%s: position label %q is not a draft position", s.Name, s.Labels["position"])
			}
			for len(c.AcceptedPerPos) <= p {
				c.AcceptedPerPos = append(c.AcceptedPerPos, 0)
			}
			c.AcceptedPerPos[p] += s.Value
		case metricPromptTokens:
			c.PromptTokens += s.Value
		case metricGenTokens:
			c.GenerationTokens += s.Value
		case metricTTFTSum:
			c.TTFTSeconds += s.Value
		case metricDecodeSum:
			c.DecodeSeconds += s.Value
		case metricDecodeCount:
			c.Finished += s.Value
		}
	}
	return c, nil
}

// sub is the change from before to c: what the server counted in between.
// A counter that went down means the server restarted (or is another server):
// an error, never a negative count.
func (c counters) sub(before counters) (counters, error) {
	d := counters{Spec: c.Spec}
	pairs := []struct {
		name      string
		out       *float64
		now, then float64
	}{
		{metricDrafts, &d.Drafts, c.Drafts, before.Drafts},
		{metricDraftTokens, &d.DraftTokens, c.DraftTokens, before.DraftTokens},
		{metricAccepted, &d.Accepted, c.Accepted, before.Accepted},
		{metricPromptTokens, &d.PromptTokens, c.PromptTokens, before.PromptTokens},
		{metricGenTokens, &d.GenerationTokens, c.GenerationTokens, before.GenerationTokens},
		{metricTTFTSum, &d.TTFTSeconds, c.TTFTSeconds, before.TTFTSeconds},
		{metricDecodeSum, &d.DecodeSeconds, c.DecodeSeconds, before.DecodeSeconds},
		{metricDecodeCount, &d.Finished, c.Finished, before.Finished},
	}
	for _, p := range pairs {
		if p.now < p.then {
			return counters{}, fmt.Errorf("%s went down from %v to %v: the server restarted between two readings", p.name, p.then, p.now)
		}
		*p.out = p.now - p.then
	}
	if c.Spec {
		d.AcceptedPerPos = make([]float64, len(c.AcceptedPerPos))
		for i, v := range c.AcceptedPerPos {
			var then float64
			if i < len(before.AcceptedPerPos) {
				then = before.AcceptedPerPos[i]
			}
			if v < then {
				return counters{}, fmt.Errorf("%s{position=%q} went down from %v to %v: the server restarted between two readings",
					metricAcceptedPerPos, strconv.Itoa(i), then, v)
			}
			d.AcceptedPerPos[i] = v - then
		}
	}
	return d, nil
}
