package gguf

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
)

// llama-quantize's per-tensor type choice (src/llama-quant.cpp:
// llama_tensor_get_type and llama_tensor_get_type_impl, no imatrix, no
// overrides) for the file types mtpconv writes, restricted to what these
// architectures hold (the arch is never Falcon, the
// model type is never 70B; the rules for exactly 8 experts are kept for
// the small test models that have 8). Tensors are visited in the order llama-quantize
// visits them (block, then name): the attn_v counter depends on it.

// defaultType is llama_ftype_get_default_type.
var defaultType = map[gg.FileType]string{
	gg.FileF16: "F16", gg.FileBF16: "BF16", gg.FileQ8_0: "Q8_0", gg.FileQ4_0: "Q4_0",
	gg.FileQ4_K_M: "Q4_K", gg.FileQ4_K_S: "Q4_K", gg.FileQ5_K_M: "Q5_K", gg.FileQ6_K: "Q6_K",
}

var blockSize = map[string]int64{"Q4_0": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32, "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}

func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

func blockOf(name string) int {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 {
			if v, err := strconv.Atoi(rest[:i]); err == nil {
				return v
			}
		}
	}
	return -1
}

// llamaQuantizeCmp orders tensor names as llama-quantize writes them (its
// loader's weight map): tensors outside blocks first, then by block, each
// group by name.
func llamaQuantizeCmp(a, b string) int {
	return cmp.Or(cmp.Compare(blockOf(a), blockOf(b)), strings.Compare(a, b))
}

// plannedTensor is a tensor's name, PyTorch shape (unit dimensions
// dropped) and the type it has in the bf16 sidecar.
type plannedTensor struct {
	name  string
	shape []int64
	in    string
}

// llamaQuantizeTypes gives each tensor the type llama-quantize writes it
// in, for file type ft; nLayerAll is the block count (trunk + MTP), nExpert
// the model's expert count (0 for the dense qwen35).
func llamaQuantizeTypes(ts []plannedTensor, ft gg.FileType, nLayerAll, nExpert int) map[string]string {
	order := slices.Clone(ts)
	slices.SortStableFunc(order, func(a, b plannedTensor) int { return llamaQuantizeCmp(a.name, b.name) })
	nAttnV, tied := 0, true
	for _, t := range order {
		c := gg.QuantizeCategory(t.name)
		if c.IsAttnV() {
			nAttnV++
		}
		if c == gg.CatOutput {
			tied = false
		}
	}
	def := defaultType[ft]
	quantized := blockSize[def] > 0
	q := &quantState{nAttnV: nAttnV, nLayer: nLayerAll, moe: nExpert > 1, eight: nExpert == 8}
	out := map[string]string{}
	for _, t := range order {
		if !gg.QuantizeAllowed(t.name, len(t.shape)) {
			out[t.name] = t.in
			continue
		}
		typ := def
		if quantized {
			typ = typeImpl(typ, t, ft, gg.QuantizeCategory(t.name), tied, q)
			typ = fallback(typ, t.shape[len(t.shape)-1])
		}
		out[t.name] = typ
	}
	return out
}

// quantState is llama-quantize's quantize_state_impl counters: attn_v
// tensors seen and of all, ffn_down tensors seen, the block count; moe
// (more than one expert) takes an ffn_down's layer from its name, else the
// layer is the count of ffn_down tensors seen before it.
type quantState struct {
	iAttnV, nAttnV, iFFNDown, nLayer int
	moe                              bool
	eight                            bool // exactly 8 experts: attn_v and attn_k Q8_0, attn_output Q5_K at Q4_K_*
}

// typeImpl is llama_tensor_get_type_impl for the file types above.
func typeImpl(typ string, t plannedTensor, ft gg.FileType, c gg.QuantCategory, tied bool, q *quantState) string {
	if c == gg.CatOutput || (tied && c == gg.CatTokenEmbd) {
		nx := t.shape[len(t.shape)-1]
		switch {
		case nx%blockSize[typ] != 0:
			return "Q8_0"
		case typ != "Q8_0":
			return "Q6_K"
		}
		return typ
	}
	switch {
	case c.IsAttnV():
		switch {
		case (ft == gg.FileQ4_K_M || ft == gg.FileQ5_K_M) && useMoreBits(q.iAttnV, q.nAttnV):
			typ = "Q6_K"
		case ft == gg.FileQ4_K_S && q.iAttnV < 4:
			typ = "Q5_K"
		}
		if q.eight {
			typ = "Q8_0"
		}
		q.iAttnV++
	case c == gg.CatAttnK && q.eight:
		typ = "Q8_0"
	case c == gg.CatAttnOutput && q.eight && (ft == gg.FileQ4_K_S || ft == gg.FileQ4_K_M):
		typ = "Q5_K"
	case c == gg.CatFFNDown:
		// With more than one expert the layer comes from the name, else
		// from the counter (a dense sidecar's one ffn_down is layer 0).
		i, nLayer := q.iFFNDown, q.nLayer
		if q.moe {
			i = blockOf(t.name)
		}
		q.iFFNDown++
		switch {
		case ft == gg.FileQ4_K_M && useMoreBits(i, nLayer):
			typ = "Q6_K"
		case ft == gg.FileQ5_K_M && useMoreBits(i, nLayer):
			typ = "Q6_K"
		case ft == gg.FileQ4_K_S && i < nLayer/8:
			typ = "Q5_K"
		}
	case c == gg.CatAttnQKV:
		switch ft {
		case gg.FileQ4_K_M:
			typ = "Q5_K"
		case gg.FileQ5_K_M:
			typ = "Q6_K"
		}
	}
	return typ
}

// fallback is tensor_type_fallback: a row that is not whole blocks of the
// type takes a type of 32-value blocks, else F16.
func fallback(typ string, ncols int64) string {
	if ncols%blockSize[typ] == 0 {
		return typ
	}
	r := map[string]string{"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}[typ]
	if r == "" {
		r = typ
	}
	if ncols%blockSize[r] != 0 {
		return "F16"
	}
	return r
}
