// Command synthtrunk writes a real-size synthetic trunk GGUF of a checkpoint
// for the graft benchmark: the metadata mtpconv's test trunk has (so --graft
// accepts it as the same model), every tensor at its real shape filled with
// pseudo-random bytes, streamed (never held whole). The embedding and
// lm_head are F32, the rest BF16, which puts the 4-layer real-size Qwen3.6
// checkpoint's trunk above 10 GB.
//
//	go run ./bench/synthtrunk SRC OUT.gguf
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	_ "github.com/mtpconv/mtpconv/convert/families" // registers the families
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/internal/gguftrunk"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: synthtrunk SRC OUT.gguf")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "synthtrunk:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	m, err := model.Load(source.Dir(src))
	if err != nil {
		return err
	}
	defer m.Checkpoint.Close()
	kvs, err := gguftrunk.TrunkMetadata(m, "synthetic")
	if err != nil {
		return err
	}
	c := m.Config
	h, e, moe := int64(c.HiddenSize), int64(c.NumExperts), int64(c.MoeIntermediateSize)
	vocab := int64(m.Checkpoint.Tensors[m.TextPrefix+"embed_tokens.weight"].Shape[0])
	q := int64(c.NumAttentionHeads * c.HeadDim)
	kv := int64(c.NumKeyValueHeads * c.HeadDim)
	lin := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	linK := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	var ts []gg.TensorInfo
	add := func(name string, typ gg.GGMLType, dims ...int64) {
		ts = append(ts, gg.TensorInfo{Name: name, Dims: dims, Type: typ})
	}
	add("token_embd.weight", gg.F32, h, vocab)
	for i := 0; i < c.NumHiddenLayers; i++ {
		b := "blk." + strconv.Itoa(i) + "."
		add(b+"attn_norm.weight", gg.F32, h)
		add(b+"post_attention_norm.weight", gg.F32, h)
		if m.LayerTypes[i] == model.FullAttention {
			add(b+"attn_q.weight", gg.BF16, h, 2*q)
			add(b+"attn_k.weight", gg.BF16, h, kv)
			add(b+"attn_v.weight", gg.BF16, h, kv)
			add(b+"attn_output.weight", gg.BF16, q, h)
		} else {
			add(b+"attn_qkv.weight", gg.BF16, h, 2*linK+lin)
			add(b+"attn_gate.weight", gg.BF16, h, lin)
			add(b+"ssm_out.weight", gg.BF16, lin, h)
		}
		add(b+"ffn_gate_inp.weight", gg.F32, h, e)
		add(b+"ffn_gate_shexp.weight", gg.BF16, h, moe)
		add(b+"ffn_up_shexp.weight", gg.BF16, h, moe)
		add(b+"ffn_down_shexp.weight", gg.BF16, moe, h)
		add(b+"ffn_gate_exps.weight", gg.BF16, h, moe, e)
		add(b+"ffn_up_exps.weight", gg.BF16, h, moe, e)
		add(b+"ffn_down_exps.weight", gg.BF16, moe, h, e)
	}
	add("output_norm.weight", gg.F32, h)
	add("output.weight", gg.F32, h, vocab)
	sizes := make([]int64, len(ts))
	for i, t := range ts {
		if sizes[i], err = t.Bytes(); err != nil {
			return err
		}
	}
	offs, total := gg.Place(sizes, gg.DefaultAlignment)
	for i := range ts {
		ts[i].Offset = offs[i]
	}
	hdr, err := gg.EncodeHeader(kvs, ts)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 4<<20)
	w.Write(hdr)
	x := uint64(0x9E3779B97F4A7C15)
	buf := make([]byte, 1<<20)
	var at int64
	for i := range ts {
		for ; at < offs[i]; at++ {
			w.WriteByte(0)
		}
		for left := sizes[i]; left > 0; {
			for j := 0; j < len(buf); j += 8 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				binary.LittleEndian.PutUint64(buf[j:], x)
			}
			n := min(left, int64(len(buf)))
			w.Write(buf[:n])
			left -= n
			at += n
		}
	}
	for ; at < total; at++ {
		w.WriteByte(0)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
