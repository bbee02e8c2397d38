// Package gguf is the "gguf" target: the MTP head as the MTP-only GGUF
// sidecar llama.cpp loads next to a trunk GGUF for speculative decoding
// (--spec-type draft-mtp). It writes what llama.cpp's reference converter
// (convert_hf_to_gguf.py --mtp) writes: the head as block n_layer + j under
// llama.cpp's names, plus token_embd, output_norm and output, norms shifted
// and in float32, the router and shared-expert gate in float32, the
// architecture's hyperparameters and the vocabulary. Quantized precisions
// are what llama-quantize makes of the bf16 sidecar.
package gguf

import (
	"fmt"
	"path"
	"strings"

	"github.com/mtpconv/mtpconv/convert"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

func init() { convert.RegisterTarget(target{}) }

type target struct{}

var _ convert.Target = target{}

func (target) Name() string { return "gguf" }
func (target) Usage() string {
	return "the MTP head as an MTP-only GGUF sidecar for llama.cpp (--spec-type draft-mtp)"
}
func (target) Accepts() []string { return []string{convert.OptHeadPrecision} }

// precision is one --head-precision value: the file type, the float type of
// unquantized weights, and the ggml block type of quantized ones.
type precision struct {
	name   string
	ftype  gg.FileType
	float  st.DType
	quant  string // "" for a float precision
	suffix string // in the file name
}

var precisions = map[string]precision{
	"bf16": {"bf16", gg.FileBF16, st.BF16, "", "BF16"},
	"f16":  {"f16", gg.FileF16, st.F16, "", "F16"},
	"int8": {"int8", gg.FileQ8_0, st.BF16, "Q8_0", "Q8_0"},
}

const defaultPrecision = "bf16"

func (t target) Plan(m *convert.Model, o convert.Options) (*convert.Plan, error) {
	pn := o.HeadPrecision
	if pn == "" {
		pn = defaultPrecision
	}
	prec, ok := precisions[pn]
	if !ok {
		if pn == "int4" {
			return nil, convert.UsageError{Err: fmt.Errorf("--head-precision int4 (Q4_K_M) is not implemented for --target gguf yet; use f16, bf16 or int8 (Q8_0)")}
		}
		return nil, convert.UsageError{Err: fmt.Errorf("--head-precision %q: must be bf16, f16 or int8 for --target gguf", pn)}
	}
	if _, ok := archOf[m.Family]; !ok {
		return nil, fmt.Errorf("--target gguf does not know llama.cpp's architecture for family %s", m.Family)
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if m.MTPDepth != 1 {
		return nil, fmt.Errorf("the head has %d MTP layers; llama.cpp's qwen35moe/qwen3next MTP graph supports exactly one", m.MTPDepth)
	}
	h, err := readHparams(m)
	if err != nil {
		return nil, err
	}
	vocab, err := vocabMetadata(m, h)
	if err != nil {
		return nil, err
	}
	name := path.Base(strings.TrimRight(strings.ReplaceAll(m.Checkpoint.Source.Name(), "\\", "/"), "/"))
	file := "mtp-" + name + "-" + prec.suffix + ".gguf"
	pl := &convert.Planner{M: m, File: file}
	if err := planTensors(pl, m, prec); err != nil {
		return nil, err
	}
	p := &convert.Plan{
		Target: t.Name(), Tensors: pl.Out, TensorFiles: []string{file},
		Formats:  map[string]convert.FileFormat{file: convert.FormatGGUF},
		Metadata: map[string]string{},
		GGUF:     metadata(m, h, prec.ftype, name, vocab),
		Options:  map[string]string{"head_precision": prec.name, "gguf_file_type": prec.ftype.String()},
	}
	return p, nil
}

// planTensors plans the sidecar's tensors: the trunk's embedding, final norm
// and lm_head, and the head as block n_layer.
func planTensors(pl *convert.Planner, m *convert.Model, prec precision) error {
	c := m.Config
	add := func(src, name string) {
		dims := len(m.Checkpoint.Tensors[src].Shape)
		dt := prec.float
		if f32Tensor(name, dims) {
			dt = st.F32
		}
		var rule convert.QuantRule
		if prec.quant != "" && quantizable(name, dims) {
			rule = func(string, string, int64) *convert.Quant {
				return &convert.Quant{Mode: convert.ModeGGML, Bits: 8, GroupSize: 32, GGMLType: prec.quant}
			}
		}
		pl.Plain(src, name, dt, rule)
	}
	pl.Component = convert.ComponentTrunk
	tp := m.TextPrefix
	add(tp+"embed_tokens.weight", "token_embd.weight")
	add(tp+"norm.weight", "output_norm.weight")
	if s := m.Spec.LMHead; s != nil {
		pl.Component = convert.ComponentLMHead
		add(s.Suffix, "output.weight")
	}
	pl.Component = convert.ComponentHead
	hp := m.Spec.HeadPrefix
	for _, n := range m.Checkpoint.Names {
		if !m.IsHead(n) || m.IsRoutedExpert(n) {
			continue
		}
		g, err := headName(strings.TrimPrefix(n, hp), c.NumHiddenLayers)
		if err != nil {
			return err
		}
		add(n, g)
	}
	for j, blk := range m.MTPExperts {
		var rule convert.QuantRule
		if prec.quant != "" {
			rule = func(string, string, int64) *convert.Quant {
				return &convert.Quant{Mode: convert.ModeGGML, Bits: 8, GroupSize: 32, GGMLType: prec.quant}
			}
		}
		first := len(pl.Out)
		pl.Experts(blk, fmt.Sprintf("blk.%d.", c.NumHiddenLayers+j), prec.float, rule)
		for k := range 3 {
			pl.Out[first+k].Name = fmt.Sprintf("blk.%d.%s", c.NumHiddenLayers+j, expertNames[k])
		}
	}
	return nil
}

// Card: the sidecar pairs with a GGUF of the same trunk.
func (target) Card(man *manifests.Manifest) manifests.TargetCard {
	return manifests.TargetCard{
		Library: "llama.cpp",
		What:    "the multi-token-prediction (MTP) head as an MTP-only GGUF sidecar for llama.cpp speculative decoding",
		Pairing: "It pairs with a GGUF of the same trunk (`{base}`), converted without its MTP head: the sidecar carries its own copy of the embedding, final norm and lm_head.",
		Experts: "stacked as llama.cpp's `ffn_{gate,up,down}_exps` `{in, out, E}`",
		HowToRun: []string{
			"With llama.cpp (the sources vendored by llama-cpp-python 0.3.36 tested), next to the trunk GGUF:",
			"", "```sh", "llama-server -m TRUNK.gguf -md " + fileOf(man) + " --spec-type draft-mtp", "```",
		},
	}
}

func fileOf(man *manifests.Manifest) string {
	for _, f := range man.Files {
		if strings.HasSuffix(f.Name, ".gguf") {
			return f.Name
		}
	}
	return "mtp-MODEL.gguf"
}
