//go:build !amd64

package quant

// Off amd64 useAVX2 is false and these are never called.

const (
	kernGPU     = 1
	kernNibbles = 2
)

func minMaxAVX2(x *float32, n int, mn, mx float32) (float32, float32) {
	panic("quant: no AVX2 kernels on this architecture")
}

func mlxKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr, mode int) {
	panic("quant: no AVX2 kernels on this architecture")
}

func nncfKernelAVX2(x *float32, n int, dst *byte, k *kernArgs, e *groupErr) {
	panic("quant: no AVX2 kernels on this architecture")
}

func packNibblesAVX2(src *byte, n int, dst *byte) {
	panic("quant: no AVX2 kernels on this architecture")
}

func qkx2AVX2(a *kqArgs, steps int) {
	panic("quant: no AVX2 kernels on this architecture")
}

func qxAVX2(a *kqArgs) {
	panic("quant: no AVX2 kernels on this architecture")
}

func mlxfpKernelAVX2(x *float32, n int, dst *byte, a *fpArgs, e *groupErr, table *float32) {
	panic("quant: no AVX2 kernels on this architecture")
}

func absMaxAVX2(x *float32, n int) (float32, bool) {
	panic("quant: no AVX2 kernels on this architecture")
}

func q8_0AVX2(x *float32, y *byte, id, dq float32, sum float64) (float64, float64) {
	panic("quant: no AVX2 kernels on this architecture")
}

func errStatsAVX2(x, deq *float32, n int, sum float64) (float64, float64, bool) {
	panic("quant: no AVX2 kernels on this architecture")
}
