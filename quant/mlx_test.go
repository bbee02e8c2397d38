package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// TestMLXAffineGoldenCPU compares, with the Go and the vector kernels, our quantizer, in cpu rounding, with
// vectors produced by real MLX (interop/golden_mlx.py) for every bits x group
// size x weight dtype, byte for byte: packed weights, scales and biases
// (1 bit too: MLX 0.32.4 quantizes it, by a rule of its own).
func TestMLXAffineGoldenCPU(t *testing.T) { forEachPath(t, testMLXAffineGoldenCPU) }

func testMLXAffineGoldenCPU(t *testing.T) {
	read := goldenReader(t, "mlx_affine_cpu.safetensors")
	checked := 0
	for _, dt := range []string{"bf16", "f16", "f32"} {
		raw, in := read(dt + ".input")
		rows, cols := int(in.Shape[0]), int(in.Shape[1])
		w := make([]float32, rows*cols)
		if err := DecodeF32(string(in.DType), raw, w); err != nil {
			t.Fatal(err)
		}
		for _, bits := range []int{1, 2, 3, 4, 5, 6, 8} {
			for _, gs := range []int{32, 64, 128} {
				p := MLXAffineParams{Bits: bits, GroupSize: gs, Rounding: MLXCPU}
				name := fmt.Sprintf("%s.b%d.g%d", dt, bits, gs)
				packed, s, b := QuantizeMLXAffine(w, cols, p, nil, nil, nil)
				wantQ, _ := read(name + ".weight")
				if !bytes.Equal(packed, wantQ) {
					t.Errorf("%s: packed weights differ", name)
				}
				for _, part := range []struct {
					suffix string
					vals   []float32
				}{{".scales", s}, {".biases", b}} {
					want, _ := read(name + part.suffix)
					got := make([]byte, len(want))
					if _, err := EncodeF32(string(in.DType), part.vals, got); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s%s differ", name, part.suffix)
					}
				}
				checked++
			}
		}
	}
	if checked != 63 {
		t.Fatalf("checked %d combinations", checked)
	}
}

// TestMLXAffineGPUVariant covers the cases where the GPU kernel differs from
// the CPU one: all-negative groups (the GPU maximum starts at 0) and exact
// .5 ties (the GPU rounds half away from zero).
func TestMLXAffineGPUVariant(t *testing.T) { forEachPath(t, testMLXAffineGPUVariant) }

func testMLXAffineGPUVariant(t *testing.T) {
	neg := make([]float32, 32)
	for i := range neg {
		neg[i] = -0.5 - float32(i)/64
	}
	p := MLXAffineParams{Bits: 4, GroupSize: 32}
	_, sg, bg := QuantizeMLXAffine(neg, 32, p, nil, nil, nil)
	p.Rounding = MLXCPU
	_, sc, _ := QuantizeMLXAffine(neg, 32, p, nil, nil, nil)
	// GPU: range [min, 0], scale |min|/15 > 0 and bias = min.
	if wantS := (float32(0) - neg[31]) / 15; sg[0] <= 0 || bg[0] != neg[31] || math.Abs(float64(sg[0]-wantS)) > 1e-6 {
		t.Errorf("gpu all-negative: scale %g bias %g", sg[0], bg[0])
	}
	if sc[0] == sg[0] {
		t.Errorf("cpu and gpu agree on an all-negative group (scale %g)", sc[0])
	}
	// A tie: min -8 and max 7 give scale 1 and bias -8, so -3.5 maps to 4.5.
	tie := make([]float32, 32)
	for i := range tie {
		tie[i] = float32(i%16) - 8
	}
	tie[3] = -3.5 // half-even 4, half-away 5
	for _, r := range []MLXRounding{MLXGPU, MLXCPU} {
		p := MLXAffineParams{Bits: 4, GroupSize: 32, Rounding: r}
		packed, s, b := QuantizeMLXAffine(tie, 32, p, nil, nil, nil)
		if s[0] != 1 || b[0] != -8 {
			t.Fatalf("%v: scale %g bias %g, want 1 and -8", r, s[0], b[0])
		}
		code := (packed[1] >> 4) & 0xf // element 3: high nibble of byte 1
		want := map[MLXRounding]uint8{MLXGPU: 5, MLXCPU: 4}[r]
		if code != want {
			t.Errorf("%v: tie rounded to %d, want %d", r, code, want)
		}
	}
}

// TestMLXAffineRoundTrip checks the dequantized error bound for every bit
// width (1 bit on MLX's CPU kernel, the only one reproduced for it).
func TestMLXAffineRoundTrip(t *testing.T) { forEachPath(t, testMLXAffineRoundTrip) }

func testMLXAffineRoundTrip(t *testing.T) {
	w := make([]float32, 4*128)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*0.37)) * 0.3
	}
	for _, bits := range []int{1, 2, 3, 4, 5, 6, 8} {
		p := MLXAffineParams{Bits: bits, GroupSize: 64}
		if bits == 1 {
			p.Rounding = MLXCPU
		}
		packed, s, b := QuantizeMLXAffine(w, 128, p, nil, nil, nil)
		out := make([]float32, 128)
		rowBytes := 128 * bits / 8
		for r := 0; r < 4; r++ {
			DequantizeMLXAffine(packed[r*rowBytes:(r+1)*rowBytes], 128, p, s[r*2:], b[r*2:], out)
			for j, v := range out {
				// Inside the grid the error is at most half a step; at a
				// clamped end the refined scale may leave up to one step.
				step := math.Abs(float64(s[r*2+j/64]))
				if d := math.Abs(float64(v - w[r*128+j])); d > step+1e-6 {
					t.Fatalf("bits %d: |error| %g above one step %g", bits, d, step)
				}
			}
		}
	}
}

// goldenReader opens a committed golden file of testdata/golden (closed with
// the test) and reads its tensors by name.
func goldenReader(t *testing.T, file string) func(name string) ([]byte, *st.Tensor) {
	t.Helper()
	ck, err := st.Open(fileSource(filepath.Join("..", "testdata", "golden", file)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return func(name string) ([]byte, *st.Tensor) {
		tt, ok := ck.Tensors[name]
		if !ok {
			t.Fatalf("golden file lacks %s", name)
		}
		b, err := ck.ReadTensor(tt, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b, tt
	}
}

// packCodes' word-at-a-time path (and the vector packer) writes the bits
// the one-code-at-a-time loop writes, for every width, aligned or not, with
// tails, up to the end of the row and with room after it.
func TestPackCodesWords(t *testing.T) { forEachPath(t, testPackCodesWords) }

func testPackCodesWords(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, bits := range []int{1, 2, 3, 4, 5, 6, 8} {
		for _, first := range []int{0, 1, 3, 8, 16, 32} {
			for _, n := range []int{0, 5, 8, 13, 16, 31, 48, 64, 100, 128, 512} {
				codes := make([]uint8, n)
				for i := range codes {
					codes[i] = uint8(r.IntN(1 << bits))
				}
				for _, room := range []int{1, 24} {
					size := ((first+n)*bits+7)/8 + room
					want, got := make([]byte, size), make([]byte, size)
					packCodeBits(want, first, codes, bits)
					packCodes(got, first, codes, bits)
					if !bytes.Equal(got, want) {
						t.Errorf("bits %d first %d n %d room %d: %x, want %x", bits, first, n, room, got, want)
					}
				}
			}
		}
	}
}
