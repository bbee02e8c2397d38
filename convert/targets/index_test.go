package targets

import (
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// The head's bytes are added to the index's total_size, the index's other
// members kept as they were; an index without a total_size stays without.
func TestAddToTotalSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, index, want, err string }{
		{"total_size", `{"metadata":{"total_parameters":7,"total_size":100},"weight_map":{}}`, `{"metadata":{"total_parameters":7,"total_size":142},"weight_map":{}}`, ""},
		{"no metadata", `{"weight_map":{}}`, `{"weight_map":{}}`, ""},
		{"no total_size", `{"metadata":{"format":"pt"},"weight_map":{}}`, `{"metadata":{"format":"pt"},"weight_map":{}}`, ""},
		{"not a count", `{"metadata":{"total_size":"x"},"weight_map":{}}`, "", `metadata.total_size "x" is not a byte count`},
		{"not an object", `{"metadata":[1],"weight_map":{}}`, "", "metadata: "},
	} {
		root, err := jsonobj.Decode([]byte(c.index))
		if err != nil {
			t.Fatal(err)
		}
		err = AddToTotalSize(&root, 42)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		got, _ := root.MarshalJSON()
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, got, err, c.want)
		}
	}
}
