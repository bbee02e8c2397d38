//go:build !amd64

package quant

// useAVX2 is false off amd64: the portable Go kernels run.
var useAVX2 = false
