// Package model describes a source checkpoint: config.json read by the
// family that recognises it (one file or two per family: qwen3_5_moe.go,
// qwen3_next.go, ...), the inventory checked for completeness against the
// family's Spec, tensor roles, expert storage, FP8 storage, and the Spec's
// per-target tables that the targets interpret. It holds no tensor data.
package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// ConfigFile is the Hugging Face model configuration.
const ConfigFile = "config.json"

// Config is the text-model configuration, read from text_config when the
// checkpoint nests it (Qwen3.5/3.6) and from the root otherwise (Qwen3-Next).
// Its fields are the keys families share; ParseConfig has the family of
// the config decode it (DecodeConfig) and validate it.
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

	// RopeScaling is the RoPE scaling the converters read (rope.go), nil without one.
	RopeScaling *RopeScaling

	// Raw is the whole config.json as read, for writers that copy it.
	Raw []byte

	// keys are the family's own config keys, decoded once by its parser
	// (SetKeys) and read with KeysOf: one typed struct per kind (a lineage's
	// and the family's own).
	keys []any

	family *Family // the family that parsed it

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

// Identity is what config.json says the model is, read before anything
// else so that the family, not a shared rule, validates the rest.
type Identity struct {
	ModelType     string   // top-level model_type
	TextModelType string   // text_config.model_type, or the top-level one
	Architectures []string // top-level
	// Keys are the config's key names, top level and text_config's, sorted:
	// what tells apart two families sharing a model_type by a key one of
	// them alone sets.
	Keys []string
}

// HasKey reports whether the config sets key (top level or in text_config).
func (id Identity) HasKey(key string) bool {
	_, ok := slices.BinarySearch(id.Keys, key)
	return ok
}

// ReadIdentity reads model_type (top level and text_config's), architectures and the key names.
func ReadIdentity(raw []byte) (Identity, error) {
	var top struct {
		ModelType     string          `json:"model_type"`
		Architectures []string        `json:"architectures"`
		TextConfig    json.RawMessage `json:"text_config"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return Identity{}, fmt.Errorf("invalid JSON: %w", err)
	}
	id := Identity{ModelType: top.ModelType, TextModelType: top.ModelType, Architectures: top.Architectures}
	var inner struct {
		ModelType string `json:"model_type"`
	}
	if len(top.TextConfig) > 0 && json.Unmarshal(top.TextConfig, &inner) == nil && inner.ModelType != "" {
		id.TextModelType = inner.ModelType
	}
	for _, obj := range []json.RawMessage{raw, top.TextConfig} {
		var keys map[string]json.RawMessage
		if len(obj) > 0 && json.Unmarshal(obj, &keys) == nil {
			for k := range keys {
				id.Keys = append(id.Keys, k)
			}
		}
	}
	slices.Sort(id.Keys)
	id.Keys = slices.Compact(id.Keys)
	return id, nil
}

// ParseConfig detects the family from config.json's architectures and
// model_type, then has the family decode and validate the rest.
func ParseConfig(raw []byte) (*Config, error) {
	id, err := ReadIdentity(raw)
	if err != nil {
		return nil, err
	}
	fam, err := DetectFamily(id)
	if err != nil {
		return nil, err
	}
	return fam.Parse(raw)
}

// Parse has the family decode and validate config.json, whatever its
// identity says, and records the family in the Config.
func (f *Family) Parse(raw []byte) (*Config, error) {
	cfg, err := f.ParseConfig(raw)
	if err == nil {
		cfg.family = f
	}
	return cfg, err
}

// ConfigDefaults are the values a family's configuration class gives keys
// config.json leaves out (absent or null; an explicit 0 is a value).
type ConfigDefaults struct {
	PartialRotaryFactor float64
	RMSNormEps          float64
	RopeTheta           float64
	// FullAttentionInterval, when set, is full_attention_interval's default.
	FullAttentionInterval int
}

// DecodeConfig decodes the keys every family shares (from text_config
// when the checkpoint nests it, the storage's quantization_config from the
// top level), filling absent keys from d. It validates nothing: the
// family does, with CheckPositive and the Config's checks.
func DecodeConfig(raw []byte, d ConfigDefaults) (*Config, error) {
	id, err := ReadIdentity(raw)
	if err != nil {
		return nil, err
	}
	var top struct {
		TextConfig json.RawMessage `json:"text_config"`
	}
	_ = json.Unmarshal(raw, &top) // raw decoded above
	cfg := &Config{ModelType: id.ModelType, TextModelType: id.TextModelType, Architectures: id.Architectures, Raw: raw}
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
	// The RoPE scaling, from the root's keys with text_config's over them.
	var keys, text map[string]json.RawMessage
	_ = json.Unmarshal(raw, &keys) // raw decoded above
	if cfg.Nested && json.Unmarshal(body, &text) == nil {
		if keys == nil {
			keys = map[string]json.RawMessage{}
		}
		for k, v := range text {
			keys[k] = v
		}
	}
	if cfg.RopeScaling, err = parseRopeScalings(keys); err != nil {
		return nil, err
	}
	cfg.applyDefaults(body, d)
	return cfg, nil
}

// SetKeys records k, config keys of the family's its parser decoded (a
// typed struct of the family's or its lineage's), for KeysOf; it replaces
// keys of the same type.
func SetKeys[T any](c *Config, k *T) {
	for i, x := range c.keys {
		if _, ok := x.(*T); ok {
			c.keys[i] = k
			return
		}
	}
	c.keys = append(c.keys, k)
}

// DecodeKeys decodes the text configuration into the family's typed keys
// T and records them for KeysOf: what a family parser does once per type.
func DecodeKeys[T any](c *Config) (*T, error) {
	k := new(T)
	if err := c.DecodeText(k); err != nil {
		return nil, err
	}
	SetKeys(c, k)
	return k, nil
}

// KeysOf is the config keys of type T the family's parser decoded once
// (SetKeys); a zero T for a config built in code, which has none.
func KeysOf[T any](c *Config) *T {
	for _, x := range c.keys {
		if k, ok := x.(*T); ok {
			return k
		}
	}
	return new(T)
}

// DecodeText decodes the text configuration (text_config when the
// checkpoint nests it, else the root) into v: a family's own keys.
func (c *Config) DecodeText(v any) error {
	body := c.Raw
	if c.Nested {
		var top struct {
			TextConfig json.RawMessage `json:"text_config"`
		}
		if err := json.Unmarshal(c.Raw, &top); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		body = top.TextConfig
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("invalid text configuration: %w", err)
	}
	return nil
}

// PositiveKey is a config key that must be a positive integer.
type PositiveKey struct {
	Name  string
	Value int
}

// CheckPositive refuses the first key that is not a positive integer
// below 2^24 (bounds keep every product of dimensions far from int64
// overflow).
func CheckPositive(keys ...PositiveKey) error {
	for _, p := range keys {
		if p.Value <= 0 || p.Value > 1<<24 {
			return fmt.Errorf("%s is %d; it must be a positive integer below 2^24", p.Name, p.Value)
		}
	}
	return nil
}

// Layers is a layer count, with the keys it is counted from for messages
// ("num_hidden_layers 4", "num_hidden_layers 4 + num_nextn_predict_layers 3").
type Layers struct {
	N    int
	From string
}

// TrunkLayers is num_hidden_layers: what most per-layer lists cover.
func (c *Config) TrunkLayers() Layers {
	return Layers{c.NumHiddenLayers, fmt.Sprintf("num_hidden_layers %d", c.NumHiddenLayers)}
}

// AllLayers is the trunk's and the declared MTP layers, for the per-layer
// lists that include the MTP layers' entries.
func (c *Config) AllLayers() Layers {
	n, _ := c.ConfigMTPDepth()
	return Layers{c.NumHiddenLayers + n, fmt.Sprintf("num_hidden_layers %d + %s %d", c.NumHiddenLayers, c.mtpDepthKey(), n)}
}

// LayerList is a per-layer list of config.json: its key and its length.
type LayerList struct {
	Key string
	Len int
}

// CheckLayerLists refuses the first per-layer list of config.json that does
// not hold one entry per layer of l: exactly l.N entries, or, for lists the
// family pads as its reference converter does (padded), at most l.N. Every
// family checks each per-layer list it reads with it, before indexing one
// by layer.
func CheckLayerLists(l Layers, padded bool, lists ...LayerList) error {
	for _, x := range lists {
		switch {
		case x.Len == l.N, padded && x.Len < l.N:
		case padded:
			return fmt.Errorf("%s has %d entries for %d layers (%s): at most one per layer", x.Key, x.Len, l.N, l.From)
		default:
			return fmt.Errorf("%s has %d entries for %d layers (%s): one per layer", x.Key, x.Len, l.N, l.From)
		}
	}
	return nil
}

// CommonKeys are the dimensions every family's config must give positive.
func (c *Config) CommonKeys() []PositiveKey {
	return []PositiveKey{
		{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"vocab_size", c.VocabSize},
	}
}

// MLPKeys are the keys of the feed-forward blocks: intermediate_size for a
// dense model, the expert counts and sizes for a MoE one.
func (c *Config) MLPKeys() []PositiveKey {
	if c.Dense() {
		return []PositiveKey{{"intermediate_size", c.IntermediateSize}}
	}
	return []PositiveKey{{"num_experts", c.NumExperts}, {"num_experts_per_tok", c.NumExpertsPerTok},
		{"moe_intermediate_size", c.MoeIntermediateSize}, {"shared_expert_intermediate_size", c.SharedExpertIntermed}}
}

// CheckCommon refuses what breaks any family: too many layers, float
// values RoPE and RMSNorm cannot use, more experts per token than experts,
// query heads that do not group over the key-value heads. Run it after
// CheckPositive.
func (c *Config) CheckCommon() error {
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
	return nil
}

// Layer types as spelled in config.json.
const (
	FullAttention   = "full_attention"
	LinearAttention = "linear_attention"
)

// applyDefaults fills in what config.json leaves out, as the family's
// Hugging Face configuration class does. Only absent (or null) keys take a
// default: an explicit 0 is a value, which the family's checks refuse.
func (c *Config) applyDefaults(body []byte, d ConfigDefaults) {
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
		c.RopeTheta = d.RopeTheta
	}
	switch {
	case has(keys, "partial_rotary_factor"):
	case has(rope, "partial_rotary_factor"):
		c.PartialRotaryFactor, c.rotaryKey = c.RopeParameters.PartialRotaryFactor, "rope_parameters.partial_rotary_factor"
	default:
		c.PartialRotaryFactor, c.rotaryKey = d.PartialRotaryFactor, "partial_rotary_factor (by default)"
	}
	if !has(keys, "full_attention_interval") {
		c.FullAttentionInterval = d.FullAttentionInterval
	}
	if !has(keys, "rms_norm_eps") {
		c.RMSNormEps = d.RMSNormEps
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

// CheckRotary refuses a partial_rotary_factor that gives head_dim an odd
// or zero number of rotary dimensions (describing a model of a supported
// family checks it).
func (c *Config) CheckRotary() error {
	if r := c.RotaryDim(); r < 2 || r%2 != 0 {
		return fmt.Errorf("%s %v of head_dim %d gives %d rotary dimensions; RoPE rotates pairs, so that must be even and at least 2", c.rotaryKey, c.PartialRotaryFactor, c.HeadDim, r)
	}
	return nil
}

// mtpDepthKey is the key the MTP depth is declared by, for messages.
func (c *Config) mtpDepthKey() string {
	if c.MTPNumHiddenLayers != nil {
		return "mtp_num_hidden_layers"
	}
	return "num_nextn_predict_layers"
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

// Hparams is config.json as llama.cpp's reference converter reads it:
// text_config's keys over the root's, numbers as json.Number.
type Hparams map[string]any

// Hparams reads the config's raw JSON as the reference converter does.
func (c *Config) Hparams() (Hparams, error) {
	var root map[string]any
	d := json.NewDecoder(bytes.NewReader(c.Raw))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	h := Hparams{}
	for k, v := range root {
		h[k] = v
	}
	if tc, ok := root["text_config"].(map[string]any); ok {
		for k, v := range tc {
			h[k] = v
		}
	}
	return h, nil
}

// Int is an integer key, if present.
func (h Hparams) Int(key string) (int64, bool) {
	n, ok := h[key].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// Dense reports a dense MLP in every layer: no experts declared, an intermediate size instead.
func (c *Config) Dense() bool { return c.NumExperts == 0 && c.IntermediateSize > 0 }

// ConfigValue is one configuration value, under the key that names it.
type ConfigValue struct {
	Key   string
	Value any
}

// HeadValues are the configuration values (defaults applied) that the MTP
// head's tensor shapes and computation depend on (its forward, see
// hybridForward): two configurations that agree on all of them take the
// same head. The MTP depth is not among them: config.json may leave it to
// the tensors (see ConfigMTPDepth).
func (c *Config) HeadValues() []ConfigValue {
	return []ConfigValue{
		{"model_type", c.ModelType}, {"text model_type", c.TextModelType},
		{"hidden_size", c.HiddenSize}, {"vocab_size", c.VocabSize},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"attn_output_gate", c.OutputGate()},
		{c.rotaryKey, c.PartialRotaryFactor}, {c.ropeThetaKey, c.RopeTheta}, {"rms_norm_eps", c.RMSNormEps},
		{"num_experts", c.NumExperts}, {"num_experts_per_tok", c.NumExpertsPerTok},
		{"norm_topk_prob", c.NormTopkProb == nil || *c.NormTopkProb},
		{"moe_intermediate_size", c.MoeIntermediateSize}, {"shared_expert_intermediate_size", c.SharedExpertIntermed},
		{"intermediate_size", c.IntermediateSize},
	}
}

// RotaryKey is the key partial_rotary_factor was read from, for messages.
func (c *Config) RotaryKey() string { return c.rotaryKey }

// OutputGate reports whether q_proj carries a sigmoid output gate per head (the default).
func (c *Config) OutputGate() bool { return c.AttnOutputGate == nil || *c.AttnOutputGate }

// RotaryDim is the number of head dimensions RoPE rotates.
func (c *Config) RotaryDim() int { return int(float64(c.HeadDim) * c.PartialRotaryFactor) }
