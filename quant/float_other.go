//go:build !amd64 && !arm64

package quant

// Without vector kernels (neither amd64 nor arm64) the Go loops convert everything.

func decodeBF16Vec(dst []float32, src []byte) int                  { return 0 }
func decodeF16Vec(dst []float32, src []byte) int                   { return 0 }
func encodeF16Vec(dst []byte, src []float32) (done, overflows int) { return 0, 0 }
func encodeBF16Vec(dst []byte, src []float32) int                  { return 0 }
func castBF16F16Vec(dst, src []byte) (done, overflows int)         { return 0, 0 }
