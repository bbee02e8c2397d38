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
// embedding, final norm and lm_head), and rope_freqs.
func sidecarKeeps(arch string) map[string]bool {
	// rope_freqs (llama3 RoPE scaling) is read by every layer, the MTP
	// blocks too: the reference's sidecar holds it.
	keep := map[string]bool{gg.Weight(gg.KindRopeFreqs).In(-1): true}
	for _, s := range familiesOf(arch) {
		for _, n := range s.GGUF.Top {
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

// Split writes the sidecar of a bundled GGUF into out, a new folder (or,
// with force, one mtpconv wrote), with its manifest.
func Split(ctx context.Context, path, out string, force bool, version string) (*export.Outcome, error) {
	p, err := PlanSplit(path)
	if err != nil {
		return nil, err
	}
	var headers []*gg.File
	var shards []manifests.Shard
	var total int64
	for _, m := range p.Members {
		headers = append(headers, m.File)
		shards = append(shards, manifests.Shard{Name: filepath.Base(m.Path), Size: m.Size, HeaderSHA256: m.SHA256})
		total += m.Size
	}
	a, err := gg.Assemble(p.KV, p.Parts, headers...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	oc := &export.Outcome{Tensors: len(p.Parts), Reused: []string{}}
	err = export.WriteFolder(ctx, out, force, path, []string{p.File}, func(dir string) error {
		var srcs []*os.File
		defer func() {
			for _, f := range srcs {
				f.Close()
			}
		}()
		for _, m := range p.Members {
			src, err := os.Open(m.Path)
			if err != nil {
				return err
			}
			srcs = append(srcs, src)
			if _, size, sum, err := gg.OpenFingerprint(m.Path); err != nil || sum != m.SHA256 || size != m.Size {
				return fmt.Errorf("%s changed while it was read", m.Path)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := gg.WriteAssembly(filepath.Join(dir, p.File), a, srcs...); err != nil {
			return err
		}
		size, sum, err := manifests.HashFile(filepath.Join(dir, p.File))
		if err != nil {
			return err
		}
		man := &manifests.Manifest{
			Schema: manifests.SchemaVersion, Tool: manifests.Tool{Name: "mtpconv", Version: version},
			Source:  manifests.Source{Name: path, Shards: shards, TotalBytes: total, Tensors: []manifests.SourceTensor{}},
			Target:  "gguf",
			Options: map[string]string{"split_from": filepath.Base(p.Members[0].Path), "gguf_file_type": p.Header.String("general.file_type")},
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
	from := filepath.Base(path)
	if len(p.Members) > 1 {
		from = fmt.Sprintf("the split set %s (%d files)", filepath.Base(p.Members[0].Path), len(p.Members))
	}
	oc.Notes = append(oc.Notes, fmt.Sprintf("%s: the MTP head of %s, its %d tensors' bytes unchanged; load it with -md next to a trunk GGUF of the same model, --spec-type draft-mtp", p.File, from, len(p.Parts)))
	return oc, nil
}
