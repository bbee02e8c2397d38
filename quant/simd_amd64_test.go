package quant

// simdFlag switches this architecture's vector kernels; simdName names them
// in test and benchmark output.
var simdFlag = &useAVX2

const simdName = "avx2"
