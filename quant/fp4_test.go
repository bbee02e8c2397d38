package quant

import (
	"math"
	"testing"
)

// The MXFP4 repack moves each block's scale byte first, then pairs value j
// with value j + 16 in one byte; decoding either layout gives the same
// values (ggml: kvalue × 2^(e − 128), kvalues the doubled e2m1).
func TestRepackMXFP4(t *testing.T) {
	t.Parallel()
	codes := make([]byte, 32) // two blocks
	for i := range codes {
		codes[i] = byte(i*29 + 7)
	}
	scales := []byte{120, 131}
	dst := make([]byte, 2*MXFP4BlockBytes)
	if err := RepackMXFP4(codes, scales, dst); err != nil {
		t.Fatal(err)
	}
	src := make([]float32, 64)
	if err := DecodeE2M1(codes, 32, []float32{E8M0ToF32(120), E8M0ToF32(131)}, src); err != nil {
		t.Fatal(err)
	}
	kvalues := [16]float32{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
	for b := range 2 {
		blk := dst[b*MXFP4BlockBytes:]
		if blk[0] != scales[b] {
			t.Fatalf("block %d: scale byte %d, want %d", b, blk[0], scales[b])
		}
		d := float32(math.Ldexp(1, int(blk[0])-128))
		for j := range 16 {
			lo, hi := kvalues[blk[1+j]&0xF]*d, kvalues[blk[1+j]>>4]*d
			if lo != src[32*b+j] || hi != src[32*b+j+16] {
				t.Errorf("block %d byte %d: ggml values %g, %g; source %g, %g", b, j, lo, hi, src[32*b+j], src[32*b+j+16])
			}
		}
	}
	if err := RepackMXFP4(codes[:15], scales[:1], dst[:17]); err == nil {
		t.Error("15 code bytes for a block of 32: no error")
	}
	if !math.IsNaN(float64(E8M0ToF32(0xFF))) || E8M0ToF32(0) != float32(math.Ldexp(1, -127)) {
		t.Error("E8M0: 0xFF is NaN and 0 is 2^-127")
	}
}
