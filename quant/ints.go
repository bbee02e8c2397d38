package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// NarrowI64ToI32 writes little-endian int64 src as int32 into dst (an index
// buffer mlx-vlm casts to int32), refusing a value int32 cannot hold: a
// cast that wraps would point at another token.
func NarrowI64ToI32(src, dst []byte) error {
	if len(src)%8 != 0 || len(dst) != len(src)/2 {
		return fmt.Errorf("narrow I64 to I32: %d bytes in, %d out", len(src), len(dst))
	}
	for i := range len(src) / 8 {
		v := int64(binary.LittleEndian.Uint64(src[8*i:]))
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("narrow I64 to I32: value %d (element %d) does not fit in int32", v, i)
		}
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(int32(v)))
	}
	return nil
}

// Narrow converts a signed integer buffer from dtype in to the narrower
// dtype out (the pairs the targets plan: I64 to I32).
func Narrow(in, out string, src, dst []byte) error {
	if in == "I64" && out == "I32" {
		return NarrowI64ToI32(src, dst)
	}
	return fmt.Errorf("narrow: %s to %s is not a cast this tool makes", in, out)
}
