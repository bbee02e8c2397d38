// Package ggufsplit is the second application beside convert/export: the
// MTP-only sidecar of a bundled GGUF (a trunk with its MTP head, as
// convert_hf_to_gguf.py writes by default), planned by the gguf target's
// PlanSplit and written into a new output folder with its manifest through
// export.WriteFolder, the same claim, lock and atomic rename as an export.
package ggufsplit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/targets/gguf"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/manifests"
)

// Split writes the sidecar of a bundled GGUF into out, a new folder (or,
// with force, one mtpconv wrote), with its manifest.
func Split(ctx context.Context, path, out string, force bool, version string) (*export.Outcome, error) {
	p, err := gguf.PlanSplit(path)
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
