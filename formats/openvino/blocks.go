package openvino

import "math"

// Region is a placed run of bytes in the .bin.
type Region struct {
	Type   ElemType
	Shape  []int64
	Offset int64
	Size   int64
}

// Weight is a weight of logical shape [.., N, K] as stored in the .bin:
// plain f16 or f32, or NNCF-compressed integers with f16 scales and
// optional zero points (grouped when Q has one more dim than Shape).
type Weight struct {
	Name  string
	Shape []int64
	Plain *Region // f16 or f32
	Q     *Region // u8, i8, u4, i4
	Scale *Region // f16
	ZP    *Region // asymmetric modes only, same type as Q
}

// Weight emits the decompression subgraph the plugins recognise and returns
// an f32 output: f16 as Const -> Convert(f32, marked decompression, as
// OpenVINO's own f16 compression marks it); integers exactly as NNCF writes
// them, with no rt_info on any node: Const -> Convert(f16) ->
// [Subtract(Convert(zp))] -> Multiply(scale) -> [Reshape to Shape] -> Convert(f32).
// A decompression mark on the integer Converts makes the CPU plugin fold the
// weights to f32 at compile time (4x the bytes per step, ~10 GB to compile).
func (g *Graph) Weight(w Weight) Output {
	if w.Plain != nil {
		c := g.ConstAt(w.Name, w.Plain.Type, w.Plain.Shape, w.Plain.Offset, w.Plain.Size)
		if w.Plain.Type == F32 {
			return c
		}
		return g.Convert(w.Name+"/convert", c, F32, true)
	}
	q := g.ConstAt(w.Name, w.Q.Type, w.Q.Shape, w.Q.Offset, w.Q.Size)
	x := g.Convert(w.Name+"/convert", q, F16, false)
	if w.ZP != nil {
		zp := g.ConstAt(w.Name+"/zero_point", w.ZP.Type, w.ZP.Shape, w.ZP.Offset, w.ZP.Size)
		zpc := g.Convert(w.Name+"/zero_point/convert", zp, F16, false)
		x = g.Subtract(w.Name+"/zero_point/subtract", x, zpc)
	}
	s := g.ConstAt(w.Name+"/scale", F16, w.Scale.Shape, w.Scale.Offset, w.Scale.Size)
	x = g.Multiply(w.Name+"/fq_weights_1", x, s)
	if len(w.Q.Shape) == len(w.Shape)+1 {
		x = g.Reshape(w.Name+"/reshape", x, g.ConstI64(w.Name+"/reshape/shape", w.Shape...), false, w.Shape)
	}
	return g.Convert(w.Name+"/convert_f32", x, F32, false)
}

// Linear is x @ Wᵀ with W [N, K] (MatMul transpose_b = true).
func (g *Graph) Linear(name string, x Output, w Weight) Output {
	return g.MatMul(name, x, g.Weight(w), true)
}

// RMSNorm in the form every fusion version accepts:
// gamma * (x * (sqrt(mean(x^2) + eps))^-1); gamma is an f32 Const (already 1+w).
func (g *Graph) RMSNorm(name string, x Output, gamma Region, eps float32) Output {
	sq := g.Power(name+"/pow", x, g.ScalarF32(name+"/two", 2))
	mean := g.ReduceMean(name+"/mean", sq, true, -1)
	add := g.Add(name+"/add_eps", mean, g.ScalarF32(name+"/eps", eps))
	root := g.Sqrt(name+"/sqrt", add)
	inv := g.Power(name+"/inv", root, g.ScalarF32(name+"/minus_one", -1))
	norm := g.Multiply(name+"/normalize", x, inv)
	gm := g.ConstAt(name+".weight", F32, gamma.Shape, gamma.Offset, gamma.Size)
	return g.Multiply(name+"/scale", gm, norm)
}

// RopeTables returns cos and sin [B,1,S,rot] for position_ids [B,S] (i64),
// rotate-half (neox) layout: the frequencies are repeated over both halves.
func (g *Graph) RopeTables(name string, positions Output, rot int64, theta float64) (cos, sin Output) {
	half := rot / 2
	inv := make([]float32, half)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(rot)))
	}
	pos := g.Convert(name+"/positions_f32", positions, F32, false)
	pu := g.Unsqueeze(name+"/positions_unsqueeze", pos, -1, []int64{Dynamic, Dynamic, 1})
	freqs := g.Multiply(name+"/freqs", pu, g.ConstF32(name+"/inv_freq", []int64{1, 1, half}, inv...))
	emb := g.Concat(name+"/emb", -1, []int64{Dynamic, Dynamic, rot}, freqs, freqs)
	c := g.Cos(name+"/cos", emb)
	s := g.Sin(name+"/sin", emb)
	return g.Unsqueeze(name+"/cos_unsqueeze", c, 1, []int64{Dynamic, 1, Dynamic, rot}),
		g.Unsqueeze(name+"/sin_unsqueeze", s, 1, []int64{Dynamic, 1, Dynamic, rot})
}

// Rope applies partial rotary (first rot of dim dims) to x [B,H,S,dim], in
// the VariadicSplit form the RoPE fusion passes match.
func (g *Graph) Rope(name string, x, cos, sin Output, rot, dim int64) Output {
	var xr, xp Output
	if rot < dim {
		parts := g.VariadicSplit(name+"/split_rotary", x, 3, rot, dim-rot)
		xr, xp = parts[0], parts[1]
	} else {
		xr = x
	}
	halves := g.VariadicSplit(name+"/split_half", xr, 3, rot/2, rot/2)
	neg := g.Multiply(name+"/neg", halves[1], g.ScalarF32(name+"/minus_one", -1))
	rotHalf := g.Concat(name+"/rotate_half", -1, xr.Shape(), neg, halves[0])
	out := g.Add(name+"/add", g.Multiply(name+"/mul_cos", xr, cos), g.Multiply(name+"/mul_sin", rotHalf, sin))
	if rot < dim {
		out = g.Concat(name+"/concat_pass", -1, x.Shape(), out, xp)
	}
	return out
}

// PlaceWeights lays weights of the given sizes back to back in a .bin, each
// at BinAlign, and returns their offsets and the end of the last.
func PlaceWeights(sizes []int64) (offsets []int64, end int64) {
	offsets = make([]int64, len(sizes))
	for i, n := range sizes {
		end = (end + BinAlign - 1) / BinAlign * BinAlign
		offsets[i] = end
		end += n
	}
	return offsets, end
}
