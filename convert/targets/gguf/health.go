package gguf

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant"
)

// ehProj is llama.cpp's concat projection of every architecture it drafts
// with: nextn.eh_proj over ggml_concat(enorm(embedding), hnorm(hidden)),
// the embedding first (qwen35moe, qwen3next, glm4moe, deepseek2 alike).
const ehProj = "nextn.eh_proj.weight"

// headHealth judges the tensors of a GGUF file's MTP blocks from their
// stored values (health.Report): decoded as llama.cpp dequantizes them,
// every norm expected to centre on 1 (GGUF stores RMSNorm weights as
// applied: a zero-centred family's +1 is in the file).
func headHealth(path string, f *gg.File, s *gg.Summary) (*health.Report, error) {
	r := &health.Report{Problems: []string{}}
	blocks := map[string]bool{}
	for _, b := range s.MTPBlocks {
		blocks["blk."+strconv.FormatInt(b, 10)+"."] = true
	}
	e := health.Expect{Centre: 1, ZeroCentred: zeroCentred(s.Architecture)}
	// f is the file at path, or a split set's merged header: each tensor is
	// read from the file of the set that holds it.
	files := &ggufFiles{members: []gg.Member{{Path: path, File: f}}, merged: f}
	if gg.IsSplit(f) {
		var err error
		if files, err = openGGUFFiles(path); err != nil {
			return nil, err
		}
	}
	present := map[string]bool{}
	for _, m := range files.members {
		for _, t := range m.File.Tensors {
			present[t.Name] = true
		}
	}
	r.Problems = append(r.Problems, missingHead(s.Architecture, s.MTPBlocks, present)...)
	for _, m := range files.members {
		if err := checkMember(r, m, blocks, e); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// missingHead names the head's own tensors (model.Spec.HeadOwn) the MTP
// blocks lack under llama.cpp's names: those every family llama.cpp names
// arch holds. MTP layer j is block blocks[0]+j, the head's top tensors are
// in block blocks[0].
func missingHead(arch string, blocks []int64, present map[string]bool) []string {
	specs := familiesOf(arch)
	if len(specs) == 0 || len(blocks) == 0 {
		return nil
	}
	var out []string
	for _, b := range blocks {
		j := int(b - blocks[0])
		var want []string
		for i, s := range specs {
			var names []string
			for _, rel := range s.HeadOwn(j) {
				if n, err := headName(s.GGUF, rel, int(blocks[0])); err == nil {
					names = append(names, n)
				}
			}
			if i == 0 {
				want = names
			} else {
				want = slices.DeleteFunc(want, func(n string) bool { return !slices.Contains(names, n) })
			}
		}
		for _, n := range want {
			if !present[n] {
				out = append(out, fmt.Sprintf("%s is missing: the MTP head is incomplete (llama.cpp's %s MTP graph needs it; the head cannot draft)", n, arch))
			}
		}
	}
	return out
}

// checkMember adds the MTP block tensors of one file to the report.
func checkMember(r *health.Report, m gg.Member, blocks map[string]bool, e health.Expect) error {
	file, _, err := st.OpenRegular(m.Path)
	if err != nil {
		return err
	}
	defer file.Close()
	for _, t := range m.File.Tensors {
		parts := strings.SplitN(t.Name, ".", 3)
		if len(parts) < 3 || !blocks[parts[0]+"."+parts[1]+"."] {
			continue
		}
		if err := checkTensor(r, file, m.File, t, e); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
	}
	return nil
}

// checkTensor adds one tensor of the file to the report.
func checkTensor(r *health.Report, file *os.File, f *gg.File, t gg.TensorInfo, e health.Expect) error {
	typ := t.Type.String()
	if len(t.Dims) == 0 {
		return nil
	}
	rowLen := t.Dims[0]
	rows := t.Elements() / max(rowLen, 1)
	var rowBytes int64
	switch typ {
	case "F32":
		rowBytes = 4 * rowLen
	case "F16", "BF16":
		rowBytes = 2 * rowLen
	default:
		qk, bs, err := quant.GGMLDecodeBlock(typ)
		if err != nil || rowLen%int64(qk) != 0 {
			r.Unchecked = append(r.Unchecked, fmt.Sprintf("%s (%s: mtpconv has no decoder for it)", t.Name, typ))
			return nil
		}
		rowBytes = rowLen / int64(qk) * int64(bs)
	}
	var parts []health.Part
	if strings.HasSuffix(t.Name, "."+ehProj) && rowLen%2 == 0 {
		parts = health.ConcatParts(rowLen, true)
	}
	var buf []byte
	return r.Check(t.Name, health.KindOf(t.Name, len(t.Dims)), parts, rows, rowLen, e, func(row, n int64) ([]float32, error) {
		if int64(cap(buf)) < n*rowBytes {
			buf = make([]byte, n*rowBytes)
		}
		buf = buf[:n*rowBytes]
		if _, err := file.ReadAt(buf, f.DataOffset+t.Offset+row*rowBytes); err != nil {
			return nil, err
		}
		vals := make([]float32, n*rowLen)
		return vals, quant.DequantizeGGML(typ, buf, vals)
	})
}

// zeroCentred says whether the families llama.cpp names arch apply their
// head's RMSNorms as 1+w.
func zeroCentred(arch string) bool {
	for _, f := range familiesOf(arch) {
		if f.ZeroCentredHead {
			return true
		}
	}
	return false
}
