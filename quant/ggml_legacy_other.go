//go:build !amd64

package quant

// legacyBlocksVec has no kernels off amd64 (arm64 included: Go's arm64
// assembler has no vector float arithmetic): the Go code does every block.
func legacyBlocksVec(typ string, x []float32, y []byte, qe *ErrStats) int { return 0 }
