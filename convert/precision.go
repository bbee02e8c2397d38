package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

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

// MLXOptions are the choices of the MLX targets.
type MLXOptions struct {
	Head       Precision
	Trunk      Precision // combined target only
	GroupSize  int       // 32, 64 or 128
	Rounding   string    // gpu or cpu
	RouterBits int       // floor for mlp.gate and shared_expert_gate when quantized; 0 keeps the component's bits
	MaxShard   int64     // combined target: split model.safetensors into shards of at most this many tensor bytes (0: one file)
}

// quantFor decides the quantization of one linear weight of a component, or
// nil to keep it float. in is the row length (input features).
func (o MLXOptions) quantFor(p Precision, name string, in int64) *Quant {
	if p.Bits == 0 {
		return nil
	}
	bits, gs := p.Bits, o.GroupSize
	if o.RouterBits > 0 && (strings.HasSuffix(name, "mlp.gate.weight") || strings.HasSuffix(name, "shared_expert_gate.weight")) {
		// mlx-lm's own predicate for these MoE models: routers at 8 bits, group 64,
		// whatever the default.
		bits, gs = o.RouterBits, 64
	}
	if in%int64(gs) != 0 {
		return nil // as mlx_lm.convert: a row that does not divide stays float
	}
	return &Quant{Mode: "mlx_affine", Bits: bits, GroupSize: gs, Rounding: o.Rounding}
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
// one entry per module (output name without .weight, mapped by modulePath)
// whose bits or group size differ.
func quantizationConfig(tensors []OutTensor, def Quant, modulePath func(string) string) object {
	q := object{{"group_size", def.GroupSize}, {"bits", def.Bits}, {"mode", "affine"}}
	for _, t := range tensors {
		if t.Quant == nil || (t.Quant.Bits == def.Bits && t.Quant.GroupSize == def.GroupSize) {
			continue
		}
		path := modulePath(strings.TrimSuffix(t.Name, ".weight"))
		q = append(q, kv{path, object{{"group_size", t.Quant.GroupSize}, {"bits", t.Quant.Bits}, {"mode", "affine"}}})
	}
	return q
}
