package quant

var simdFlag = &useNEON // see simd_amd64_test.go

const simdName = "neon"
