package quant

import (
	"encoding/binary"
	"testing"
)

// Q8_0: scale amax/127 as f16; codes roundf(x/scale), halves away from zero.
func TestQ8_0Block(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 127, 2.5, -2.5, -0.49
	out, err := QuantizeGGML(GGMLQ8_0, x, 32, nil, nil)
	if err != nil || len(out) != 34 {
		t.Fatalf("%d bytes, %v", len(out), err)
	}
	if h := binary.LittleEndian.Uint16(out); h != 0x3c00 { // 1.0
		t.Errorf("scale %#x, want 0x3c00", h)
	}
	if got := []int8{int8(out[2]), int8(out[3]), int8(out[4]), int8(out[5])}; got[0] != 127 || got[1] != 3 || got[2] != -3 || got[3] != 0 {
		t.Errorf("codes %v, want [127 3 -3 0]", got)
	}
	zero, _ := QuantizeGGML(GGMLQ8_0, make([]float32, 64), 32, nil, nil)
	for _, b := range zero {
		if b != 0 {
			t.Fatalf("zeros quantize to %x", zero)
		}
	}
	if _, err := QuantizeGGML(GGMLQ8_0, make([]float32, 48), 48, nil, nil); err == nil {
		t.Error("a row of 48 was quantized")
	}
}

// Q4_0: scale max/-8 (the signed value of largest magnitude); codes
// min(15, (int8)(x/scale + 8.5)); element j low nibble, j+16 high nibble.
func TestQ4_0Block(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[16], x[1] = -8, 8, 3
	out, err := QuantizeGGML(GGMLQ4_0, x, 32, nil, nil)
	if err != nil || len(out) != 18 {
		t.Fatalf("%d bytes, %v", len(out), err)
	}
	if h := binary.LittleEndian.Uint16(out); h != 0x3c00 { // -8 / -8 = 1
		t.Errorf("scale %#x, want 0x3c00", h)
	}
	// x0 = -8 -> (int8)(0.5) = 0; x16 = 8 -> min(15, 16) = 15; x1 = 3 -> 11; zeros -> 8.
	if out[2] != 0|15<<4 || out[3] != 11|8<<4 || out[4] != 8|8<<4 {
		t.Errorf("codes %x", out[2:5])
	}
}
