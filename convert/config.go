// Package convert is the conversion library: it reads a checkpoint's
// inventory into a Model (through the family that recognises it, one file
// per family), has a target plan the export as pure data, executes plans
// (Run) and owns a whole export (Export: dry-run, atomic output, resume,
// manifest, card). File byte layouts belong to formats/*, kernels to quant.
package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// ConfigFile is the Hugging Face model configuration.
const ConfigFile = "config.json"

// Config is the text-model configuration, read from text_config when the
// checkpoint nests it (Qwen3.5/3.6) and from the root otherwise (Qwen3-Next).
type Config struct {
	ModelType     string   // top-level model_type
	TextModelType string   // text_config.model_type, or the top-level one
	Architectures []string // top-level
	Nested        bool     // text_config present

	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	LayerTypes            []string `json:"layer_types"`
	FullAttentionInterval int      `json:"full_attention_interval"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	PartialRotaryFactor   float64  `json:"partial_rotary_factor"`
	RopeTheta             float64  `json:"rope_theta"`
	RopeParameters        *struct {
		RopeTheta           float64 `json:"rope_theta"`
		PartialRotaryFactor float64 `json:"partial_rotary_factor"`
	} `json:"rope_parameters"`
	LinearNumKeyHeads     int     `json:"linear_num_key_heads"`
	LinearNumValueHeads   int     `json:"linear_num_value_heads"`
	LinearKeyHeadDim      int     `json:"linear_key_head_dim"`
	LinearValueHeadDim    int     `json:"linear_value_head_dim"`
	LinearConvKernelDim   int     `json:"linear_conv_kernel_dim"`
	NumExperts            int     `json:"num_experts"`
	NumExpertsPerTok      int     `json:"num_experts_per_tok"`
	IntermediateSize      int     `json:"intermediate_size"` // a dense MLP's
	MoeIntermediateSize   int     `json:"moe_intermediate_size"`
	SharedExpertIntermed  int     `json:"shared_expert_intermediate_size"`
	NormTopkProb          *bool   `json:"norm_topk_prob"`
	MTPNumHiddenLayers    *int    `json:"mtp_num_hidden_layers"`
	NumNextnPredictLayers *int    `json:"num_nextn_predict_layers"`
	VocabSize             int     `json:"vocab_size"`
	RMSNormEps            float64 `json:"rms_norm_eps"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	AttnOutputGate        *bool   `json:"attn_output_gate"`
	DType                 string  `json:"dtype"`
	TorchDType            string  `json:"torch_dtype"`
	QuantizationConfig    *struct {
		QuantMethod         string   `json:"quant_method"`
		Fmt                 string   `json:"fmt"`
		WeightBlockSize     []int64  `json:"weight_block_size"`
		ModulesToNotConvert []string `json:"modules_to_not_convert"`
	} `json:"quantization_config"`

	// Raw is the whole config.json as read, for writers that copy it.
	Raw []byte

	// The keys rope_theta and partial_rotary_factor were read from, for messages.
	ropeThetaKey, rotaryKey string
}

// MaxConfigSize bounds the size of a config.json this tool reads.
const MaxConfigSize = 16 << 20

// LoadConfig reads and validates config.json of a source.
func LoadConfig(src source.Source) (*Config, error) {
	raw, err := st.ReadSmallFile(src, ConfigFile, MaxConfigSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %s is missing", src.Name(), ConfigFile)
		}
		return nil, fmt.Errorf("%s: %s: %w", src.Name(), ConfigFile, err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", src.Name(), ConfigFile, err)
	}
	return cfg, nil
}

// ParseConfig decodes config.json, preferring text_config when present.
func ParseConfig(raw []byte) (*Config, error) {
	var top struct {
		ModelType     string          `json:"model_type"`
		Architectures []string        `json:"architectures"`
		TextConfig    json.RawMessage `json:"text_config"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	cfg := &Config{ModelType: top.ModelType, Architectures: top.Architectures, Raw: raw}
	body := raw
	if len(top.TextConfig) > 0 && !bytes.Equal(bytes.TrimSpace(top.TextConfig), []byte("null")) {
		cfg.Nested = true
		body = top.TextConfig
	}
	if err := json.Unmarshal(body, cfg); err != nil {
		return nil, fmt.Errorf("invalid text configuration: %w", err)
	}
	if cfg.Nested && cfg.QuantizationConfig == nil {
		// The checkpoint's storage (FP8 releases) is declared at the top level.
		var q struct {
			Q json.RawMessage `json:"quantization_config"`
		}
		_ = json.Unmarshal(raw, &q) // raw decoded above
		if len(q.Q) > 0 {
			if err := json.Unmarshal(q.Q, &cfg.QuantizationConfig); err != nil {
				return nil, fmt.Errorf("invalid quantization_config: %w", err)
			}
		}
	}
	var inner struct {
		ModelType string `json:"model_type"`
	}
	_ = json.Unmarshal(body, &inner) // body decoded above, so this cannot fail
	cfg.TextModelType = inner.ModelType
	if cfg.TextModelType == "" {
		cfg.TextModelType = cfg.ModelType
	}
	cfg.applyDefaults(body)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.LayerTypes) == 0 {
		for i := 0; i < cfg.NumHiddenLayers; i++ {
			if (i+1)%cfg.FullAttentionInterval == 0 {
				cfg.LayerTypes = append(cfg.LayerTypes, FullAttention)
			} else {
				cfg.LayerTypes = append(cfg.LayerTypes, LinearAttention)
			}
		}
	}
	return cfg, nil
}

// Layer types as spelled in config.json.
const (
	FullAttention   = "full_attention"
	LinearAttention = "linear_attention"
)

func (c *Config) validate() error {
	positive := []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"vocab_size", c.VocabSize},
		{"linear_num_key_heads", c.LinearNumKeyHeads}, {"linear_num_value_heads", c.LinearNumValueHeads},
		{"linear_key_head_dim", c.LinearKeyHeadDim}, {"linear_value_head_dim", c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", c.LinearConvKernelDim},
		{"full_attention_interval", c.FullAttentionInterval},
	}
	if c.Dense() {
		positive = append(positive, struct {
			name string
			v    int
		}{"intermediate_size", c.IntermediateSize})
	} else {
		positive = append(positive, []struct {
			name string
			v    int
		}{{"num_experts", c.NumExperts}, {"num_experts_per_tok", c.NumExpertsPerTok},
			{"moe_intermediate_size", c.MoeIntermediateSize}, {"shared_expert_intermediate_size", c.SharedExpertIntermed}}...)
	}
	for _, p := range positive {
		// Bounds keep every product of dimensions far from int64 overflow.
		if p.v <= 0 || p.v > 1<<24 {
			return fmt.Errorf("%s is %d; it must be a positive integer below 2^24", p.name, p.v)
		}
	}
	if c.NumHiddenLayers > maxConfigLayers {
		return fmt.Errorf("num_hidden_layers is %d; this tool reads models of at most %d layers", c.NumHiddenLayers, maxConfigLayers)
	}
	if err := c.validateFloats(); err != nil {
		return err
	}
	if c.NumExpertsPerTok > c.NumExperts {
		return fmt.Errorf("num_experts_per_tok %d exceeds num_experts %d", c.NumExpertsPerTok, c.NumExperts)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fmt.Errorf("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if n := len(c.LayerTypes); n != 0 && n != c.NumHiddenLayers {
		return fmt.Errorf("layer_types has %d entries for %d layers", n, c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != FullAttention && t != LinearAttention {
			return fmt.Errorf("layer_types[%d] is %q", i, t)
		}
	}
	return nil
}

// ropeThetaDefault is transformers' rope_theta for these configurations
// when config.json gives none.
const ropeThetaDefault = 10000.0

// applyDefaults fills in what config.json leaves out, as the Hugging Face
// configuration classes do. Only absent (or null) keys take a default: an
// explicit 0 is a value, which validate refuses.
func (c *Config) applyDefaults(body []byte) {
	var keys, rope map[string]json.RawMessage
	_ = json.Unmarshal(body, &keys) // decoded into c already, so an object (or null)
	if c.RopeParameters != nil {
		_ = json.Unmarshal(keys["rope_parameters"], &rope)
	}
	has := func(m map[string]json.RawMessage, k string) bool {
		v, ok := m[k]
		return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
	}
	c.ropeThetaKey, c.rotaryKey = "rope_theta", "partial_rotary_factor"
	switch {
	case has(keys, "rope_theta"):
	case has(rope, "rope_theta"):
		c.RopeTheta, c.ropeThetaKey = c.RopeParameters.RopeTheta, "rope_parameters.rope_theta"
	default:
		c.RopeTheta = ropeThetaDefault
	}
	switch {
	case has(keys, "partial_rotary_factor"):
	case has(rope, "partial_rotary_factor"):
		c.PartialRotaryFactor, c.rotaryKey = c.RopeParameters.PartialRotaryFactor, "rope_parameters.partial_rotary_factor"
	default:
		c.PartialRotaryFactor, c.rotaryKey = 0.25, "partial_rotary_factor (by default)"
	}
	if !has(keys, "full_attention_interval") {
		c.FullAttentionInterval = 4
	}
	if !has(keys, "rms_norm_eps") {
		c.RMSNormEps = 1e-6
	}
	if !has(keys, "head_dim") && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
}

// validateFloats refuses the float values that would silently break an
// output: RoPE's inv_freq = theta^(-2i/d) needs theta > 0, RMSNorm divides by
// sqrt(mean + eps), and RoPE rotates pairs of the first rotary dimensions.
func (c *Config) validateFloats() error {
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x <= 0 }
	if bad(c.RopeTheta) {
		return fmt.Errorf("%s is %v; it must be a positive finite number", c.ropeThetaKey, c.RopeTheta)
	}
	if bad(c.RMSNormEps) {
		return fmt.Errorf("rms_norm_eps is %v; it must be a positive finite number", c.RMSNormEps)
	}
	if bad(c.PartialRotaryFactor) || c.PartialRotaryFactor > 1 {
		return fmt.Errorf("%s is %v; it must be in (0, 1]", c.rotaryKey, c.PartialRotaryFactor)
	}
	return nil
}

// checkRotary refuses a partial_rotary_factor that gives head_dim an odd
// or zero number of rotary dimensions (describing a model of a supported
// family checks it).
func (c *Config) checkRotary() error {
	if r := c.RotaryDim(); r < 2 || r%2 != 0 {
		return fmt.Errorf("%s %v of head_dim %d gives %d rotary dimensions; RoPE rotates pairs, so that must be even and at least 2", c.rotaryKey, c.PartialRotaryFactor, c.HeadDim, r)
	}
	return nil
}

// ConfigMTPDepth is the MTP depth the config declares, and whether it declares one.
func (c *Config) ConfigMTPDepth() (int, bool) {
	if c.MTPNumHiddenLayers != nil {
		return *c.MTPNumHiddenLayers, true
	}
	if c.NumNextnPredictLayers != nil {
		return *c.NumNextnPredictLayers, true
	}
	return 0, false
}

// Dense reports a dense MLP in every layer: no experts declared, an intermediate size instead.
func (c *Config) Dense() bool { return c.NumExperts == 0 && c.IntermediateSize > 0 }

// outputGate reports whether q_proj carries a sigmoid output gate per head (the default).
func (c *Config) outputGate() bool { return c.AttnOutputGate == nil || *c.AttnOutputGate }

// RotaryDim is the number of head dimensions RoPE rotates.
func (c *Config) RotaryDim() int { return int(float64(c.HeadDim) * c.PartialRotaryFactor) }
