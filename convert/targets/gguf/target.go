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
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/computed"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	gg "github.com/mtpconv/mtpconv/formats/gguf"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant/codec"
)

func init() { targets.RegisterTarget(target{}) }

type target struct{}

var _ targets.Target = target{}

func (target) Name() string { return "gguf" }

// Instead: the head goes into a trunk GGUF by grafting.
func (target) Instead() string {
	return "to add the head into a trunk GGUF, use --graft TRUNK.gguf --out DIR (one bundled file; the trunk is not changed); --out DIR alone writes a sidecar"
}
func (target) Usage() string {
	return "the MTP head as an MTP-only GGUF sidecar for llama.cpp (--spec-type draft-mtp)"
}
func (target) Accepts() []string {
	return []string{targets.OptHeadPrecision, targets.OptGGUFType, targets.OptGraft}
}

// precision is one --head-precision or --gguf-type value: the file type
// (its quantized tensors' ggml types follow from it, see recipe.go), the
// float type of unquantized weights, and whether the file is laid out as
// llama-quantize writes it.
type precision struct {
	name   string
	ftype  gg.FileType
	float  st.DType
	suffix string // in the file name
	// requant: what llama-quantize writes from the bf16 sidecar: its
	// per-tensor type choice, tensors sorted by block then name, trailing
	// unit dimensions dropped, general.quantization_version and
	// general.file_type moved last.
	requant bool
}

// headPrecisions are the --head-precision values: bf16 and f16 as the
// reference converter writes them, int8 as llama-quantize Q8_0 makes it.
var headPrecisions = map[string]precision{
	"bf16": {"bf16", gg.FileBF16, st.BF16, "BF16", false},
	"f16":  {"f16", gg.FileF16, st.F16, "F16", false},
	"int8": {"int8", gg.FileQ8_0, st.BF16, "Q8_0", true},
	"int4": {"int4", gg.FileQ4_K_M, st.BF16, "Q4_K_M", true},
}

// fileTypes are the --gguf-type values: llama-quantize's file types.
var fileTypes = map[string]precision{
	"BF16":   {"BF16", gg.FileBF16, st.BF16, "BF16", true},
	"F16":    {"F16", gg.FileF16, st.F16, "F16", true},
	"Q8_0":   {"Q8_0", gg.FileQ8_0, st.BF16, "Q8_0", true},
	"Q4_0":   {"Q4_0", gg.FileQ4_0, st.BF16, "Q4_0", true},
	"Q4_K_M": {"Q4_K_M", gg.FileQ4_K_M, st.BF16, "Q4_K_M", true},
	"Q4_K_S": {"Q4_K_S", gg.FileQ4_K_S, st.BF16, "Q4_K_S", true},
	"Q5_K_M": {"Q5_K_M", gg.FileQ5_K_M, st.BF16, "Q5_K_M", true},
	"Q6_K":   {"Q6_K", gg.FileQ6_K, st.BF16, "Q6_K", true},
}

const defaultPrecision = "bf16"

func choosePrecision(o targets.Options) (precision, error) {
	if o.Set[targets.OptGGUFType] || o.GGUFType != "" {
		if o.Set[targets.OptHeadPrecision] {
			return precision{}, fmt.Errorf("--gguf-type and --head-precision both set: give one")
		}
		if p, ok := fileTypes[o.GGUFType]; ok {
			return p, nil
		}
		return precision{}, fmt.Errorf("--gguf-type %q: must be F16, BF16, Q8_0, Q4_0, Q4_K_M, Q4_K_S, Q5_K_M or Q6_K", o.GGUFType)
	}
	pn := o.HeadPrecision
	if pn == "" {
		pn = defaultPrecision
	}
	if p, ok := headPrecisions[pn]; ok {
		return p, nil
	}
	return precision{}, fmt.Errorf("--head-precision %q: must be bf16, f16, int8 (Q8_0) or int4 (Q4_K_M) for --target gguf", pn)
}

func (t target) Plan(m *model.Model, o targets.Options) (*plan.Plan, error) {
	if r := m.Family.GGUF.Refusal; r != "" {
		return nil, fmt.Errorf("--target gguf: %s", r)
	}
	if f := m.Family.GGUF.Refuse; f != nil {
		if r := f(m.Config); r != "" {
			return nil, fmt.Errorf("--target gguf: %s", r)
		}
	}
	if m.Family.GGUF.Arch == "" {
		return nil, fmt.Errorf("--target gguf does not know llama.cpp's architecture for family %s", m.Family)
	}
	prec, err := choosePrecision(o)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if m.MTPDepth != 1 && !m.Family.GGUF.ChainedHeads && !m.Family.GGUF.Drafter {
		return nil, fmt.Errorf("the head has %d MTP layers; llama.cpp's %s MTP graph supports exactly one", m.MTPDepth, m.Family.GGUF.Arch)
	}
	if o.Graft != "" && m.Family.GGUF.Drafter {
		return nil, targets.UsageError{Err: fmt.Errorf("--graft: %s is a separate drafter model, loaded with -md next to its target's GGUF; there is no head to graft into a trunk", m.Family.Title)}
	}
	if m.Family.GGUF.StoredTypes {
		if prec.requant || o.Graft != "" {
			return nil, targets.UsageError{Err: fmt.Errorf("--target gguf writes %s's head as llama.cpp's converter does, each tensor in its stored type and the routed experts MXFP4 as the release stores them: only the sidecar at --head-precision bf16 or f16 (the same file); llama-quantize's types would requantize the MXFP4 experts, and the converter's bundled file drops the head", m.Family.Title)}
		}
		if err := storedExperts(m); err != nil {
			return nil, err
		}
		prec.ftype, prec.suffix = gg.FileMXFP4MOE, gg.FileMXFP4MOE.String()
	}
	if o.Graft != "" {
		return t.planGraft(m, o)
	}
	h, err := m.Config.Hparams()
	if err != nil {
		return nil, err
	}
	vocab, err := VocabMetadata(m, h)
	if err != nil {
		return nil, err
	}
	if tk := m.Family.GGUF.TokenizerKeys; tk != nil {
		vocab = append(vocab, tk(m)...)
	}
	name := m.Origin().ShortName()
	file := "mtp-" + name + "-" + prec.suffix + ".gguf"
	pl := &plan.Planner{M: m, File: file}
	if err := planTensors(pl, m, prec, nil); err != nil {
		return nil, err
	}
	kvs, err := Metadata(m, h, prec.ftype, name, vocab)
	if err != nil {
		return nil, err
	}
	if prec.requant {
		sortLikeLlamaQuantize(pl.Out)
		kvs = moveLast(kvs, "general.quantization_version", "general.file_type")
	}
	if m.Family.GGUF.ChatTemplateFirst {
		kvs = moveAfterFirst(kvs, "tokenizer.chat_template")
	}
	p := &plan.Plan{
		Target: t.Name(), Tensors: pl.Out, TensorFiles: []string{file},
		Formats:  map[string]plan.FileFormat{file: plan.FormatGGUF},
		Metadata: map[string]string{},
		GGUF:     kvs,
		Options:  map[string]string{"precision": prec.name, "gguf_file_type": prec.ftype.String()},
	}
	return p, nil
}

// sortLikeLlamaQuantize orders tensors as llama-quantize writes them.
func sortLikeLlamaQuantize(ts []plan.OutTensor) {
	sort.SliceStable(ts, func(i, j int) bool { return llamaQuantizeCmp(ts[i].Name, ts[j].Name) < 0 })
}

// moveLast moves keys to the end, in the order given (llama-quantize sets
// them again, which appends them).
func moveLast(kvs []gg.KV, keys ...string) []gg.KV {
	var out, last []gg.KV
	for _, kv := range kvs {
		if slices.Contains(keys, kv.Key) {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range keys {
		for _, kv := range kvs {
			if kv.Key == k {
				last = append(last, kv)
			}
		}
	}
	return append(out, last...)
}

// moveAfterFirst moves a key, when present, to second place.
func moveAfterFirst(kvs []gg.KV, key string) []gg.KV {
	i := slices.IndexFunc(kvs, func(kv gg.KV) bool { return kv.Key == key })
	if i <= 1 {
		return kvs
	}
	kv := kvs[i]
	out := slices.Delete(slices.Clone(kvs), i, i+1)
	return slices.Insert(out, 1, kv)
}

// storedExperts refuses, for a family written in its stored types, routed
// experts that are not FP4 codes with E8M0 scales: the converter repacks
// those bytes, and has nothing to repack otherwise.
func storedExperts(m *model.Model) error {
	for _, blk := range m.MTPExperts {
		for _, p := range m.Spec.MoE.Projections() {
			src := blk.Prefix + "0." + m.Spec.MoE.PerExpert[p]
			if _, _, ok := m.FP4Scale(src); !ok {
				return fmt.Errorf("%s: llama.cpp's %s converter takes the routed experts in the release's FP4 layout only (I8 codes with an F8_E8M0 .scale per 32 inputs), and %s is %s", m.Checkpoint.Source.Name(), m.Family.GGUF.Arch, src, m.Checkpoint.Tensors[src].DType)
			}
		}
	}
	return nil
}

// storedType is the type the converter of a StoredTypes family writes a
// tensor of the source dtype in: vectors F32, float32 F32, bf16 matrices
// BF16, block-FP8 matrices dequantized and forced to Q8_0 (DeepSeek-V4's
// tensor_force_quant for the weights its dequant_model dequantized).
func storedType(src st.DType, dims int, float st.DType) (st.DType, *plan.Quant) {
	switch {
	case dims <= 1, src == st.F32:
		return st.F32, nil
	case src == st.BF16:
		return st.BF16, nil
	case src == st.F8E4M3:
		return st.BF16, ggmlQuant("Q8_0")
	}
	return float, nil
}

// ggmlQuant is the quantization to the ggml type typ.
func ggmlQuant(typ string) *plan.Quant {
	return &plan.Quant{Mode: codec.ModeGGML, Bits: quantBits[typ], GroupSize: int(blockSize[typ]), GGMLType: typ}
}

// squeeze drops leading unit dimensions of a PyTorch shape (trailing in
// ggml's order), as ggml_n_dims counts them when llama-quantize writes a
// tensor; one dimension always stays.
func squeeze(shape []int64) []int64 {
	for len(shape) > 1 && shape[0] == 1 {
		shape = shape[1:]
	}
	return shape
}

// planTensors plans the sidecar's tensors: the trunk's embedding, final norm
// and lm_head, and the head as block n_layer. For a llama-quantize type the
// choice is made over the whole file as llama-quantize's counters see it:
// the sidecar, or with trunk given (a graft), the trunk's tensors and the
// head's.
func planTensors(pl *plan.Planner, m *model.Model, prec precision, trunk []plannedTensor) error {
	if !prec.requant {
		return planTensorsTyped(pl, m, prec, nil, nil)
	}
	var listed []plannedTensor
	dry := &plan.Planner{M: m, File: pl.File}
	if err := planTensorsTyped(dry, m, precision{float: st.BF16, requant: true}, func(name string, shape []int64, in st.DType) {
		listed = append(listed, plannedTensor{name, shape, string(in)})
	}, nil); err != nil {
		return err
	}
	all := listed
	if trunk != nil {
		all = append([]plannedTensor{}, trunk...)
		for _, t := range listed {
			if blockOf(t.name) >= m.Config.NumHiddenLayers {
				all = append(all, t)
			}
		}
	}
	types := llamaQuantizeTypes(all, prec.ftype, m.GGUFHeadBlock()+m.MTPDepth, m.Config.NumExperts)
	for _, t := range listed {
		if _, ok := types[t.name]; !ok {
			types[t.name] = t.in // a graft's copy of the trunk tensors, not planned
		}
	}
	return planTensorsTyped(pl, m, prec, nil, types)
}

// planTensorsTyped plans the tensors; with list set, it reports each
// tensor's name, shape and bf16-sidecar type; with types, a llama-quantize
// layout takes each tensor's type from it.
func planTensorsTyped(pl *plan.Planner, m *model.Model, prec precision, list func(string, []int64, st.DType), types map[string]string) error {
	c, gs := m.Config, m.Family.GGUF
	// typeOf is the stored type of a tensor: the reference converter's choice
	// by its kind (float32 for norms, routers, biases, ...), or for a
	// llama-quantize layout its choice. A name of no kind is kept in kindErr.
	var kindErr error
	typeOf := func(name string, shape []int64) (st.DType, *plan.Quant) {
		byKind := !m.Family.GGUF.HeadBlockFromSubLayer || blockOf(name) < c.NumHiddenLayers
		ct, err := gg.ConverterType(name, len(shape), string(prec.float), byKind)
		if err != nil && kindErr == nil {
			kindErr = err
		}
		dt := st.DType(ct)
		if list != nil {
			list(name, shape, dt)
		}
		if types == nil {
			return dt, nil
		}
		switch typ := types[name]; typ {
		case "F32", "F16", "BF16":
			return st.DType(typ), nil
		default:
			return st.BF16, ggmlQuant(typ)
		}
	}
	add := func(src, name string) {
		shape := m.Checkpoint.Tensors[src].Shape
		if prec.requant {
			shape = squeeze(shape)
		}
		dt, q := typeOf(name, shape)
		if gs.StoredTypes {
			dt, q = storedType(m.Checkpoint.Tensors[src].DType, len(shape), prec.float)
		}
		pl.Plain(src, name, dt, func(string, string, int64) *plan.Quant { return q })
		if t := &pl.Out[len(pl.Out)-1]; prec.requant {
			t.Shape = shape
			if q != nil && t.Quant == nil {
				t.Quant = q // Plain asks rules of linear weights only; llama-quantize decides alone here
				t.Transforms = append(t.Transforms, plan.TQuantize)
			}
		}
	}
	// The tensors the converter computes from the config come first, as it
	// writes them; then the trunk's tensors outside the layers the family
	// names for llama.cpp (embedding, final norm), then the untied lm_head.
	pl.Component = plan.ComponentTrunk
	if gs.Drafter { // a separate drafter: all of the file is the head
		pl.Component = plan.ComponentHead
	}
	if gs.Computed != nil {
		for _, ct := range gs.Computed(m) {
			if err := computed.Attach(m.Checkpoint, []string{ct.Source}); err != nil {
				return err
			}
			add(ct.Source, ct.Name.In(-1))
		}
	}
	for _, w := range m.Spec.TrunkTop {
		if g, ok := gs.Top[w.Suffix]; ok {
			add(m.TextPrefix+w.Suffix, g.In(-1))
		}
	}
	if s := m.Spec.LMHead; s != nil && !gs.Drafter {
		g, ok := gs.Top[s.Suffix]
		if !ok {
			return fmt.Errorf("no GGUF name for the lm_head %s", s.Suffix)
		}
		pl.Component = plan.ComponentLMHead
		add(s.Suffix, g.In(-1))
	}
	pl.Component = plan.ComponentHead
	head0 := m.GGUFHeadBlock() // MTP layer j is block head0 + j
	// Multi-head latent attention: kv_b_proj is stored as llama.cpp's
	// DeepSeek-V2 path wants it, attn_k_b and attn_v_b.
	mla := m.MLAKVB()
	addRows := func(t plan.OutTensor) {
		if prec.requant {
			t.Shape = squeeze(t.Shape)
		}
		var q *plan.Quant
		t.DType, q = typeOf(t.Name, t.Shape)
		if t.Quant != nil { // the family forces its type
			t.DType, q, t.Quant = m.Checkpoint.Tensors[t.Segments[0].Source].DType, t.Quant, nil
			if t.DType == st.F8E4M3 { // dequantized first
				t.DType = st.BF16
			}
		} else if gs.StoredTypes {
			t.DType, q = storedType(m.Checkpoint.Tensors[t.Segments[0].Source].DType, len(t.Shape), prec.float)
		}
		pl.Add(t, q)
	}
	for _, n := range m.HeadTensors() {
		if slices.ContainsFunc(gs.Drop, func(p string) bool { return strings.HasPrefix(m.HeadRelative(n), p) }) {
			continue // the reference converter drops it
		}
		if at, ok := mla[n]; ok {
			j, _, _ := strings.Cut(strings.TrimPrefix(m.HeadRelative(n), "layers."), ".")
			jn, err := strconv.Atoi(j)
			if err != nil {
				return fmt.Errorf("%s: not in an MTP layer", n)
			}
			b := head0 + jn
			pl.SplitKVB(n, at, gg.Weight(gg.KindAttnKB).In(b), gg.Weight(gg.KindAttnVB).In(b), addRows)
			continue
		}
		if join, part, ok := joinOf(gs, m.HeadRelative(n)); ok {
			if part == 0 {
				addRows(joinTensor(m, n, join, head0))
			}
			continue
		}
		g, err := headName(gs, m.HeadRelative(n), head0)
		if err != nil {
			return err
		}
		add(n, g)
		if gs.PermuteQK {
			permuteQK(pl, &pl.Out[len(pl.Out)-1], c)
		}
	}
	for j, blk := range m.MTPExperts {
		b := head0 + j
		moe := m.Spec.MoE
		e, hs, is := int64(c.NumExperts), moe.ExpertWidth(c), int64(c.MoeIntermediateSize)
		shapes := [3][]int64{{e, is, hs}, {e, is, hs}, {e, hs, is}}
		first := len(pl.Out)
		projs := moe.Projections()
		quants := [3]*plan.Quant{}
		dts := [3]st.DType{}
		for _, k := range projs {
			dts[k], quants[k] = typeOf(expertKinds[k].In(b), shapes[k])
			if gs.StoredTypes { // FP4 codes moved into MXFP4 blocks (storedExperts)
				dts[k], quants[k] = plan.DTypeMXFP4, nil
			}
		}
		n := 0
		pl.Experts(blk, "blk."+strconv.Itoa(b)+".", dts[projs[0]], func(string, string, int64) *plan.Quant { q := quants[projs[n]]; n++; return q })
		for i, k := range projs {
			t := &pl.Out[first+i]
			t.Name = expertKinds[k].In(b)
			if t.DType != dts[k] {
				return fmt.Errorf("%s: experts of differing float types are not supported", t.Name)
			}
		}
	}
	return kindErr
}

// permuteQK reorders the rows of an attn_q or attn_k head tensor as the
// reference converter's LlamaModel.permute: within each of the heads
// (attn_k: the key-value heads), output row 2a+b is source row b*d/2+a,
// d the head's row count. Other tensors are left as they are.
func permuteQK(pl *plan.Planner, t *plan.OutTensor, c *model.Config) {
	tn, _, err := gg.ParseTensorName(t.Name)
	if err != nil || tn.Bias || tn.Kind != gg.KindAttnQ && tn.Kind != gg.KindAttnK || len(t.Segments) != 1 {
		return
	}
	heads := int64(c.NumAttentionHeads)
	if tn.Kind == gg.KindAttnK && c.NumKeyValueHeads != c.NumAttentionHeads {
		heads = int64(c.NumKeyValueHeads)
	}
	src, rows := t.Segments[0].Source, t.Segments[0].Rows
	d := rows / heads
	var segs []plan.Segment
	for h := range heads {
		for a := range d / 2 {
			for b := range int64(2) {
				segs = append(segs, pl.Segment(src, h*d+b*(d/2)+a, 1))
			}
		}
	}
	t.Segments = segs
}

// quantBits is recorded in the manifest's quantize transform next to the type.
var quantBits = map[string]int{"Q4_0": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6}

// Card: the sidecar pairs with a GGUF of the same trunk; a graft is the
// whole model.
func (target) Card(man *manifests.Manifest) manifests.TargetCard {
	precision := "GGUF " + cmp.Or(man.Options["gguf_file_type"], "MTP")
	if f := man.Options["graft"]; f != "" {
		return manifests.TargetCard{
			Library: "gguf", Consumer: "llama.cpp", Whole: true, TitlePrecision: precision, Tags: []string{"llama-cpp"},
			What:    "the whole model in one GGUF: its trunk, the tensors of the GGUF it was grafted into byte for byte, and the multi-token-prediction (MTP) head as block n_layer (one block per MTP layer from there), as llama.cpp's reference converter writes a model with its head",
			Pairing: "It runs alone: the head drafts for the trunk in the same file.",
			Experts: "stacked as llama.cpp's `ffn_{gate,up,down}_exps` `{in, out, E}`",
			HowToRun: []string{
				"With llama.cpp (the sources vendored by llama-cpp-python 0.3.36 tested), alone: the head drafts from the same file.",
				"", "```sh", "llama-server --hf-repo {repo} --hf-file " + f + " --spec-type draft-mtp",
				"# or, with the file downloaded:", "llama-server -m " + f + " --spec-type draft-mtp", "```",
			},
		}
	}
	if f, ok := model.LookupFamily(man.Model.Family); ok && f.GGUF.Drafter {
		c := f.GGUF.DrafterCard
		return manifests.TargetCard{
			Library: "gguf", Consumer: "llama.cpp", TitlePrecision: precision, Tags: []string{"llama-cpp"},
			What:     "the " + f.Title + ", " + c.What + " (architecture " + f.GGUF.Arch + ")",
			MLP:      c.MLP,
			Pairing:  c.Pairing,
			HowToRun: nextTo(man, "the target model", "TARGET.gguf", f.GGUF.SpecType),
		}
	}
	return manifests.TargetCard{
		Library: "gguf", Consumer: "llama.cpp", TitlePrecision: precision, Tags: []string{"llama-cpp"},
		What:     "the multi-token-prediction (MTP) head as an MTP-only GGUF sidecar for llama.cpp speculative decoding",
		Pairing:  "It pairs with a GGUF of the same trunk (`{base}`), converted without its MTP head: the sidecar carries its own copy of the embedding, final norm and lm_head.",
		Experts:  "stacked as llama.cpp's `ffn_{gate,up,down}_exps` `{in, out, E}`",
		Copies:   "embedding, output norm (copies)",
		HowToRun: nextTo(man, "the trunk", "TRUNK.gguf", ""),
	}
}

// nextTo is the card's snippet running the file as the draft (-md) of a
// GGUF of what (its placeholder name file), with --spec-type spec ("":
// draft-mtp).
func nextTo(man *manifests.Manifest, what, file, spec string) []string {
	spec = cmp.Or(spec, "draft-mtp")
	return []string{
		"With llama.cpp (the sources vendored by llama-cpp-python 0.3.36 tested), next to a GGUF of " + what + " (" + file + "):",
		// Not --hf-repo-draft: llama-server 0.3.36 fetches a draft from the
		// Hub only when the model itself comes from --hf-repo, so with a
		// local -m it starts without one ("failed to load draft model").
		"", "```sh", "llama-server -m " + file + " -md \"$(hf download {repo} " + fileOf(man) + " --quiet)\" --spec-type " + spec,
		"# or, with the file downloaded:", "llama-server -m " + file + " -md " + fileOf(man) + " --spec-type " + spec, "```",
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
