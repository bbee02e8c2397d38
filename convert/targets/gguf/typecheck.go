package gguf

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

func init() { manifests.RegisterTargetCheck("gguf", checkTypes) }

// checkTypes is verify --src's type check of a gguf output: every tensor
// the manifest records as written must have the type the tensor kinds'
// rules give it in that file (the reference converter's for a bf16 or f16
// sidecar, llama-quantize's choice over the whole file otherwise),
// derived again from the file's own tensor list and file type, so that a
// wrong type in the plan, written and recorded alike, is found. A graft's
// trunk tensors are not ours: they count for llama-quantize's choice as
// they are stored.
func checkTypes(man *manifests.Manifest, open func(string) (io.ReaderAt, int64, bool)) ([]manifests.Problem, error) {
	name := man.Options["precision"]
	prec, ok := fileTypes[name]
	if !ok {
		prec, ok = headPrecisions[name]
	}
	if !ok {
		return []manifests.Problem{{Kind: "tensor_type", Message: "the manifest's precision " + name + " is not one of the gguf target's"}}, nil
	}
	ours := map[string]map[string]bool{}
	var files []string
	for _, t := range man.Tensors {
		if ours[t.File] == nil {
			ours[t.File] = map[string]bool{}
			files = append(files, t.File)
		}
		for _, e := range t.Entries {
			ours[t.File][e.Name] = true
		}
	}
	var problems []manifests.Problem
	for _, file := range files {
		written := ours[file]
		if !strings.HasSuffix(file, ".gguf") {
			continue
		}
		r, size, ok := open(file)
		if !ok {
			continue // verify reported why
		}
		f, err := gg.Read(r, size)
		if err != nil {
			problems = append(problems, manifests.Problem{Kind: "tensor_type", File: file, Message: fmt.Sprintf("%s: %v", file, err)})
			continue
		}
		if fam, ok := model.LookupFamily(man.Model.Family); ok && fam.GGUF.StoredTypes {
			problems = append(problems, storedTypeProblems(file, f, fam.GGUF, man)...)
			continue
		}
		problems = append(problems, fileTypeProblems(file, f, prec, written, headBlockFromSubLayer(man.Model.Family))...)
	}
	return problems, nil
}

// headBlockFromSubLayer is the family's GGUFSpec.HeadBlockFromSubLayer (false for a family not known).
func headBlockFromSubLayer(family string) bool {
	fam, ok := model.LookupFamily(family)
	return ok && fam.GGUF.HeadBlockFromSubLayer
}

// fileTypeProblems compares each written tensor's stored type with the
// one the rules give it; with fromSubLayer, the converter's float32 kinds
// apply outside the MTP blocks only (GGUFSpec.HeadBlockFromSubLayer).
func fileTypeProblems(file string, f *gg.File, prec precision, written map[string]bool, fromSubLayer bool) []manifests.Problem {
	var problems []manifests.Problem
	bad := func(tensor, format string, a ...any) {
		problems = append(problems, manifests.Problem{Kind: "tensor_type", File: file, Tensor: tensor, Message: file + ": " + fmt.Sprintf(format, a...)})
	}
	float := string(prec.float)
	if prec.requant {
		float = string(st.BF16) // llama-quantize reads the bf16 sidecar
	}
	arch := f.String("general.architecture")
	nLayer := -1 // every block a trunk block, unless fromSubLayer
	if fromSubLayer {
		blocks, _ := f.Uint(arch + ".block_count")
		nextn, _ := f.Uint(arch + ".nextn_predict_layers")
		nLayer = int(blocks) - int(nextn)
	}
	var listed []plannedTensor
	for _, ti := range f.Tensors {
		shape := squeeze(ggmlShape(ti.Dims))
		in := ti.Type.String()
		if written[ti.Name] {
			ct, err := gg.ConverterType(ti.Name, len(shape), float, nLayer < 0 || blockOf(ti.Name) < nLayer)
			if err != nil {
				bad(ti.Name, "%v", err)
				continue
			}
			in = ct
		}
		listed = append(listed, plannedTensor{ti.Name, shape, in})
	}
	want := map[string]string{}
	for _, t := range listed {
		want[t.name] = t.in
	}
	if prec.requant {
		blocks, _ := f.Uint(arch + ".block_count")
		experts, _ := f.Uint(arch + ".expert_count")
		want = llamaQuantizeTypes(listed, prec.ftype, int(blocks), int(experts))
	}
	for _, ti := range f.Tensors {
		w, ok := want[ti.Name]
		if !written[ti.Name] || !ok {
			continue
		}
		if got := ti.Type.String(); got != w {
			how := "the reference converter writes"
			if prec.requant {
				how = "llama-quantize chooses"
			}
			bad(ti.Name, "tensor %s is %s; for its kind, in a %s file, %s %s", ti.Name, got, prec.ftype, how, w)
		}
	}
	return problems
}

// storedTypeProblems is the type check of a StoredTypes family's sidecar
// (DeepSeek-V4's): the routed experts MXFP4, each join its type, vectors
// and biases F32, block-FP8 matrices Q8_0, every other tensor the type the manifest says it was
// stored in, with no cast recorded (the converter writes the checkpoint's
// own type), and the file type MXFP4_MOE.
func storedTypeProblems(file string, f *gg.File, g model.GGUFSpec, man *manifests.Manifest) []manifests.Problem {
	var problems []manifests.Problem
	bad := func(tensor, format string, a ...any) {
		problems = append(problems, manifests.Problem{Kind: "tensor_type", File: file, Tensor: tensor, Message: file + ": " + fmt.Sprintf(format, a...)})
	}
	if ft, _ := f.Uint("general.file_type"); gg.FileType(ft) != gg.FileMXFP4MOE {
		bad("", "general.file_type is %s; the converter writes %s", gg.FileType(ft), gg.FileMXFP4MOE)
	}
	recs := map[string]*manifests.Tensor{}
	for i := range man.Tensors {
		if man.Tensors[i].File == file {
			recs[man.Tensors[i].Name] = &man.Tensors[i]
		}
	}
	joined := map[gg.Kind]string{}
	for _, j := range g.Joins {
		joined[g.Layer[j.Parts[0]].Kind] = j.Type
	}
	for _, ti := range f.Tensors {
		rec, ok := recs[ti.Name]
		if !ok {
			continue
		}
		tn, _, err := gg.ParseTensorName(ti.Name)
		if err != nil {
			bad(ti.Name, "%v", err)
			continue
		}
		var want string
		switch {
		case slices.Contains(expertKinds[:], gg.Weight(tn.Kind)):
			want = gg.MXFP4.String()
		case joined[tn.Kind] != "":
			want = joined[tn.Kind]
		case len(ggmlShape(ti.Dims)) <= 1 || tn.Bias: // a [1, n] matrix stays one (DSpark's conf_proj, BF16)
			want = string(st.F32)
		case hasTransform(rec, plan.TDequantFP8):
			want = "Q8_0" // a block-FP8 matrix: dequantized, then forced Q8_0 (storedType)
		default:
			want = rec.DType
			if _, cast := rec.Has(plan.TCast); cast {
				bad(ti.Name, "tensor %s was cast to %s; the converter writes it in the checkpoint's own type", ti.Name, rec.DType)
			}
		}
		if got := ti.Type.String(); got != want {
			bad(ti.Name, "tensor %s is %s; the converter writes %s", ti.Name, got, want)
		}
	}
	return problems
}

// hasTransform reports whether a tensor's record lists transform name.
func hasTransform(rec *manifests.Tensor, name manifests.TransformName) bool {
	_, ok := rec.Has(name)
	return ok
}
