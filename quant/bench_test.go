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
