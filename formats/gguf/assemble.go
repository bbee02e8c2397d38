package gguf

import (
	"fmt"
	"os"
)

// Part is one tensor of a GGUF file assembled from another GGUF file's
// tensors and new ones: its info (the offset is placed by Assemble) and,
// for a tensor whose bytes are copied unchanged, where they are in the
// source (from the start of its data section) and, when the file is
// assembled from several sources (the members of a split set), which.
type Part struct {
	Info   TensorInfo
	Copied bool
	From   int64 // Copied: offset in the source's data section
	Member int   // Copied: the index of its source
}

// Copy is a byte range copied from a source file (Member, the index of the
// source) into the output, both offsets from the start of the files.
type Copy struct {
	Src, Dst, Len int64
	Member        int
}

// Assembly is the layout of an assembled GGUF file: its header, where every
// tensor lands (from the start of the file), the ranges copied from the
// source, and the file's size.
type Assembly struct {
	Header  []byte
	Offsets map[string]int64
	Sizes   map[string]int64
	Copies  []Copy
	Size    int64
}

// Assemble lays out a GGUF file holding kvs and parts, in order, each at the
// file's alignment. Copied parts keep their bytes, from srcs[Part.Member];
// consecutive copied parts that are consecutive in the same source too (at
// the same alignment) are copied as one range, padding included, so a whole
// tensor-data region is one copy.
func Assemble(kvs []KV, parts []Part, srcs ...*File) (*Assembly, error) {
	align := int64(DefaultAlignment)
	for _, kv := range kvs {
		if kv.Key == "general.alignment" {
			if n, ok := kv.Value.Int(); ok && n > 0 {
				align = n
			}
		}
	}
	sizes := make([]int64, len(parts))
	infos := make([]TensorInfo, len(parts))
	for i, p := range parts {
		n, err := p.Info.Bytes()
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", p.Info.Name, err)
		}
		sizes[i], infos[i] = n, p.Info
	}
	offs, total := Place(sizes, align)
	for i := range infos {
		infos[i].Offset = offs[i]
	}
	hdr, err := EncodeHeader(kvs, infos)
	if err != nil {
		return nil, err
	}
	base := int64(len(hdr))
	a := &Assembly{Header: hdr, Offsets: map[string]int64{}, Sizes: map[string]int64{}, Size: base + total}
	for i, p := range parts {
		a.Offsets[p.Info.Name], a.Sizes[p.Info.Name] = base+offs[i], sizes[i]
		if !p.Copied {
			continue
		}
		if p.Member < 0 || p.Member >= len(srcs) || srcs[p.Member] == nil {
			return nil, fmt.Errorf("tensor %s: copied without a source file", p.Info.Name)
		}
		src := srcs[p.Member]
		c := Copy{Src: src.DataOffset + p.From, Dst: base + offs[i], Len: sizes[i], Member: p.Member}
		if k := len(a.Copies) - 1; k >= 0 && i > 0 && parts[i-1].Copied && parts[i-1].Member == p.Member && src.Alignment == align {
			last := &a.Copies[k]
			if prevEnd := pad(parts[i-1].From+sizes[i-1], align); prevEnd == p.From {
				last.Len = c.Src + c.Len - last.Src
				continue
			}
		}
		a.Copies = append(a.Copies, c)
	}
	return a, nil
}

// WriteAssembly writes an assembly whose tensors are all copied from srcs
// (open for reading, in the order Assemble was given them) to a new file at
// path: the header, then each range by the kernel where it can.
func WriteAssembly(path string, a *Assembly, srcs ...*os.File) error {
	if len(a.Copies) == 0 && len(a.Offsets) > 0 {
		return fmt.Errorf("%s: nothing to copy", path)
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := out.WriteAt(a.Header, 0); err != nil {
		return err
	}
	if err := out.Truncate(a.Size); err != nil {
		return err
	}
	for _, c := range a.Copies {
		if c.Member < 0 || c.Member >= len(srcs) {
			return fmt.Errorf("%s: a copy from source %d of %d", path, c.Member, len(srcs))
		}
		src := srcs[c.Member]
		if err := CopyRange(out, src, c); err != nil {
			return fmt.Errorf("%s: copying from %s: %w", path, src.Name(), err)
		}
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}
