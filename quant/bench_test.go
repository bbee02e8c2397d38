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

func BenchmarkNNCFInt4(b *testing.B) {
	w := benchData(2048 * 512)
	var st ErrStats
	b.SetBytes(int64(len(w)) * 4)
	for i := 0; i < b.N; i++ {
		QuantizeNNCFStats(w, 2048, NNCFParams{4, false, 64}, nil, nil, nil, &st)
	}
}

func BenchmarkNNCFInt8(b *testing.B) {
	w := benchData(2048 * 512)
	var st ErrStats
	b.SetBytes(int64(len(w)) * 4)
	for i := 0; i < b.N; i++ {
		QuantizeNNCFStats(w, 2048, NNCFParams{8, false, -1}, nil, nil, nil, &st)
	}
}

func BenchmarkMLXInt4(b *testing.B) {
	w := benchData(2048 * 512)
	var st ErrStats
	b.SetBytes(int64(len(w)) * 4)
	for i := 0; i < b.N; i++ {
		QuantizeMLXAffineStats(w, 2048, MLXAffineParams{4, 64, MLXGPU}, nil, nil, nil, "BF16", &st)
	}
}

// benchCast runs one float cast over benchCastN elements with the Go loops
// ("go") and the assembly ("avx2"), reporting ns/elem; SetBytes counts the
// float32 side, so MB/s is float32 MB/s.
const benchCastN = 1 << 16

func benchCast(b *testing.B, run func()) {
	for _, avx := range []bool{false, true} {
		name := "go"
		if avx {
			name = "avx2"
		}
		b.Run(name, func(b *testing.B) {
			saved := useAVX2
			if avx && !saved {
				b.Skip("no AVX2+F16C")
			}
			useAVX2 = avx
			defer func() { useAVX2 = saved }()
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
