package jsonobj

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeSetIndent(t *testing.T) {
	for _, tc := range []struct {
		name, in, key, value, want, err string
	}{
		{name: "replace keeps order", in: `{"b": 1, "a": [1, 2]}`, key: "b", value: `2`, want: "{\n  \"b\": 2,\n  \"a\": [\n    1,\n    2\n  ]\n}\n"},
		{name: "add to sorted keys in order", in: `{"a": 1, "c": 3}`, key: "b", value: `2`, want: "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}\n"},
		{name: "add to unsorted keys at the end", in: `{"c": 3, "a": 1}`, key: "b", value: `2`, want: "{\n  \"c\": 3,\n  \"a\": 1,\n  \"b\": 2\n}\n"},
		{name: "large numbers stay exact", in: `{"n": 12345678901234567890}`, key: "x", value: `true`, want: "{\n  \"n\": 12345678901234567890,\n  \"x\": true\n}\n"},
		{name: "duplicate key", in: `{"a": 1, "a": 2}`, err: `key "a" appears twice`},
		{name: "not an object", in: `[1]`, err: "not a JSON object"},
		{name: "trailing data", in: `{"a": 1} {}`, err: "data after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Decode([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var v any = rawOf(tc.value)
			o.Set(tc.key, v)
			out, err := Indent(o, "  ")
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
}

func rawOf(s string) any {
	o, _ := Decode([]byte(`{"v": ` + s + `}`))
	v, _ := o.Get("v")
	return v
}

func TestSortedOrdersKeysByBytes(t *testing.T) {
	got, err := json.Marshal(Sorted(map[string]json.RawMessage{
		"mtp.fc.weight":     json.RawMessage(`"model-mtp.safetensors"`),
		"lm_head.weight":    json.RawMessage(`"model-00002-of-00002.safetensors"`),
		"model.norm.weight": json.RawMessage(`"model-00001-of-00002.safetensors"`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"lm_head.weight":"model-00002-of-00002.safetensors","model.norm.weight":"model-00001-of-00002.safetensors","mtp.fc.weight":"model-mtp.safetensors"}`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// SetDefault is dict.setdefault: a missing member goes at the end, sorted
// keys or not; a member already there keeps its value and place.
func TestSetDefault(t *testing.T) {
	o, err := Decode([]byte(`{"a": 1, "c": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	o.SetDefault("b", 2)
	o.SetDefault("a", 9)
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"a":1,"c":3,"b":2}` {
		t.Errorf("got %s", out)
	}
}
