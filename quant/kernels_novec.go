//go:build !amd64 && !arm64

package quant

// Without vector kernels (neither amd64 nor arm64) the arch-neutral entry
// points (see kernels_amd64.go) do nothing and the Go loops do all.

func absMaxVec(x []float32) (m float32, ok bool)           { return 0, false }
func packNibblesVec(codes []uint8, dst []byte) int         { return 0 }
func packCodesVec(out []byte, codes []uint8, bits int) int { return 0 }
