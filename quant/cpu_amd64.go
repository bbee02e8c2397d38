package quant

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly kernels (AVX2 with F16C). They give the same
// bits as the portable Go code, which tests check by switching this off.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C
