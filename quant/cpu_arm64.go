package quant

// useNEON selects the NEON assembly (*_arm64.s). ASIMD is mandatory in
// ARMv8-A, so every arm64 CPU has it. The kernels give the same bits as the
// portable Go code, which tests check by switching this off.
var useNEON = true
