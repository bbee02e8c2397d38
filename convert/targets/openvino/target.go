// Package openvino is the OpenVINO target: it plans the MTP head's weights
// into two .bin files and lowers the family's abstract MTP forward onto the
// IR blocks of formats/openvino.
package openvino

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	ov "github.com/mtpconv/mtpconv/formats/openvino"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant/codec"
)

func init() { targets.RegisterTarget(target{}) }

// OpenVINO output files. The MTP layer has the name OpenVINO GenAI looks
// for beside an optimum-intel export (and optimum-intel writes), so the
// folder doubles as a GenAI draft_model.
const (
	LayerXML  = "openvino_mtp_model.xml"
	LayerBin  = "openvino_mtp_model.bin"
	LMHeadXML = "openvino_mtp_lm_head.xml"
	LMHeadBin = "openvino_mtp_lm_head.bin"
	// GenerationConfig gives GenAI the eos id a draft folder apart from the main model needs.
	GenerationConfig = "generation_config.json"
)

// target is --target openvino: the MTP layer and the lm_head as two IRs.
type target struct{}

var (
	_ targets.Target   = target{}
	_ targets.Finisher = target{}
)

func (target) Name() string { return "openvino" }
func (target) Usage() string {
	return "the MTP layer and the lm_head as OpenVINO IRs (NNCF-identical int8/int4)"
}
func (target) Accepts() []string {
	return []string{targets.OptHeadPrecision, targets.OptLMHeadPrecision, targets.OptGroupSize, targets.OptSym}
}

// Defaults: an f16 head (what the plugins run fastest at draft fidelity) and
// an int8 lm_head (NNCF's mode for a last layer).
const (
	defaultHead      = "f16"
	defaultLMHead    = "int8"
	defaultGroupSize = 64
)

// options are the choices of the OpenVINO target.
type options struct {
	Head      string // f16 | int8 | int4
	LMHead    string // f16 | int8 | int4
	GroupSize int    // int4: 64 or 128
	Sym       bool   // symmetric (i8/i4) instead of asymmetric (u8/u4)
}

func parseOptions(o targets.Options) options {
	out := options{Head: o.HeadPrecision, LMHead: o.LMHeadPrecision, GroupSize: defaultGroupSize, Sym: o.Sym}
	if out.Head == "" {
		out.Head = defaultHead
	}
	if out.LMHead == "" {
		out.LMHead = defaultLMHead
	}
	if o.Set[targets.OptGroupSize] {
		out.GroupSize = o.GroupSize
	}
	return out
}

// nncf is the NNCF mode of a precision name, or nil for f16.
func (o options) nncf(prec string) (*plan.Quant, error) {
	switch prec {
	case "f16":
		return nil, nil
	case "int8":
		return &plan.Quant{Mode: codec.ModeNNCF, Bits: 8, GroupSize: -1, Sym: o.Sym}, nil
	case "int4":
		if o.GroupSize != 64 && o.GroupSize != 128 {
			return nil, fmt.Errorf("int4 group size %d: must be 64 or 128", o.GroupSize)
		}
		return &plan.Quant{Mode: codec.ModeNNCF, Bits: 4, GroupSize: o.GroupSize, Sym: o.Sym}, nil
	}
	return nil, fmt.Errorf("OpenVINO precision %q is not f16, int8 or int4", prec)
}

// Plan plans every weight of the MTP layer in openvino_mtp_model.bin and
// the lm_head in openvino_mtp_lm_head.bin, as f16 or NNCF-compressed
// integers, norms as f32 (1+w). The graphs that use them are built by
// Finish once the weights are laid out.
func (t target) Plan(m *model.Model, uo targets.Options) (*plan.Plan, error) {
	o := parseOptions(uo)
	hq, err := o.nncf(o.Head)
	if err != nil {
		return nil, targets.UsageError{Err: fmt.Errorf("--head-precision: %w", err)}
	}
	if uo.Set[targets.OptGroupSize] && o.Head != "int4" && o.LMHead != "int4" {
		return nil, targets.UsageError{Err: fmt.Errorf("--group-size %d: only int4 is quantized in groups, and the head is %s, the lm_head %s; leave it out", uo.GroupSize, o.Head, o.LMHead)}
	}
	lq, err := o.nncf(o.LMHead)
	if err != nil {
		return nil, targets.UsageError{Err: fmt.Errorf("--lm-head-precision: %w", err)}
	}
	if r := m.Family.OpenVINO.Refusal; r != "" {
		return nil, fmt.Errorf("--target openvino: %s", r)
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if m.MTPDepth != 1 {
		return nil, fmt.Errorf("the OpenVINO target writes one MTP layer; this head has %d", m.MTPDepth)
	}
	if m.Spec.Forward == nil {
		return nil, fmt.Errorf("--target openvino: family %s describes no MTP forward to lower", m.Family)
	}
	if err := checkLowering(m.Spec.Forward(m)); err != nil {
		return nil, err
	}
	if m.Spec.LMHead == nil {
		return nil, fmt.Errorf("%s: the lm_head is tied to the embedding, which the OpenVINO target does not support yet", m.Checkpoint.Source.Name())
	}
	lmHead := m.Spec.LMHead.Suffix
	if _, ok := m.Checkpoint.Tensors[lmHead]; !ok {
		return nil, fmt.Errorf("%s: %s is missing", m.Checkpoint.Source.Name(), lmHead)
	}
	pl := &plan.Planner{M: m, File: LayerBin, Component: plan.ComponentHead}
	for _, n := range m.HeadTensors() {
		src := m.Checkpoint.Tensors[n]
		switch {
		case len(src.Shape) == 1:
			// Norm weights stay f32 Consts (1+w), the form the RMSNorm fusion wants.
			pl.Plain(n, n, st.F32, nil)
		case m.Is(n, model.RoleRouter):
			// The router and the shared-expert gate stay f16: the CPU plugin quantizes
			// the activations of compressed layers, which can flip top-k choices.
			linear(pl, n, nil)
		default:
			linear(pl, n, hq)
		}
	}
	for j, blk := range m.MTPExperts {
		pl.Experts(blk, m.HeadLayerPrefix(j), st.F16, func(string, string, int64) *plan.Quant { return clone(hq) })
	}
	pl.File, pl.Component = LMHeadBin, plan.ComponentLMHead
	linear(pl, lmHead, lq)
	p := &plan.Plan{
		Target: t.Name(), Tensors: pl.Out, TensorFiles: []string{LayerBin, LMHeadBin},
		Formats: map[string]plan.FileFormat{LayerBin: plan.FormatOpenVINOBin, LMHeadBin: plan.FormatOpenVINOBin},
		Options: map[string]string{"head_precision": o.Head, "lm_head_precision": o.LMHead, "group_size": strconv.Itoa(o.GroupSize), "sym": strconv.FormatBool(o.Sym)},
	}
	gen, note, err := generationConfig(m)
	if err != nil {
		return nil, err
	}
	if gen != nil {
		p.Files = append(p.Files, *gen)
	}
	if note != "" {
		p.Notes = append(p.Notes, note)
	}
	return p, nil
}

// generationConfig is the source's generation_config.json, copied, or else
// one holding the eos id of config.json: GenAI refuses a draft folder with
// no eos id ("'stop_token_ids' must be non-negative"). With neither, no
// file and a note.
func generationConfig(m *model.Model) (*plan.OutFile, string, error) {
	if src, err := m.Checkpoint.Source.Open(GenerationConfig); err == nil {
		src.Close()
		return &plan.OutFile{Name: GenerationConfig, CopyFrom: GenerationConfig}, "", nil
	}
	eos, ok, err := EOSTokenID(m.Config.Raw)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s: %w", m.Checkpoint.Source.Name(), model.ConfigFile, err)
	}
	if !ok {
		return nil, GenerationConfig + ": not written: the source has none and its config.json no eos_token_id; used as a GenAI draft_model folder apart from the main model, the output needs one", nil
	}
	b, err := json.MarshalIndent(map[string]json.RawMessage{"eos_token_id": eos}, "", "  ")
	if err != nil {
		return nil, "", err
	}
	return &plan.OutFile{Name: GenerationConfig, Contents: append(b, '\n')}, "", nil
}

// EOSTokenID is eos_token_id (an id or a list of ids) of config.json, at
// the top level or in text_config.
func EOSTokenID(config []byte) (json.RawMessage, bool, error) {
	type eos struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	var c struct {
		eos
		Text eos `json:"text_config"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, false, err
	}
	for _, v := range []json.RawMessage{c.EOS, c.Text.EOS} {
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		var id int64
		var ids []int64
		if json.Unmarshal(v, &id) != nil && json.Unmarshal(v, &ids) != nil {
			return nil, false, fmt.Errorf("eos_token_id %s is neither an id nor a list of ids", v)
		}
		return v, true, nil
	}
	return nil, false, nil
}

func clone(q *plan.Quant) *plan.Quant {
	if q == nil {
		return nil
	}
	c := *q
	return &c
}

// linear plans a 2-D linear weight [N, K] as f16 or with an NNCF mode.
func linear(pl *plan.Planner, src string, q *plan.Quant) {
	t := pl.M.Checkpoint.Tensors[src]
	rows, cols := t.Shape[0], t.Shape[1]
	out := plan.OutTensor{Name: src, Segments: []plan.Segment{pl.Segment(src, 0, rows)}, RowLen: cols, Shape: []int64{rows, cols}, DType: st.F16}
	pl.Add(out, clone(q))
}

// Card: two IRs next to the trunk that produces the hidden states.
func (target) Card(man *manifests.Manifest) manifests.TargetCard {
	return manifests.TargetCard{
		Library: "openvino", Consumer: "OpenVINO", Tags: openvinoTags(man),
		TitlePrecision: man.Options["head_precision"] + " head, " + man.Options["lm_head_precision"] + " lm_head",
		What:           "the MTP layer and an lm_head as OpenVINO IR",
		Experts:        "as `[E, out, in]` constants the CPU plugin runs as gather-matmuls (only the top-k experts per token)",
		HowToRun: []string{
			"With the OpenVINO runtime (2026.4.1 tested), next to the trunk that produces `hidden_states` (after its final norm) and the embeddings of the next tokens. " +
				"This runs as written: stand-ins of the trunk's shapes take the place of its outputs.",
			"", "```python", "import numpy as np", "import openvino as ov", "from huggingface_hub import snapshot_download", "",
			"folder = snapshot_download(\"{repo}\")  # or the folder's path",
			"core = ov.Core()",
			"layer = core.compile_model(f\"{folder}/" + LayerXML + "\", \"CPU\")",
			"lm_head = core.compile_model(f\"{folder}/" + LMHeadXML + "\", \"CPU\")",
			"req = layer.create_infer_request()  # holds the MTP layer's own KV cache; req.reset_state() starts over",
			"",
			"# One step over t new tokens: the trunk gives their embeddings (e) and its last hidden states (h_trunk).",
			fmt.Sprintf("t, hidden = 3, %d", man.Model.HiddenSize),
			"rng = np.random.default_rng(0)",
			"e = rng.standard_normal((1, t, hidden)).astype(np.float32)  # stand-in: the embeddings of the next tokens",
			"h_trunk = rng.standard_normal((1, t, hidden)).astype(np.float32)  # stand-in: the trunk's hidden states",
			"mask = np.ones((1, t), np.int64)  # every position so far (cached and new)",
			"pos = np.arange(t, dtype=np.int64)[None]  # the new tokens' positions",
			"beam = np.zeros(1, np.int32)  # which cache row each sequence continues",
			"h = req.infer({\"inputs_embeds\": e, \"hidden_states\": h_trunk, \"attention_mask\": mask,",
			"               \"position_ids\": pos, \"beam_idx\": beam})[\"last_hidden_state\"]",
			"draft_token = lm_head(h[:, -1:])[\"logits\"].argmax(-1)", "```",
		},
	}
}

// openvinoTags are the Hub tags of OpenVINO exports: nncf when NNCF compressed a weight.
func openvinoTags(man *manifests.Manifest) []string {
	for _, k := range []string{"head_precision", "lm_head_precision"} {
		if p := man.Options[k]; p == "int8" || p == "int4" {
			return []string{"nncf"}
		}
	}
	return nil
}

// rtInfo is the model-level rt_info of our IRs: tool, source, precisions, norm convention.
func rtInfo(p *plan.Plan, m *model.Model, prov targets.Provenance, f model.Forward) []ov.Attr {
	var kv []string
	for _, l := range f.Layers {
		kv = append(kv, keyVariable(l.Attention), valueVariable(l.Attention))
	}
	return []ov.Attr{
		{Key: "mtpconv_version", Value: prov.Version},
		{Key: "mtpconv_source", Value: prov.Source},
		{Key: "mtpconv_family", Value: m.Family.Name},
		{Key: "mtpconv_head_precision", Value: p.Options["head_precision"]},
		{Key: "mtpconv_lm_head_precision", Value: p.Options["lm_head_precision"]},
		{Key: "mtpconv_group_size", Value: p.Options["group_size"]},
		{Key: "mtpconv_sym", Value: p.Options["sym"]},
		{Key: "mtpconv_norm_convention", Value: p.NormConvention(m)},
		{Key: "mtpconv_kv_variables", Value: strings.Join(kv, ",")},
	}
}

// Finish builds the IR graphs over the weights Run wrote into dir, appends
// their small constants to each .bin and writes the .xml files. It returns
// the final records of the four files; res, when it has the weights' hash
// states, spares hashing each .bin again. With dir empty it writes nothing
// and returns the files' sizes only.
func (target) Finish(dir string, m *model.Model, p *plan.Plan, prov targets.Provenance, res *run.Result) ([]manifests.File, error) {
	f := m.Spec.Forward(m)
	layer, head, err := Graphs(m, p, f, rtInfo(p, m, prov, f))
	if err != nil {
		return nil, err
	}
	var out []manifests.File
	for _, x := range []struct {
		g        *ov.Graph
		xml, bin string
	}{{layer, LayerXML, LayerBin}, {head, LMHeadXML, LMHeadBin}} {
		if x.g == nil {
			continue
		}
		if dir == "" {
			lay, err := p.Layout(x.bin)
			if err != nil {
				return nil, err
			}
			var xmlBuf bytes.Buffer
			binLen, err := x.g.Serialize(&xmlBuf, io.Discard, lay.Size)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", x.xml, err)
			}
			out = append(out, manifests.File{Name: x.xml, Size: int64(xmlBuf.Len())}, manifests.File{Name: x.bin, Size: binLen})
			continue
		}
		binPath := filepath.Join(dir, x.bin)
		bf, err := os.OpenFile(binPath, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, err
		}
		fi, err := bf.Stat()
		if err != nil {
			bf.Close()
			return nil, err
		}
		var xmlBuf bytes.Buffer
		h := res.FileHash(x.bin)
		var bin io.Writer = bf
		if h != nil {
			bin = io.MultiWriter(bf, h)
		}
		binLen, err := x.g.Serialize(&xmlBuf, bin, fi.Size())
		if err != nil {
			bf.Close()
			return nil, fmt.Errorf("%s: %w", x.xml, err)
		}
		if err := bf.Close(); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, x.xml), xmlBuf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		out = append(out, manifests.File{Name: x.xml, Size: int64(xmlBuf.Len()), SHA256: manifests.SHA256(xmlBuf.Bytes())})
		if h != nil {
			out = append(out, manifests.File{Name: x.bin, Size: binLen, SHA256: hex.EncodeToString(h.Sum(nil))})
			continue
		}
		size, sum, err := manifests.HashFile(binPath)
		if err != nil {
			return nil, err
		}
		out = append(out, manifests.File{Name: x.bin, Size: size, SHA256: sum})
	}
	return out, nil
}
