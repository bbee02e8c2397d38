//go:build !amd64 && !arm64

package quant

var simdFlag = new(bool) // no vector kernels: the tests that compare paths skip

const simdName = "none"
