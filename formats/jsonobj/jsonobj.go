// Package jsonobj edits JSON objects written by other tools (config.json,
// model.safetensors.index.json) without reordering or reformatting the
// values it does not change: an Object keeps its members in order, each
// value as the bytes it was read from until it is replaced.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// KV is one member of an ordered JSON object.
type KV struct {
	Key   string
	Value any
}

// Object is a JSON object that keeps its member order when marshalled.
type Object []KV

// MarshalJSON writes the members in order, without HTML escaping.
func (o Object) MarshalJSON() ([]byte, error) {
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

// Indent marshals v with the given indent and a trailing newline.
func Indent(v any, indent string) ([]byte, error) {
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

// Decode reads a JSON object's members in order (values as they are);
// duplicate keys are refused. A JSON null gives a nil object.
func Decode(raw []byte) (Object, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var o Object
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, KV{key, v})
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("data after the JSON object")
	}
	return o, nil
}

// Get returns a member's value as read (false when absent or replaced by a
// value that is not raw JSON).
func (o Object) Get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.Key == key {
			raw, ok := m.Value.(json.RawMessage)
			return raw, ok
		}
	}
	return nil, false
}

// Has reports whether the object has the member.
func (o Object) Has(key string) bool {
	for _, m := range o {
		if m.Key == key {
			return true
		}
	}
	return false
}

// Set replaces a member's value, or adds the member: in key order when the
// object's keys are sorted (transformers and mlx-lm sort config.json's),
// else at the end.
func (o *Object) Set(key string, v any) {
	for i, m := range *o {
		if m.Key == key {
			(*o)[i].Value = v
			return
		}
	}
	sorted := sort.SliceIsSorted(*o, func(i, j int) bool { return (*o)[i].Key < (*o)[j].Key })
	*o = append(*o, KV{key, v})
	if sorted {
		sort.SliceStable(*o, func(i, j int) bool { return (*o)[i].Key < (*o)[j].Key })
	}
}

// SetDefault adds the member at the end unless the object has it, as
// Python's dict.setdefault does (a splitter's key added to a config it
// read keeps the source's order before it).
func (o *Object) SetDefault(key string, v any) {
	if !o.Has(key) {
		*o = append(*o, KV{key, v})
	}
}

// Sorted is m as an object with its keys in byte order (an index's
// weight_map, as transformers and mlx-lm write it).
func Sorted(m map[string]json.RawMessage) Object {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	o := make(Object, len(names))
	for i, n := range names {
		o[i] = KV{Key: n, Value: m[n]}
	}
	return o
}
