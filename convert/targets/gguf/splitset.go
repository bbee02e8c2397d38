package gguf

// A trunk that is a split GGUF set (PREFIX-0000N-of-0000M.gguf): the graft
// writes a whole new set, every file named as the user's, each holding its
// trunk tensors byte for byte and the head tensors the bundled order puts
// after them. The set keeps its count (a new file would rename every
// member: llama.cpp finds them by "-%05d-of-%05d"), so the head goes into
// existing files: llama.cpp's loader takes a tensor from whichever file
// holds it and checks only the total (split.tensors.count, from the first
// file), and llama-gguf-split --merge concatenates the files in order, so
// the merged set is the bundled file a graft of the merged trunk gives.
// For a trunk in llama-quantize's order (every quant) that is the head
// appended to the last file.

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/plan"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// ggufFiles is a GGUF model as its files: one, or the members of a split
// set (a trunk a head is grafted into, a bundled file the head is split
// off).
type ggufFiles struct {
	members []gg.Member
	merged  *gg.File // the first file's metadata, every member's tensors in order
}

// openGGUFFiles reads the GGUF at path: the file, or when it is a member of
// a split set (any member), the whole set, checked to be one.
func openGGUFFiles(path string) (*ggufFiles, error) {
	f, size, sum, err := gg.OpenFingerprint(path)
	if err != nil {
		return nil, err
	}
	if !gg.IsSplit(f) {
		return &ggufFiles{members: []gg.Member{{Path: path, File: f, Size: size, SHA256: sum}}, merged: f}, nil
	}
	s, err := gg.OpenSet(path)
	if err != nil {
		return nil, err
	}
	return &ggufFiles{members: s.Members, merged: s.Merged()}, nil
}

// split reports a model in several files.
func (g *ggufFiles) split() bool { return len(g.members) > 1 }

// file is the base name of member i (a graft's output file: named as the user's).
func (g *ggufFiles) file(i int) string { return filepath.Base(g.members[i].Path) }

// bundledPlan lays the bundled file out over the trunk's files: its
// metadata (kvs, the first file's) and tensor order (every trunk tensor
// kept and the head), each head tensor in the file of the trunk tensor it
// follows (a head tensor before every trunk tensor: the file of the first).
// Each file is its trunk file's tensors, copied, and its share of the head;
// each file's split.tensors.count counts the whole new set.
func (g *ggufFiles) bundledPlan(target string, head []plan.OutTensor, kvs []gg.KV, order []string) (*plan.Plan, error) {
	p := &plan.Plan{
		Target: target, Formats: map[string]plan.FileFormat{}, Metadata: map[string]string{},
		GGUF: kvs, GGUFCopies: map[string]*plan.GGUFCopy{}, Options: map[string]string{},
	}
	headAt := map[string]int{}
	for i := range head {
		headAt[head[i].Name] = i
	}
	memberOf := map[string]int{}
	for i, m := range g.members {
		for _, t := range m.File.Tensors {
			memberOf[t.Name] = i
		}
	}
	cur := 0
	for _, n := range order {
		if _, isHead := headAt[n]; !isHead {
			cur = memberOf[n]
			break
		}
	}
	orders := make([][]string, len(g.members))
	for _, n := range order {
		if i, isHead := headAt[n]; isHead {
			head[i].File = g.file(cur)
		} else {
			cur = memberOf[n]
		}
		orders[cur] = append(orders[cur], n)
	}
	p.Tensors = head
	var bytes int64
	var sums []string
	for i, m := range g.members {
		file := g.file(i)
		c := &plan.GGUFCopy{Source: m.Path, Size: m.Size, HeaderSHA256: m.SHA256, Order: orders[i]}
		if g.split() {
			own := kvs
			if i > 0 {
				own = m.File.KV
			}
			var err error
			if c.Metadata, err = gg.SplitKV(own, int64(len(order))); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Path, err)
			}
		}
		p.TensorFiles = append(p.TensorFiles, file)
		p.Formats[file] = plan.FormatGGUF
		p.GGUFCopies[file] = c
		bytes += m.Size
		sums = append(sums, m.SHA256)
	}
	p.Options["graft"] = g.file(0)
	p.Options["graft_trunk_bytes"] = strconv.FormatInt(bytes, 10)
	p.Options["graft_trunk_header_sha256"] = strings.Join(sums, ",")
	if g.split() {
		p.Options["graft_split_count"] = strconv.Itoa(len(g.members))
	}
	return p, nil
}

// sidecarKV is the metadata of the sidecar split off the model: one file,
// so a split set's first file's metadata without the split keys.
func (g *ggufFiles) sidecarKV() []gg.KV {
	if !g.split() {
		return g.merged.KV
	}
	var kvs []gg.KV
	for _, kv := range g.merged.KV {
		if !gg.IsSplitKey(kv.Key) {
			kvs = append(kvs, kv)
		}
	}
	return kvs
}
