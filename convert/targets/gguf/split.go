package gguf

// A bundled GGUF (a trunk with its MTP head, as convert_hf_to_gguf.py
// writes by default) as a source: the MTP-only sidecar is the same file
// without the trunk's blocks, every kept tensor's bytes copied unchanged.
// PlanSplit decides it; convert/ggufsplit writes it (an application beside
// convert/export, through the same output folder).

import (
	"fmt"
	"path/filepath"
	"strings"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// sidecarKeeps are the tensors outside blocks an MTP-only sidecar holds:
// those the GGUF tables of the architecture's families name (the
// embedding, final norm and lm_head), and rope_freqs.
func sidecarKeeps(arch string) map[string]bool {
	// rope_freqs (llama3 RoPE scaling) is read by every layer, the MTP
	// blocks too: the reference's sidecar holds it.
	keep := map[string]bool{gg.Weight(gg.KindRopeFreqs).In(-1): true}
	for _, f := range familiesOf(arch) {
		for _, n := range f.GGUF.Top {
			keep[n.In(-1)] = true
		}
	}
	return keep
}

// SplitPlan is the sidecar of a bundled GGUF: its file name, the source's
// files (one, or a split set's members), its metadata (the source's first
// file's, less split.*), and the parts (tensors kept, in the source's order,
// each from its file).
type SplitPlan struct {
	File    string
	Header  *gg.File // the source's first file's metadata, every file's tensors
	Members []gg.Member
	KV      []gg.KV
	Parts   []gg.Part
}

// PlanSplit decides the sidecar of the bundled GGUF at path (a file, or any
// member of a split set): the same metadata (block_count and
// nextn_predict_layers already count the head), token_embd, output_norm,
// output and the MTP blocks.
func PlanSplit(path string) (*SplitPlan, error) {
	files, err := openGGUFFiles(path)
	if err != nil {
		return nil, err
	}
	f := files.merged
	var size int64
	for _, m := range files.members {
		size += m.Size
	}
	s := gg.Summarize(filepath.Base(path), size, f)
	switch {
	case len(s.Problems) > 0:
		return nil, fmt.Errorf("%s: %s", path, s.Problems[0])
	case s.MTPOnly:
		return nil, fmt.Errorf("%s is already an MTP-only sidecar", path)
	case !s.MTPHead:
		return nil, fmt.Errorf("%s holds no MTP head (%s.nextn_predict_layers is not set): there is no sidecar to split from it", path, s.Architecture)
	}
	keeps := sidecarKeeps(s.Architecture)
	if len(keeps) == 0 {
		return nil, fmt.Errorf("%s: general.architecture %q is not one mtpconv writes an MTP sidecar of", path, s.Architecture)
	}
	nLayer := s.BlockCount - s.NextnLayers
	p := &SplitPlan{Header: f, Members: files.members, KV: files.sidecarKV()}
	for i, m := range files.members {
		for _, t := range m.File.Tensors {
			if keeps[t.Name] || int64(blockOf(t.Name)) >= nLayer {
				p.Parts = append(p.Parts, gg.Part{Info: t, Copied: true, From: t.Offset, Member: i})
			}
		}
	}
	typ := s.FileType
	if typ == "" {
		typ = "F32"
	}
	name := strings.TrimSuffix(files.file(0), ".gguf")
	if files.split() {
		name, _, _, _ = gg.SplitName(files.file(0))
	}
	if n, ok := strings.CutSuffix(strings.ToUpper(name), "-"+strings.ToUpper(typ)); ok {
		name = name[:len(n)]
	}
	p.File = "mtp-" + name + "-" + typ + ".gguf"
	return p, nil
}
