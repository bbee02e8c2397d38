package mlx

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// storedTensor is an entry of a folder's weight files.
type storedTensor struct {
	file *os.File
	info st.TensorInfo
}

// mlxModes are config.json's quantization modes as codecs.
var mlxModes = map[string]codec.Mode{"affine": codec.ModeMLXAffine, "mxfp4": codec.ModeMLXMXFP4, "mxfp8": codec.ModeMLXMXFP8, "nvfp4": codec.ModeMLXNVFP4}

// headHealth judges the MTP head of an MLX folder (an mlx-vlm drafter, where
// every tensor is the head, or an mlx-lm model holding mtp.* tensors) from
// its stored values (health.Report): each weight dequantized as MLX does by
// config.json's "quantization" (a module's own entry first), every norm
// expected to centre on 1 (MLX stores RMSNorm weights as applied: mlx-lm's
// sanitize adds a zero-centred family's +1, and so does mtpconv; on 0 in a
// drafter whose runtime applies 1+w itself, MLXSpec.DrafterNormsStored). It returns
// nil for a folder without a head.
func headHealth(dir string) (*health.Report, error) {
	raw, err := st.ReadRegularFile(filepath.Join(dir, model.ConfigFile), configLimit)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		ModelType    string                     `json:"model_type"`
		Quantization map[string]json.RawMessage `json:"quantization"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	fam := familyOf(raw, cfg.ModelType)
	drafter := fam != nil && fam.MLX.DrafterModelType == cfg.ModelType
	tensors := map[string]storedTensor{}
	names, err := filepath.Glob(filepath.Join(dir, weightGlob))
	if err != nil {
		return nil, err
	}
	var heads []string
	for _, path := range names {
		f, fi, err := st.OpenRegular(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		h, err := st.ReadHeader(f, fi.Size(), filepath.Base(path))
		if err != nil {
			return nil, err
		}
		for _, t := range h.Tensors {
			tensors[t.Name] = storedTensor{f, t}
			if drafter || strings.HasPrefix(t.Name, "mtp.") || strings.Contains(t.Name, ".mtp.") {
				heads = append(heads, t.Name)
			}
		}
	}
	if len(heads) == 0 && !drafter {
		return nil, nil
	}
	sort.Strings(heads)
	// Every concat projection this check knows by name (isConcat) takes
	// the embedding first (Forward.EmbeddingFirst; TestFamilyStaticFacts
	// holds it); Inkling's, hidden first, is input_proj, checked whole.
	e, embeddingFirst := health.Expect{Centre: 1, ZeroCentred: fam != nil && fam.ZeroCentredHead}, true
	if drafter && fam != nil && fam.MLX.DrafterNormsStored {
		e.Centre = 0 // the drafter's zero-centred norms are stored raw
	}
	r := &health.Report{Problems: missingHead(raw, cfg.ModelType, drafter, tensors)}
	for _, name := range heads {
		if strings.HasSuffix(name, ".scales") || strings.HasSuffix(name, ".biases") {
			continue
		}
		if err := checkTensor(r, tensors, name, cfg.Quantization, e, embeddingFirst); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return r, nil
}

// familyOf is the family of a folder's config.json, or of its drafter
// model_type; nil for none.
func familyOf(raw []byte, modelType string) *model.Family {
	if c, err := model.ParseConfig(raw); err == nil {
		if f, err := c.Family(); err == nil {
			return f
		}
	}
	var fam *model.Family
	model.FamiliesWhere(func(f *model.Family) bool {
		if modelType != "" && f.MLX.DrafterModelType == modelType && fam == nil {
			fam = f
		}
		return false
	})
	return fam
}

// missingHead names the head's own tensors (model.Spec.HeadOwn, MTP
// layer 0) the folder lacks: in a drafter under the drafter's names (those
// every family of its model_type holds), in a model holding a head apart
// under the checkpoint's names (as the combined target writes them, not
// renamed by another converter). A head in the layer list is not looked
// for in a model: no MLX model keeps one (every such family refuses
// --target combined).
func missingHead(raw []byte, modelType string, drafter bool, present map[string]storedTensor) []string {
	var want []string
	if drafter {
		first := true
		model.FamiliesWhere(func(f *model.Family) bool {
			if f.MLX.DrafterModelType != modelType {
				return false
			}
			var names []string
			for _, rel := range f.HeadOwn(0) {
				if f.MLX.DrafterName != nil {
					rel = f.MLX.DrafterName(rel)
				}
				names = append(names, rel)
			}
			if first {
				want, first = names, false
			} else {
				want = slices.DeleteFunc(want, func(n string) bool { return !slices.Contains(names, n) })
			}
			return false
		})
	} else if c, err := model.ParseConfig(raw); err == nil {
		if f, err := c.Family(); err == nil && !f.Spec(c).HeadInLayers && holdsPrefix(present, f.Spec(c).HeadPrefix) {
			m := &model.Model{Config: c, Spec: f.Spec(c), Family: f}
			for _, rel := range f.HeadOwn(0) {
				want = append(want, m.HeadName(rel))
			}
		}
	}
	out := []string{}
	for _, n := range want {
		if _, ok := present[n]; !ok {
			out = append(out, fmt.Sprintf("%s is missing: the MTP head is incomplete (the MTP forward reads it; the head cannot draft)", n))
		}
	}
	return out
}

// holdsPrefix reports whether a tensor's name starts with prefix (a head
// apart under the checkpoint's names, not one a converter renamed).
func holdsPrefix(tensors map[string]storedTensor, prefix string) bool {
	for n := range tensors {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// isConcat: the concat projection's MLX names (Qwen's mtp.fc, GLM's eh_proj).
func isConcat(name string) bool {
	return name == "fc.weight" || strings.HasSuffix(name, ".fc.weight") || strings.HasSuffix(name, "eh_proj.weight")
}

// checkTensor adds one head tensor of the folder to the report.
func checkTensor(r *health.Report, tensors map[string]storedTensor, name string, q map[string]json.RawMessage, e health.Expect, embeddingFirst bool) error {
	t := tensors[name]
	shape := t.info.Shape
	if len(shape) == 0 {
		return nil
	}
	rowLen := shape[len(shape)-1]
	read := func(entry string, off, n int64) ([]byte, error) {
		s, ok := tensors[entry]
		if !ok || off < 0 || off+n > s.info.Bytes() {
			return nil, fmt.Errorf("entry %s: [%d, %d) is not stored", entry, off, off+n)
		}
		b := make([]byte, n)
		_, err := s.file.ReadAt(b, s.info.Begin+off)
		return b, err
	}
	var decode func(row, n int64) ([]float32, error)
	base := strings.TrimSuffix(name, ".weight")
	if scales, ok := tensors[base+".scales"]; ok && t.info.DType == st.U32 {
		p, mode, err := quantOf(q, base)
		if err != nil {
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s (%v)", name, err))
			return nil
		}
		rowLen = rowLen * 32 / int64(p.Bits)
		c, err := codec.For(mode)
		if err == nil {
			err = c.Validate(p, rowLen)
		}
		if err != nil {
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s (%v)", name, err))
			return nil
		}
		dt := scales.info.DType
		decode = func(row, n int64) ([]float32, error) {
			return c.Dequantize(codec.Chunk{Name: name, RowLen: rowLen, DType: dt, P: p, Rows: n, OutRow: row}, read)
		}
	} else {
		size, err := t.info.DType.Size()
		if err != nil || (t.info.DType != st.BF16 && t.info.DType != st.F16 && t.info.DType != st.F32) {
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s (%s)", name, t.info.DType))
			return nil
		}
		decode = func(row, n int64) ([]float32, error) {
			b, err := read(name, row*rowLen*size, n*rowLen*size)
			if err != nil {
				return nil, err
			}
			vals := make([]float32, n*rowLen)
			return vals, quant.DecodeF32(string(t.info.DType), b, vals)
		}
	}
	var parts []health.Part
	if isConcat(name) && rowLen%2 == 0 {
		parts = health.ConcatParts(rowLen, embeddingFirst)
	}
	rows := t.info.Elements() / max(t.info.Shape[len(shape)-1], 1)
	return r.Check(name, health.KindOf(name, len(shape)), parts, rows, rowLen, e, decode)
}

// quantOf is a module's quantization: its own entry in config.json's
// "quantization", else the folder's default.
func quantOf(q map[string]json.RawMessage, module string) (codec.Params, codec.Mode, error) {
	var fq folderQuant
	if raw, ok := q[module]; ok {
		if err := json.Unmarshal(raw, &fq); err != nil {
			return codec.Params{}, "", fmt.Errorf("its quantization entry: %w", err)
		}
	} else {
		for k, dst := range map[string]any{"group_size": &fq.GroupSize, "bits": &fq.Bits, "mode": &fq.Mode} {
			if raw, ok := q[k]; ok {
				json.Unmarshal(raw, dst)
			}
		}
	}
	if fq.Mode == "" {
		fq.Mode = "affine"
	}
	mode, ok := mlxModes[fq.Mode]
	if !ok || fq.Bits <= 0 || fq.GroupSize <= 0 {
		return codec.Params{}, "", fmt.Errorf("quantization %d-bit, group %d, mode %q is not one mtpconv decodes", fq.Bits, fq.GroupSize, fq.Mode)
	}
	// Decoding does not depend on the kernel that rounded; the CPU one is
	// the one every width validates for (1 bit included).
	return codec.Params{Bits: fq.Bits, Group: fq.GroupSize, Rounding: "cpu"}, mode, nil
}
