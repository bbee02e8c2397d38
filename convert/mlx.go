package convert

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Target names.
const (
	TargetMLX      = "mlx"
	TargetCombined = "combined"
)

// tokenizerFiles are copied next to MLX outputs when the source has them.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json", "chat_template.jinja", "generation_config.json"}

// planner accumulates output tensors for one file.
type planner struct {
	m    *Model
	file string
	out  []OutTensor
}

// plain plans a one-source tensor, renamed, with the precision of its component.
func (pl *planner) plain(src, name string, prec Precision, o MLXOptions) {
	t := pl.m.Checkpoint.Tensors[src]
	shape := append([]int64{}, t.Shape...)
	rowLen := int64(1)
	if len(shape) > 0 {
		rowLen = shape[len(shape)-1]
	}
	var transforms []string
	if zeroCentred(src, pl.m.TextPrefix) && len(shape) == 1 {
		transforms = append(transforms, TNormPlusOne)
	}
	if strings.HasSuffix(src, "conv1d.weight") && len(shape) == 3 && shape[1] == 1 {
		shape = []int64{shape[0], shape[2], 1}
		rowLen = 1 // element order is unchanged; rows are single elements
		transforms = append(transforms, TConv1dRelayout)
	}
	dtype := prec.Float
	if strings.HasSuffix(src, ".A_log") {
		dtype = t.DType // never cast: mlx-lm keeps A_log as stored (float32 in Qwen3.5)
	}
	var q *Quant
	if len(shape) >= 2 && strings.HasSuffix(name, ".weight") && !strings.HasSuffix(src, "conv1d.weight") {
		q = o.quantFor(prec, name, rowLen)
	}
	pl.add(OutTensor{Name: name, Segments: []Segment{{src, 0, t.Elements() / rowLen}}, RowLen: rowLen, Shape: shape, DType: dtype, Transforms: transforms}, q)
}

func (pl *planner) add(t OutTensor, q *Quant) {
	t.File = pl.file
	if t.DType != pl.m.Checkpoint.Tensors[t.Segments[0].Source].DType {
		t.Transforms = append(t.Transforms, TCast)
	}
	if q != nil {
		t.Quant = q
		t.Transforms = append(t.Transforms, TQuantize)
	}
	pl.out = append(pl.out, t)
}

// experts plans the routed experts of the MoE block under srcLayer as
// switch_mlp.{gate,up,down}_proj.weight [E,out,in] under outLayer.
func (pl *planner) experts(blk ExpertBlock, outLayer string, prec Precision, o MLXOptions) {
	c := pl.m.Config
	e, h, i := int64(c.NumExperts), int64(c.HiddenSize), int64(c.MoeIntermediateSize)
	out := outLayer + "mlp.switch_mlp."
	proj := []struct {
		name    string
		out, in int64
	}{{"gate_proj", i, h}, {"up_proj", i, h}, {"down_proj", h, i}}
	for k, p := range proj {
		var segs []Segment
		var tr string
		if blk.Layout == Fused {
			switch p.name {
			case "down_proj":
				segs = []Segment{{blk.Prefix + "down_proj", 0, e * h}}
			default:
				tr = TSplitGateUp
				for x := int64(0); x < e; x++ {
					segs = append(segs, Segment{blk.Prefix + "gate_up_proj", x*2*i + int64(k)*i, i})
				}
			}
		} else {
			tr = TStackExperts
			for x := 0; x < int(e); x++ {
				segs = append(segs, Segment{blk.Prefix + strconv.Itoa(x) + "." + p.name + ".weight", 0, p.out})
			}
		}
		name := out + p.name + ".weight"
		t := OutTensor{Name: name, Segments: segs, RowLen: p.in, Shape: []int64{e, p.out, p.in}, DType: prec.Float}
		if tr != "" {
			t.Transforms = []string{tr}
		}
		pl.add(t, o.quantFor(prec, name, p.in))
	}
}

// head plans every MTP tensor, renamed by rename (applied to the name
// without its "mtp." prefix), experts as switch_mlp.
func (pl *planner) head(rename func(string) string, o MLXOptions) {
	for _, n := range pl.m.Checkpoint.Names {
		if !strings.HasPrefix(n, "mtp.") || strings.Contains(n, ".mlp.experts.") {
			continue
		}
		pl.plain(n, rename(strings.TrimPrefix(n, "mtp.")), o.Head, o)
	}
	for j, blk := range pl.m.MTPExperts {
		pl.experts(blk, rename("layers."+strconv.Itoa(j)+"."), o.Head, o)
	}
}

// PlanMLX plans --target mlx: the MTP head as an mlx-vlm qwen3_5_mtp drafter
// folder (model.safetensors with bare names, norms shifted, experts as
// switch_mlp, and a config.json carrying the source text_config).
func PlanMLX(m *Model, o MLXOptions) (*Plan, error) {
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	pl := &planner{m: m, file: "model.safetensors"}
	pl.head(func(s string) string { return s }, o)
	p := &Plan{
		Target: TargetMLX, Tensors: pl.out, TensorFiles: []string{pl.file},
		Metadata: map[string]string{"format": "mlx"},
		Options:  map[string]string{"head_precision": o.Head.Name, "group_size": strconv.Itoa(o.GroupSize), "mlx_rounding": o.Rounding, "router_bits": strconv.Itoa(o.RouterBits)},
	}
	cfg, err := drafterConfig(m, p, o)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, OutFile{Name: "config.json", Contents: cfg})
	p.Files = append(p.Files, copies(m)...)
	return p, nil
}

func copies(m *Model) []OutFile {
	var out []OutFile
	for _, f := range tokenizerFiles {
		if src, err := m.Checkpoint.Source.Open(f); err == nil {
			src.Close()
			out = append(out, OutFile{Name: f, CopyFrom: f})
		}
	}
	return out
}

// drafterConfig writes the drafter's config.json the way mlx-vlm's splitter
// does: model_type qwen3_5_mtp, the source text_config (for Qwen3-Next the
// flat config plus rope_parameters), block_size = depth + 2, and the
// quantization block when the head is quantized.
func drafterConfig(m *Model, p *Plan, o MLXOptions) ([]byte, error) {
	text, err := textConfigObject(m)
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"model_type":          "qwen3_5_mtp",
		"block_size":          m.MTPDepth + 2,
		"text_config":         text,
		"tie_word_embeddings": m.Config.TieWordEmbeddings,
	}
	if o.Head.Bits > 0 {
		q := quantizationConfig(p.Tensors, Quant{Bits: o.Head.Bits, GroupSize: o.GroupSize}, func(s string) string { return s })
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	}
	return indentJSON(cfg, "  ")
}

// textConfigObject returns the source's text configuration as a JSON value
// that the drafter's TextConfig reads: nested text_config as is, or the flat
// Qwen3-Next config with the rope_parameters the drafter expects.
func textConfigObject(m *Model) (map[string]any, error) {
	var root map[string]any
	if err := json.Unmarshal(m.Config.Raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	text := root
	if tc, ok := root["text_config"].(map[string]any); ok {
		text = tc
	}
	c := m.Config
	if _, ok := text["rope_parameters"]; !ok {
		text["rope_parameters"] = map[string]any{
			"type": "default", "rope_theta": c.RopeTheta, "partial_rotary_factor": c.PartialRotaryFactor,
			"mrope_section": []int{c.RotaryDim() / 2, 0, 0},
		}
	}
	if _, ok := text["norm_topk_prob"]; !ok && m.Family == qwen3Next.name {
		text["norm_topk_prob"] = false
	}
	if _, ok := text["mtp_num_hidden_layers"]; !ok {
		text["mtp_num_hidden_layers"] = m.MTPDepth
	}
	return text, nil
}
