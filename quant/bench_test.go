package quant

import (
	"math/rand/v2"
	"testing"
)

func benchData(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(r.NormFloat64()) * 0.02
	}
	return w
}

// kernelPaths are the implementations a benchmark or test runs: the portable
// Go code always, the vector assembly (AVX2 or NEON) where the CPU has it.
func kernelPaths() []kernelPath {
	paths := []kernelPath{{"go", false}}
	if *simdFlag {
		paths = append(paths, kernelPath{simdName, true})
	}
	return paths
}

// kernelPath is one implementation: its name in output and the *simdFlag it runs with.
type kernelPath struct {
	name string
	simd bool
}

// setSIMD switches the kernels for the rest of a test or benchmark.
func setSIMD(tb testing.TB, on bool) {
	old := *simdFlag
	*simdFlag = on
	tb.Cleanup(func() { *simdFlag = old })
}

// BenchmarkQuant measures the quantizers with error statistics, on 2048x512
// weights, reusing the output buffers as the converter does; ns/elem is the
// time per weight.
func BenchmarkQuant(b *testing.B) {
	const cols, rows = 2048, 512
	w := benchData(cols * rows)
	cases := []struct {
		name string
		run  func(packed []byte, s, bi []float32, z []uint8, st *ErrStats) ([]byte, []float32, []float32, []uint8)
	}{
		{"mlx-int4-g64-cpu", mlxBench(w, cols, MLXAffineParams{4, 64, MLXCPU})},
		{"mlx-int8-g64-cpu", mlxBench(w, cols, MLXAffineParams{8, 64, MLXCPU})},
		{"mlx-int4-g64-gpu", mlxBench(w, cols, MLXAffineParams{4, 64, MLXGPU})},
		{"mlx-int3-g64-gpu", mlxBench(w, cols, MLXAffineParams{3, 64, MLXGPU})},
		{"mlx-int6-g64-gpu", mlxBench(w, cols, MLXAffineParams{6, 64, MLXGPU})},
		{"nncf-int8-asym-channel", nncfBench(w, cols, NNCFParams{8, false, -1})},
		{"nncf-int4-asym-g128", nncfBench(w, cols, NNCFParams{4, false, 128})},
		{"nncf-int4-sym-g64", nncfBench(w, cols, NNCFParams{4, true, 64})},
	}
	for _, c := range cases {
		for _, path := range kernelPaths() {
			b.Run(c.name+"/"+path.name, func(b *testing.B) {
				setSIMD(b, path.simd)
				var st ErrStats
				packed, s, bi, z := c.run(nil, nil, nil, nil, &st)
				b.SetBytes(int64(len(w)) * 4)
				b.ResetTimer()
				for b.Loop() {
					packed, s, bi, z = c.run(packed[:0], s[:0], bi[:0], z[:0], &st)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(w)), "ns/elem")
			})
		}
	}
}

func mlxBench(w []float32, cols int, p MLXAffineParams) func([]byte, []float32, []float32, []uint8, *ErrStats) ([]byte, []float32, []float32, []uint8) {
	return func(packed []byte, s, b []float32, z []uint8, st *ErrStats) ([]byte, []float32, []float32, []uint8) {
		packed, s, b = QuantizeMLXAffineStats(w, cols, p, packed, s, b, "BF16", st)
		return packed, s, b, z
	}
}

// nncfBench also packs 4-bit codes and zero points, as the converter does.
func nncfBench(w []float32, cols int, p NNCFParams) func([]byte, []float32, []float32, []uint8, *ErrStats) ([]byte, []float32, []float32, []uint8) {
	var nib []byte
	return func(codes []byte, s, b []float32, z []uint8, st *ErrStats) ([]byte, []float32, []float32, []uint8) {
		codes, s, z = QuantizeNNCFStats(w, cols, p, codes, s, z, st)
		if p.Bits == 4 {
			nib = PackNibbles(codes, nib[:0])
		}
		return codes, s, b, z
	}
}

// benchCast runs one float cast over benchCastN elements on each kernel
// path, reporting ns/elem; SetBytes counts the float32 side, so MB/s is
// float32 MB/s.
const benchCastN = 1 << 16

func benchCast(b *testing.B, run func()) {
	for _, path := range kernelPaths() {
		b.Run(path.name, func(b *testing.B) {
			setSIMD(b, path.simd)
			b.SetBytes(4 * benchCastN)
			iters := 0
			for b.Loop() {
				run()
				iters++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters)/benchCastN, "ns/elem")
		})
	}
}

func BenchmarkDecodeBF16(b *testing.B) {
	src := make([]byte, 2*benchCastN)
	EncodeF32("BF16", benchData(benchCastN), src)
	dst := make([]float32, benchCastN)
	benchCast(b, func() { DecodeF32("BF16", src, dst) })
}

func BenchmarkDecodeF16(b *testing.B) {
	src := make([]byte, 2*benchCastN)
	EncodeF32("F16", benchData(benchCastN), src)
	dst := make([]float32, benchCastN)
	benchCast(b, func() { DecodeF32("F16", src, dst) })
}

func BenchmarkEncodeF16(b *testing.B) {
	src := benchData(benchCastN)
	dst := make([]byte, 2*benchCastN)
	benchCast(b, func() { EncodeF32("F16", src, dst) })
}

func BenchmarkEncodeBF16(b *testing.B) {
	src := benchData(benchCastN)
	dst := make([]byte, 2*benchCastN)
	benchCast(b, func() { EncodeF32("BF16", src, dst) })
}

// BenchmarkQuantizeMLXFP: the microscaling quantizers on 4 Mi bf16-exact
// values in rows of 2048, as one export chunk, per kernel path.
func BenchmarkQuantizeMLXFP(b *testing.B) {
	w := benchData(4 << 20)
	for i := range w {
		w[i] = BF16ToF32(F32ToBF16(w[i]))
	}
	for _, mode := range []MLXFPMode{MXFP4, MXFP8, NVFP4} {
		for _, r := range []MLXRounding{MLXCPU, MLXGPU} {
			for _, path := range kernelPaths() {
				b.Run(mode.String()+"-"+r.String()+"/"+path.name, func(b *testing.B) {
					setSIMD(b, path.simd)
					p := MLXFPParams{Mode: mode, Rounding: r}
					var packed, scales []byte
					var stats ErrStats
					b.SetBytes(int64(len(w) * 2))
					for b.Loop() {
						packed, scales = QuantizeMLXFP(w, 2048, p, "BF16", packed[:0], scales[:0], &stats)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(w)), "ns/elem")
				})
			}
		}
	}
}

// BenchmarkGGML: the ggml block quantizers with error statistics on 2048x256
// weights (rows of one tensor chunk), per kernel path; the assembly's rows
// also give the Go row's time per block over theirs (speedup).
func BenchmarkGGML(b *testing.B) {
	const cols, rows = 2048, 256
	w := benchData(cols * rows)
	for i := range w {
		w[i] = BF16ToF32(F32ToBF16(w[i]))
	}
	for _, typ := range ggmlTypes {
		qk, _, _ := GGMLBlock(typ)
		var goBlock float64 // ns per block of the Go row, which runs first
		for _, path := range kernelPaths() {
			b.Run(typ+"/"+path.name, func(b *testing.B) {
				setSIMD(b, path.simd)
				var st ErrStats
				var out []byte
				b.SetBytes(int64(len(w)) * 2)
				for b.Loop() {
					out, _ = QuantizeGGML(typ, w, cols, out[:0], &st)
				}
				perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(perOp/float64(len(w)), "ns/elem")
				b.ReportMetric(perOp/float64(len(w)/qk), "ns/block")
				if !path.simd {
					goBlock = perOp / float64(len(w)/qk)
				} else if goBlock > 0 {
					b.ReportMetric(goBlock/(perOp/float64(len(w)/qk)), "speedup")
				}
			})
		}
	}
}

// BenchmarkPackCodes: the word-at-a-time packer against the one-code-at-a-time
// loop ("bits"), 3-bit codes of groups of 64.
func BenchmarkPackCodes(b *testing.B) {
	codes := make([]uint8, 64)
	for i := range codes {
		codes[i] = uint8(i*5) & 7
	}
	row := make([]byte, 64*3/8)
	for name, pack := range map[string]func([]byte, int, []uint8, int){"words": packCodes, "bits": packCodeBits} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				clear(row)
				pack(row, 0, codes, 3)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/elem")
		})
	}
}
