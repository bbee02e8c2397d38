package quant

import (
	"math"
	"testing"
)

// Every e4m3fn code against the format's definition, computed in float64.
func TestF8E4M3AllCodes(t *testing.T) {
	for c := 0; c < 256; c++ {
		got := F8E4M3ToF32(byte(c))
		s, e, m := c>>7, (c>>3)&0xF, c&0x7
		if e == 0xF && m == 0x7 {
			if !math.IsNaN(float64(got)) {
				t.Errorf("%#02x: %v, want NaN", c, got)
			}
			continue
		}
		var want float64
		if e == 0 {
			want = float64(m) / 8 * math.Pow(2, -6)
		} else {
			want = (1 + float64(m)/8) * math.Pow(2, float64(e-7))
		}
		if s == 1 {
			want = -want
		}
		if float64(got) != want || math.Signbit(float64(got)) != (s == 1) {
			t.Errorf("%#02x: %v, want %v", c, got, want)
		}
	}
	if F8E4M3ToF32(0x7E) != 448 || F8E4M3ToF32(0x01) != float32(math.Pow(2, -9)) {
		t.Error("max normal or min subnormal wrong")
	}
}

// Blocks, partial last blocks in both dimensions, and rows starting mid-block.
func TestDequantizeF8E4M3Blocks(t *testing.T) {
	const rows, cols, b0, b1 int64 = 5, 7, 2, 3
	src := make([]byte, rows*cols)
	for i := range src {
		src[i] = byte(i*37 + 11)
		if src[i]&0x7F == 0x7F {
			src[i] = 0x40
		}
	}
	sr, sc := (rows+b0-1)/b0, (cols+b1-1)/b1
	scales := make([]float32, sr*sc)
	for i := range scales {
		scales[i] = float32(i+1) * 0.5
	}
	for _, row0 := range []int64{0, 1, 3} {
		n := rows - row0
		dst := make([]float32, n*cols)
		if err := DequantizeF8E4M3Blocks(src[row0*cols:], cols, n, row0, b0, b1, scales[row0/b0*sc:], dst); err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < n; i++ {
			for j := int64(0); j < cols; j++ {
				want := F8E4M3ToF32(src[(row0+i)*cols+j]) * scales[(row0+i)/b0*sc+j/b1]
				if dst[i*cols+j] != want {
					t.Errorf("row0 %d [%d,%d]: %v, want %v", row0, i, j, dst[i*cols+j], want)
				}
			}
		}
	}
	if err := DequantizeF8E4M3Blocks(src, cols, rows, 0, b0, b1, scales[:2], make([]float32, rows*cols)); err == nil {
		t.Error("too few scales accepted")
	}
}
