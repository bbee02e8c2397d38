//go:build !amd64

package quant

// Off amd64 there are no vector kernels; the Go loops convert everything.

func decodeBF16Vec(dst []float32, src []byte) int                  { return 0 }
func decodeF16Vec(dst []float32, src []byte) int                   { return 0 }
func encodeF16Vec(dst []byte, src []float32) (done, overflows int) { return 0, 0 }
func encodeBF16Vec(dst []byte, src []float32) int                  { return 0 }
func castBF16F16Vec(dst, src []byte) (done, overflows int)         { return 0, 0 }
