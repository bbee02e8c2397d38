package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// RopeScaling is a config's RoPE scaling as the reference converters read
// it: rope_parameters when the config has it, else rope_scaling (per
// attention kind, the full-attention entry). DecodeConfig parses both keys
// for every family and refuses a malformed one by name, so that no family
// drops a scaling or writes a factor the runtimes cannot use.
type RopeScaling struct {
	// Key is where it was read: rope_scaling, rope_parameters or
	// rope_parameters.full_attention.
	Key string
	// Type is rope_type (or the older type), lower-case; "" when neither is set.
	Type string
	// numbers are its numeric members (ropeNumbers) that are set.
	numbers map[string]float64
}

// Number is the member key (one of ropeNumbers), or def when it is absent or null.
func (r *RopeScaling) Number(key string, def float64) float64 {
	if v, ok := r.numbers[key]; ok {
		return v
	}
	return def
}

// ropeNumbers are the members the converters and runtimes read as numbers
// (transformers' rope_config_validation, TextModel.set_gguf_parameters,
// DeepseekV2Model's mscale_all_dim, the llama3 factors).
var ropeNumbers = []string{"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor",
	"beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "attn_factor", "extrapolation_factor",
	"rope_theta", "partial_rotary_factor"}

// ropeNeedsFactor are the scaling types that mean nothing without a factor
// (the converter writes their scaling only with one: it would be dropped).
var ropeNeedsFactor = []string{"linear", "yarn", "dynamic"}

// parseRopeScalings reads rope_parameters and rope_scaling from the text
// configuration's keys (the root's with text_config's over them, as the
// converter merges them) and returns the one the converter reads.
func parseRopeScalings(keys map[string]json.RawMessage) (*RopeScaling, error) {
	var read *RopeScaling
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		r, err := parseRopeScaling(key, keys[key])
		if err != nil {
			return nil, err
		}
		if r != nil {
			read = r // rope_parameters over rope_scaling
		}
	}
	return read, nil
}

// parseRopeScaling refuses a rope scaling under key that is not null or
// an object, whose type is not a string, whose numeric members are not
// numbers, whose factor is not positive, or that has a type needing a
// factor without one. Per-attention-kind entries (full_attention,
// sliding_attention) are checked alike; the full-attention one is returned.
func parseRopeScaling(key string, raw json.RawMessage) (*RopeScaling, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, fmt.Errorf("%s is %s: it must be an object (rope_type, factor, ...) or null", key, clip(raw))
	}
	var full *RopeScaling
	for _, kind := range []string{"sliding_attention", "full_attention"} {
		if v, ok := m[kind]; ok {
			r, err := parseRopeScaling(key+"."+kind, v)
			if err != nil {
				return nil, err
			}
			full = r
		}
	}
	if full != nil {
		return full, nil
	}
	r := &RopeScaling{Key: key, numbers: map[string]float64{}}
	for _, k := range []string{"type", "rope_type"} { // rope_type over type
		v := bytes.TrimSpace(m[k])
		if len(v) == 0 || bytes.Equal(v, []byte("null")) {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, fmt.Errorf("%s.%s is %s: it must be a string", key, k, clip(v))
		}
		r.Type = strings.ToLower(s)
	}
	for _, k := range ropeNumbers {
		v := bytes.TrimSpace(m[k])
		if len(v) == 0 || bytes.Equal(v, []byte("null")) {
			continue
		}
		var n json.Number
		if v[0] == '"' || json.Unmarshal(v, &n) != nil {
			return nil, fmt.Errorf("%s.%s is %s: it must be a number", key, k, clip(v))
		}
		x, err := n.Float64()
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, fmt.Errorf("%s.%s is %s: it must be a finite number", key, k, clip(v))
		}
		r.numbers[k] = x
	}
	if f, ok := r.numbers["factor"]; ok && f <= 0 {
		return nil, fmt.Errorf("%s.factor is %v: it must be a positive number", key, f)
	}
	if _, ok := r.numbers["factor"]; !ok && slices.Contains(ropeNeedsFactor, r.Type) {
		return nil, fmt.Errorf("%s.rope_type is %q without a factor: the converters drop such a scaling", key, r.Type)
	}
	if o, ok := r.numbers["original_max_position_embeddings"]; ok && (o <= 0 || o != math.Trunc(o)) {
		return nil, fmt.Errorf("%s.original_max_position_embeddings is %v: it must be a positive whole number", key, o)
	}
	return r, nil
}

// clip is a JSON value for a message, at most 40 bytes of it.
func clip(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}
