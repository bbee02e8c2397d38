package gguf

// A bundled GGUF (a trunk with its MTP head, as convert_hf_to_gguf.py
// writes by default) as a source: the MTP-only sidecar is the same file
// without the trunk's blocks, every kept tensor's bytes copied unchanged.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/export"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/manifests"
)

// sidecarKeeps are the tensors outside blocks an MTP-only sidecar holds:
// those the GGUF tables of the architecture's families name (the
// embedding, final norm and lm_head).
func sidecarKeeps(arch string) map[string]bool {
	keep := map[string]bool{}
	for _, s := range familiesOf(arch) {
		for _, n := range s.GGUF.Top {
			keep[n.In(-1)] = true
		}
	}
	return keep
}

// SplitPlan is the sidecar of a bundled GGUF: its file name, the parsed
// source and the parts (tensors kept, in the source's order).
type SplitPlan struct {
	File   string
	Header *gg.File
	Size   int64
	SHA256 string // of the source's header
	Parts  []gg.Part
}

// PlanSplit decides the sidecar of the bundled GGUF at path: the same
// metadata (block_count and nextn_predict_layers already count the head),
// token_embd, output_norm, output and the MTP blocks.
func PlanSplit(path string) (*SplitPlan, error) {
	f, size, sum, err := gg.OpenFingerprint(path)
	if err != nil {
		return nil, err
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
	p := &SplitPlan{Header: f, Size: size, SHA256: sum}
	for _, t := range f.Tensors {
		if keeps[t.Name] || int64(blockOf(t.Name)) >= nLayer {
			p.Parts = append(p.Parts, gg.Part{Info: t, Copied: true, From: t.Offset})
		}
	}
	typ := s.FileType
	if typ == "" {
		typ = "F32"
	}
	name := strings.TrimSuffix(filepath.Base(path), ".gguf")
	if n, ok := strings.CutSuffix(strings.ToUpper(name), "-"+strings.ToUpper(typ)); ok {
		name = name[:len(n)]
	}
	p.File = "mtp-" + name + "-" + typ + ".gguf"
	return p, nil
}

// Split writes the sidecar of a bundled GGUF into out, a new folder (or,
// with force, one mtpconv wrote), with its manifest.
func Split(ctx context.Context, path, out string, force bool, version string) (*export.Outcome, error) {
	p, err := PlanSplit(path)
	if err != nil {
		return nil, err
	}
	a, err := gg.Assemble(p.Header.KV, p.Parts, p.Header)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	oc := &export.Outcome{Tensors: len(p.Parts), Reused: []string{}}
	err = export.WriteFolder(ctx, out, force, path, []string{p.File}, func(dir string) error {
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		if _, _, sum, err := gg.OpenFingerprint(path); err != nil || sum != p.SHA256 {
			return fmt.Errorf("%s changed while it was read", path)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := gg.WriteAssembly(filepath.Join(dir, p.File), a, src); err != nil {
			return err
		}
		size, sum, err := manifests.HashFile(filepath.Join(dir, p.File))
		if err != nil {
			return err
		}
		man := &manifests.Manifest{
			Schema: manifests.SchemaVersion, Tool: manifests.Tool{Name: "mtpconv", Version: version},
			Source: manifests.Source{Name: path, Shards: []manifests.Shard{{Name: filepath.Base(path), Size: p.Size, HeaderSHA256: p.SHA256}},
				TotalBytes: p.Size, Tensors: []manifests.SourceTensor{}},
			Target:  "gguf",
			Options: map[string]string{"split_from": filepath.Base(path), "gguf_file_type": p.Header.String("general.file_type")},
			Model:   manifests.Model{NormConvention: "as stored in the source GGUF"},
			Tensors: []manifests.Tensor{}, Files: []manifests.File{{Name: p.File, Size: size, SHA256: sum}},
		}
		if ft, ok := p.Header.Uint("general.file_type"); ok {
			man.Options["gguf_file_type"] = gg.FileType(ft).String()
		}
		if err := man.Write(dir); err != nil {
			return err
		}
		oc.Files = append(oc.Files, man.Files...)
		oc.BytesOut += size
		for _, c := range a.Copies {
			oc.BytesRead += c.Len
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	oc.Notes = append(oc.Notes, fmt.Sprintf("%s: the MTP head of %s, its %d tensors' bytes unchanged; load it with -md next to a trunk GGUF of the same model, --spec-type draft-mtp", p.File, filepath.Base(path), len(p.Parts)))
	return oc, nil
}
