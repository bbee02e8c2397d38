package quant

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// Index values narrow to int32 exactly, negative ones included; one that
// int32 cannot hold is refused naming it, as is a cast no target makes.
func TestNarrow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vals []int64
		err  string
	}{
		{[]int64{0, 1, 262143, -1, math.MaxInt32, math.MinInt32}, ""},
		{[]int64{5, math.MaxInt32 + 1}, "value 2147483648 (element 1) does not fit in int32"},
		{[]int64{math.MinInt32 - 1}, "does not fit in int32"},
	} {
		src := make([]byte, 8*len(c.vals))
		for i, v := range c.vals {
			binary.LittleEndian.PutUint64(src[8*i:], uint64(v))
		}
		dst := make([]byte, 4*len(c.vals))
		err := Narrow("I64", "I32", src, dst)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want %q", c.vals, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range c.vals {
			if got := int64(int32(binary.LittleEndian.Uint32(dst[4*i:]))); got != v {
				t.Errorf("%d narrowed to %d", v, got)
			}
		}
	}
	if err := Narrow("I32", "I16", make([]byte, 4), make([]byte, 2)); err == nil {
		t.Error("I32 to I16 narrowed")
	}
	if err := NarrowI64ToI32(make([]byte, 8), make([]byte, 8)); err == nil {
		t.Error("a wrong-sized buffer accepted")
	}
}
