// Package computed holds the tensors a reference converter derives from a
// checkpoint's config instead of reading them from its weights: llama.cpp's
// rope_freqs for llama3 RoPE scaling (convert_hf_to_gguf.py's
// generate_extra_tensors). A plan names such a tensor as a source by its
// recipe (Prefix, the kind, every value it is computed from), so the plan
// stays data: the family decides the recipe, and the runner, verify --src
// and --resume's source check materialize it the same way (Attach) and read
// it as they read a stored source tensor.
package computed

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Prefix starts the name of every computed source tensor.
const Prefix = "mtpconv.computed."

// Shard is what messages call the place of a computed tensor.
const Shard = "(computed from config.json)"

// Llama3RopeFactors is llama3 RoPE scaling's per-frequency factors as the
// reference converter computes them (Llama-3's, and Step35Model's
// generate_extra_tensors: the factors of the first RotaryDim/2 frequencies
// of Base, padded with 1 to HeadDim/2, float32).
type Llama3RopeFactors struct {
	Base                          float64
	HeadDim, RotaryDim            int
	Factor, LowFreq, HighFreq     float64
	OriginalMaxPositionEmbeddings int
}

const llama3Kind = "llama3_rope_factors"

// Name is the tensor's source name: the recipe with every value, written
// so that parsing gives the same float64 bits back.
func (r Llama3RopeFactors) Name() string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return fmt.Sprintf("%s%s(base=%s,head_dim=%d,rotary_dim=%d,factor=%s,low_freq_factor=%s,high_freq_factor=%s,original_max_position_embeddings=%d)",
		Prefix, llama3Kind, f(r.Base), r.HeadDim, r.RotaryDim, f(r.Factor), f(r.LowFreq), f(r.HighFreq), r.OriginalMaxPositionEmbeddings)
}

// Check refuses values the converter's arithmetic cannot take (it would
// divide by zero, or index past head_dim).
func (r Llama3RopeFactors) Check() error {
	switch {
	case !(r.Base > 1) || math.IsInf(r.Base, 0):
		return fmt.Errorf("llama3 RoPE factors: base %v is not a finite number above 1", r.Base)
	case r.HeadDim <= 0 || r.HeadDim%2 != 0 || r.HeadDim > 1<<16:
		return fmt.Errorf("llama3 RoPE factors: head_dim %d is not an even size", r.HeadDim)
	case r.RotaryDim <= 0 || r.RotaryDim%2 != 0 || r.RotaryDim > r.HeadDim:
		return fmt.Errorf("llama3 RoPE factors: %d rotary dimensions are not an even count up to head_dim %d", r.RotaryDim, r.HeadDim)
	case !(r.Factor > 0) || math.IsInf(r.Factor, 0):
		return fmt.Errorf("llama3 RoPE factors: factor %v is not a positive number", r.Factor)
	case !(r.LowFreq > 0) || !(r.HighFreq > r.LowFreq) || math.IsInf(r.HighFreq, 0):
		return fmt.Errorf("llama3 RoPE factors: low_freq_factor %v and high_freq_factor %v are not 0 < low < high", r.LowFreq, r.HighFreq)
	case r.OriginalMaxPositionEmbeddings <= 0:
		return fmt.Errorf("llama3 RoPE factors: original_max_position_embeddings %d is not positive", r.OriginalMaxPositionEmbeddings)
	}
	return nil
}

// Values computes the factors as the converter does: the frequencies
// 1 / base^(i/rotary_dim) for even i in float32 (torch.arange / rotary_dim,
// base ** that, its reciprocal), then per frequency in float64 its
// wavelength 2π/f against old_context/high_freq_factor and
// old_context/low_freq_factor (1, factor, or the smooth blend between),
// stored as float32. The power is the correctly rounded float32 one;
// torch's (Sleef's or libm's) is within one ulp of it and machine-dependent,
// and equal to it for the releases' values and the fixtures' (the reference
// records check the bytes).
func (r Llama3RopeFactors) Values() []float32 {
	base := float64(float32(r.Base))
	old := float64(r.OriginalMaxPositionEmbeddings)
	lowWavelen, highWavelen := old/r.LowFreq, old/r.HighFreq
	out := make([]float32, 0, r.HeadDim/2)
	for i := 0; i < r.RotaryDim; i += 2 {
		exp := float32(i) / float32(r.RotaryDim)
		freq := float32(1) / float32(math.Pow(base, float64(exp)))
		wavelen := 2 * math.Pi / float64(freq)
		switch {
		case wavelen < highWavelen:
			out = append(out, 1)
		case wavelen > lowWavelen:
			out = append(out, float32(r.Factor))
		default:
			smooth := (old/wavelen - r.LowFreq) / (r.HighFreq - r.LowFreq)
			out = append(out, float32(1/((1-smooth)/r.Factor+smooth)))
		}
	}
	for len(out) < r.HeadDim/2 {
		out = append(out, 1)
	}
	return out
}

// ProportionalRopeFactors is Gemma 4's "proportional" RoPE as the reference
// converter writes it for llama.cpp's NeoX rotation (Gemma4Model's
// generate_extra_tensors): the first Rotated of the HeadDim/2 frequencies
// kept (factor 1), the others made inert (factor 1e30), float32.
type ProportionalRopeFactors struct {
	HeadDim, Rotated int
}

const proportionalKind = "proportional_rope_factors"

// Name is the tensor's source name.
func (r ProportionalRopeFactors) Name() string {
	return fmt.Sprintf("%s%s(head_dim=%d,rotated=%d)", Prefix, proportionalKind, r.HeadDim, r.Rotated)
}

// Check refuses a head size or rotated count the converter cannot take.
func (r ProportionalRopeFactors) Check() error {
	if r.HeadDim <= 0 || r.HeadDim%2 != 0 || r.HeadDim > 1<<16 || r.Rotated < 0 || r.Rotated > r.HeadDim/2 {
		return fmt.Errorf("proportional RoPE factors: %d rotated of head_dim %d's frequencies", r.Rotated, r.HeadDim)
	}
	return nil
}

// Values is the factors: 1 for the rotated frequencies, 1e30 after them.
func (r ProportionalRopeFactors) Values() []float32 {
	out := make([]float32, r.HeadDim/2)
	for i := range out {
		out[i] = 1
		if i >= r.Rotated {
			out[i] = 1e30
		}
	}
	return out
}

// parseProportional reads a ProportionalRopeFactors name back.
func parseProportional(args string) (ProportionalRopeFactors, error) {
	var r ProportionalRopeFactors
	if _, err := fmt.Sscanf(args, "head_dim=%d,rotated=%d", &r.HeadDim, &r.Rotated); err != nil {
		return r, err
	}
	return r, r.Check()
}

// parseLlama3 reads a Llama3RopeFactors name back.
func parseLlama3(args string) (Llama3RopeFactors, error) {
	var r Llama3RopeFactors
	fields := map[string]bool{}
	for _, kv := range strings.Split(args, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || fields[k] {
			return r, fmt.Errorf("%q is not key=value, once", kv)
		}
		fields[k] = true
		var err error
		switch k {
		case "base":
			r.Base, err = strconv.ParseFloat(v, 64)
		case "head_dim":
			r.HeadDim, err = strconv.Atoi(v)
		case "rotary_dim":
			r.RotaryDim, err = strconv.Atoi(v)
		case "factor":
			r.Factor, err = strconv.ParseFloat(v, 64)
		case "low_freq_factor":
			r.LowFreq, err = strconv.ParseFloat(v, 64)
		case "high_freq_factor":
			r.HighFreq, err = strconv.ParseFloat(v, 64)
		case "original_max_position_embeddings":
			r.OriginalMaxPositionEmbeddings, err = strconv.Atoi(v)
		default:
			return r, fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return r, fmt.Errorf("%s: %w", k, err)
		}
	}
	if len(fields) != 7 {
		return r, fmt.Errorf("%d of the 7 values", len(fields))
	}
	return r, r.Check()
}

// Tensor computes the tensor a computed source name describes: its dtype,
// shape and bytes as stored (little-endian float32).
func Tensor(name string) (st.DType, []int64, []byte, error) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", nil, nil, fmt.Errorf("%s is not a computed tensor", name)
	}
	kind, args, ok := strings.Cut(rest, "(")
	args, closed := strings.CutSuffix(args, ")")
	if !ok || !closed {
		return "", nil, nil, fmt.Errorf("computed tensor %s: not kind(values)", name)
	}
	var r interface {
		Name() string
		Values() []float32
	}
	var err error
	switch kind {
	case llama3Kind:
		r, err = parseLlama3(args)
	case proportionalKind:
		r, err = parseProportional(args)
	default:
		return "", nil, nil, fmt.Errorf("computed tensor %s: unknown kind %q", name, kind)
	}
	if err != nil {
		return "", nil, nil, fmt.Errorf("computed tensor %s: %w", name, err)
	}
	if r.Name() != name {
		return "", nil, nil, fmt.Errorf("computed tensor %s: not written as mtpconv writes it (%s)", name, r.Name())
	}
	vals := r.Values()
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return st.F32, []int64{int64(len(vals))}, data, nil
}

// Attach adds to ck every computed tensor among names it lacks, computed
// from its name (the others are left to the checkpoint).
func Attach(ck *st.Checkpoint, names []string) error {
	for _, n := range names {
		if !strings.HasPrefix(n, Prefix) {
			continue
		}
		if _, ok := ck.Tensors[n]; ok {
			continue
		}
		dt, shape, data, err := Tensor(n)
		if err != nil {
			return err
		}
		if err := ck.AddMemoryTensor(n, Shard, dt, shape, data); err != nil {
			return err
		}
	}
	return nil
}

// Is reports whether name is a computed source.
func Is(name string) bool { return strings.HasPrefix(name, Prefix) }
