// Package mlx is the two MLX targets: "mlx", the MTP head as an mlx-vlm
// drafter folder, and "combined", one mlx-lm safetensors file holding the
// trunk and the head. It knows MLX's conventions (names after sanitize,
// config.json quantization entries, shards and index); the model's own
// names come from its family's Spec.
package mlx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mtpconv/mtpconv/convert"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Precision is what a component is written as: a float dtype, or MLX
// affine quantization at some bits (scales and biases in Float).
type Precision struct {
	Name  string
	Float st.DType
	Bits  int // 0 for a float precision
}

// Precisions accepted by --head-precision and --trunk-precision.
var Precisions = []string{"f16", "bf16", "int8", "int4"}

// ParsePrecision reads f16, bf16, int8 or int4.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "f16":
		return Precision{s, st.F16, 0}, nil
	case "bf16":
		return Precision{s, st.BF16, 0}, nil
	case "int8":
		return Precision{s, st.BF16, 8}, nil
	case "int4":
		return Precision{s, st.BF16, 4}, nil
	}
	return Precision{}, fmt.Errorf("precision %q is not one of %s", s, strings.Join(Precisions, ", "))
}

// Options are the choices of the MLX targets.
type Options struct {
	Head       Precision
	Trunk      Precision // combined target only
	GroupSize  int       // 32, 64 or 128
	Rounding   string    // gpu or cpu
	RouterBits int       // floor for the router and shared-expert gate when quantized; 0 keeps the component's bits
	MaxShard   int64     // combined target: split model.safetensors into shards of at most this many tensor bytes (0: one file)
}

// Defaults of the MLX targets: bf16 for draft fidelity, mlx-lm's group size.
const (
	defaultPrecision  = "bf16"
	defaultGroupSize  = 64
	defaultRounding   = "gpu"
	defaultRouterBits = 8
)

// options applies the defaults to the user's choices and checks them.
func options(o convert.Options) (Options, error) {
	var out Options
	var err error
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	if out.Head, err = ParsePrecision(or(o.HeadPrecision, defaultPrecision)); err != nil {
		return out, fmt.Errorf("--head-precision: %w", err)
	}
	if out.Trunk, err = ParsePrecision(or(o.TrunkPrecision, defaultPrecision)); err != nil {
		return out, fmt.Errorf("--trunk-precision: %w", err)
	}
	out.GroupSize, out.Rounding, out.RouterBits, out.MaxShard = defaultGroupSize, or(o.MLXRounding, defaultRounding), defaultRouterBits, o.MaxShardSize
	if o.Set[convert.OptGroupSize] {
		out.GroupSize = o.GroupSize
	}
	if o.Set[convert.OptRouterBits] {
		out.RouterBits = o.RouterBits
	}
	switch out.GroupSize {
	case 32, 64, 128:
	default:
		return out, fmt.Errorf("--group-size %d: must be 32, 64 or 128", out.GroupSize)
	}
	if out.Rounding != "gpu" && out.Rounding != "cpu" {
		return out, fmt.Errorf("--mlx-rounding %q: must be gpu or cpu", out.Rounding)
	}
	if out.RouterBits != 0 && out.RouterBits != 8 {
		return out, fmt.Errorf("--router-bits %d: must be 8 or 0", out.RouterBits)
	}
	return out, nil
}

// rule is the quantization of a component's linear weights: MLX affine at
// the component's bits, the router and shared-expert gate at RouterBits,
// group 64 (mlx-lm's own predicate for these MoE models), rows that do not
// divide by the group size kept float (as mlx_lm.convert does).
func (o Options) rule(m *convert.Model, p Precision) convert.QuantRule {
	if p.Bits == 0 {
		return nil
	}
	return func(src, name string, in int64) *convert.Quant {
		bits, gs := p.Bits, o.GroupSize
		if o.RouterBits > 0 && m.Is(src, convert.RoleRouter) {
			bits, gs = o.RouterBits, 64
		}
		if in%int64(gs) != 0 {
			return nil
		}
		return &convert.Quant{Mode: convert.ModeMLXAffine, Bits: bits, GroupSize: gs, Rounding: o.Rounding}
	}
}

// kv is one member of an ordered JSON object.
type kv struct {
	Key   string
	Value any
}

// object is a JSON object that keeps its member order when marshalled.
type object []kv

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoHTML(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoHTML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// indentJSON marshals v with the given indent and a trailing newline.
func indentJSON(v any, indent string) ([]byte, error) {
	raw, err := marshalNoHTML(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", indent); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// quantizationConfig builds mlx-lm's "quantization" block: the defaults, then
// one entry per module (output name without .weight) whose bits or group
// size differ.
func quantizationConfig(tensors []convert.OutTensor, bits, groupSize int) object {
	q := object{{"group_size", groupSize}, {"bits", bits}, {"mode", "affine"}}
	for _, t := range tensors {
		if t.Quant == nil || (t.Quant.Bits == bits && t.Quant.GroupSize == groupSize) {
			continue
		}
		q = append(q, kv{strings.TrimSuffix(t.Name, ".weight"), object{{"group_size", t.Quant.GroupSize}, {"bits", t.Quant.Bits}, {"mode", "affine"}}})
	}
	return q
}

// tokenizerFiles are copied next to MLX outputs when the source has them.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json", "chat_template.jinja", "generation_config.json"}

func copies(m *convert.Model) []convert.OutFile {
	var out []convert.OutFile
	for _, f := range tokenizerFiles {
		if src, err := m.Checkpoint.Source.Open(f); err == nil {
			src.Close()
			out = append(out, convert.OutFile{Name: f, CopyFrom: f})
		}
	}
	return out
}
