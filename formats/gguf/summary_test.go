package gguf

import (
	"slices"
	"testing"
)

// A file's MTP head: blk.*.nextn.* blocks at the end (a sidecar or a
// bundled file), or top-level nextn.* projections with every block the
// drafter's (a separate drafter model, gemma4-assistant); a file that
// declares nextn layers without either has a problem.
func TestSummarizeHead(t *testing.T) {
	t.Parallel()
	file := func(blocks, nextn uint32, names ...string) *File {
		f := &File{KV: []KV{Pair("general.architecture", Str("a")), Pair("a.block_count", U32(blocks)), Pair("a.nextn_predict_layers", U32(nextn))}}
		for _, n := range names {
			f.Tensors = append(f.Tensors, TensorInfo{Name: n, Type: F32, Dims: []int64{1}})
		}
		return f
	}
	for _, c := range []struct {
		name     string
		f        *File
		head     bool
		only     bool
		blocks   []int64
		problems int
	}{
		{"sidecar", file(3, 1, "blk.2.nextn.eh_proj.weight", "blk.2.attn_q.weight"), true, true, []int64{2}, 0},
		{"bundled", file(3, 1, "blk.0.attn_q.weight", "blk.2.nextn.eh_proj.weight"), true, false, []int64{2}, 0},
		{"drafter", file(2, 2, "nextn.pre_projection.weight", "blk.0.attn_q.weight", "blk.1.attn_q.weight"), true, true, []int64{0, 1}, 0},
		{"drafter count short", file(2, 1, "nextn.pre_projection.weight", "blk.0.attn_q.weight", "blk.1.attn_q.weight"), false, false, []int64{}, 1},
		{"no head", file(2, 1, "blk.0.attn_q.weight", "blk.1.attn_q.weight"), false, false, []int64{}, 1},
	} {
		s := Summarize(c.name, 0, c.f)
		if s.MTPHead != c.head || s.MTPOnly != c.only || !slices.Equal(s.MTPBlocks, c.blocks) || len(s.Problems) != c.problems {
			t.Errorf("%s: head %v only %v blocks %v problems %q", c.name, s.MTPHead, s.MTPOnly, s.MTPBlocks, s.Problems)
		}
	}
}
