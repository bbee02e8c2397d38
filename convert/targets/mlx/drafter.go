package mlx

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
	"github.com/mtpconv/mtpconv/quant/codec"
)

func init() {
	targets.RegisterTarget(drafter{})
	targets.RegisterTarget(combined{})
}

// drafter is --target mlx: the MTP head as an mlx-vlm drafter folder
// (model.safetensors with bare names, norms shifted, experts stacked, and a
// config.json carrying the source text_config).
type drafter struct{}

var _ targets.Target = drafter{}

func (drafter) Name() string { return "mlx" }

// Instead: the head goes into an MLX model folder as the combined target's
// addition; the drafter is a folder of its own.
func (drafter) Instead() string {
	return "to add the head into an mlx_lm.convert / mlx-community folder, use --target combined --into DIR; the drafter is a folder of its own (--out DIR)"
}

// WhyNot: mlx-vlm's quantization options are spelled here as the head's
// precision, and no mlx-vlm drafter is quantized by a mixed recipe.
func (drafter) WhyNot(option string) string {
	switch option {
	case targets.OptQBits, targets.OptQMode, targets.OptQGroupSize:
		return "mlx-vlm's --q-bits/--q-mode/--q-group-size are --head-precision (int1 to int8, mxfp4, nvfp4, mxfp8) and --group-size here"
	case targets.OptQuantPredicate, targets.OptTrunkRecipe:
		return "no mlx-vlm drafter is quantized by a mixed recipe: mlx_vlm.split_mtp takes bits, group size and mode only, and mlx_vlm.convert 0.7.10's recipes fail on the one drafter it converts whole, the Gemma-4 assistant " +
			"(mixed_quant_predicate_builder reads model.layers, which Gemma4AssistantDraftModel keeps under model.model.layers)"
	}
	return ""
}

func (drafter) Usage() string {
	return "the MTP head as an mlx-vlm drafter folder (model.safetensors + config.json)"
}
func (drafter) Accepts() []string {
	return []string{targets.OptHeadPrecision, targets.OptGroupSize, targets.OptMLXRounding, targets.OptRouterBits}
}

func (d drafter) Plan(m *model.Model, uo targets.Options) (*plan.Plan, error) {
	o, err := options(uo)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	if r := m.Family.MLX.Refusal; r != "" {
		return nil, fmt.Errorf("--target mlx: %s", r)
	}
	if f := m.Family.MLX.Refuse; f != nil {
		if r := f(m.Config); r != "" {
			return nil, fmt.Errorf("--target mlx: %s", r)
		}
	}
	if m.Family.MLX.DrafterModelType == "" {
		return nil, fmt.Errorf("--target mlx: mlx-vlm has no drafter model for %s heads", m.Family)
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	ms := m.Family.MLX
	routerBits := strconv.Itoa(o.RouterBits)
	if ms.DrafterRoutersFloat {
		if uo.Set[targets.OptRouterBits] {
			return nil, targets.UsageError{Err: fmt.Errorf("--router-bits: mlx-vlm's %s drafter keeps the routers float (its splitter does not quantize mlp.gate)", ms.DrafterModelType)}
		}
		o.RoutersFloat, routerBits = true, "float"
	}
	if ms.DrafterWhole && o.Head.Quantized() {
		// mlx_vlm.convert casts the floats to the config's dtype before it
		// quantizes: the scales, biases and unquantized tensors take it.
		if dt, key := convertDType(m); dt != "" && dt != o.Head.Float {
			o.Head.Float = dt
			o.Notes = append(o.Notes, fmt.Sprintf("scales and unquantized tensors %s, the %s mlx_vlm.convert casts to before it quantizes", dt, key))
		}
	}
	rule := o.rule(m, o.Head, o.GroupSize)
	if ms.DrafterKeepsStorage {
		if o.Head.Name != defaultPrecision || uo.Set[targets.OptGroupSize] {
			return nil, targets.UsageError{Err: fmt.Errorf("mlx-vlm's %s splitter keeps %s's release storage (its FP4 experts mxfp4, MXFP8 tensors mxfp8, the rest as stored) and ignores any quantization asked: --head-precision %s (the default) and no --group-size", ms.DrafterModelType, m.Family.Title, defaultPrecision)}
		}
		if err := blockFP8Movable(m, ms.DrafterModelType); err != nil {
			return nil, err
		}
		rule = keptStorage(m)
	}
	rename := ms.DrafterName
	switch {
	case ms.DrafterWhole: // the checkpoint's own names
		rename = m.HeadName
	case rename == nil:
		rename = func(s string) string { return s }
	}
	dropped := func(n string) bool { return rename(m.HeadRelative(n)) == "" }
	pl := &plan.Planner{M: m, File: "model.safetensors", NormsStored: ms.DrafterNormsStored, IndexDType: ms.DrafterIndexDType}
	concat, err := planConcat(pl, m, rename, o.Head.Float, rule)
	if err != nil {
		return nil, err
	}
	dealt, err := planDeinterleave(pl, m, rename, o.Head.Float, rule)
	if err != nil {
		return nil, err
	}
	maps.Copy(concat, dealt)
	if mla := m.MLAKVB(); len(mla) > 0 {
		// Multi-head latent attention: kv_b_proj as the two halves the family's drafter names.
		if ms.DrafterKVB[0] == "" {
			return nil, fmt.Errorf("--target mlx: %s's drafter does not name the halves of kv_b_proj", m.Family)
		}
		pl.Component = plan.ComponentHead
		for _, n := range slices.Sorted(maps.Keys(mla)) {
			at := mla[n]
			layer := m.HeadRelative(n)
			layer = layer[:len(layer)-len(strings.TrimPrefix(at.KVB, m.HeadLayerPrefix(0)))]
			pl.SplitKVB(n, at, rename(layer+ms.DrafterKVB[0]), rename(layer+ms.DrafterKVB[1]), func(t plan.OutTensor) {
				t.DType = o.Head.Float
				var q *plan.Quant
				if rule != nil { // groups run along the stored rows
					q = rule(n, t.Name, t.StoredRow())
				}
				pl.Add(t, q)
			})
		}
		pl.Head(rename, o.Head.Float, rule, func(n string) bool { _, ok := mla[n]; return !ok && !concat[n] && !dropped(n) })
	} else {
		pl.Head(rename, o.Head.Float, rule, func(n string) bool { return !concat[n] && !dropped(n) })
	}
	nameExperts(pl.Out, m, rename)
	if ms.DrafterKeepsStorage {
		orderExperts(pl.Out, m, rename)
	}
	if ms.DrafterShape != nil {
		for i := range pl.Out {
			pl.Out[i].Shape = ms.DrafterShape(m.Config, pl.Out[i].Name, pl.Out[i].Shape)
		}
	}
	if err := oneBitLoads(pl.Out, ms.DrafterModelType); err != nil {
		return nil, err
	}
	pl.Component = plan.ComponentTrunk
	for _, n := range slices.Sorted(maps.Keys(ms.DrafterTrunk)) {
		src := m.TextPrefix + n
		if _, ok := m.Checkpoint.Tensors[src]; !ok {
			return nil, fmt.Errorf("--target mlx: %s's drafter carries the trunk's %s, which the checkpoint lacks", m.Family, src)
		}
		pl.Plain(src, ms.DrafterTrunk[n], o.Head.Float, rule)
	}
	p := &plan.Plan{
		Target: d.Name(), Tensors: pl.Out, TensorFiles: []string{pl.File},
		Metadata: map[string]string{"format": "mlx"},
		Options:  map[string]string{"head_precision": o.Head.Name, "group_size": strconv.Itoa(o.GroupSize), "mlx_rounding": o.Rounding, "router_bits": routerBits},
		Notes:    o.Notes,
	}
	if ms.DrafterUnrunnable != "" {
		p.Notes = append(p.Notes, "nothing runs this drafter yet: "+ms.DrafterUnrunnable)
	}
	if ms.DrafterWhole {
		return wholeDrafter(m, p, o)
	}
	if ms.DrafterStageFiles {
		if err := stageFiles(m, p); err != nil {
			return nil, err
		}
	}
	cfg, err := drafterConfig(m, p, o)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, plan.OutFile{Name: "config.json", Contents: cfg})
	p.Files = append(p.Files, targets.TokenizerCopies(m)...)
	return p, nil
}

// planConcat plans the family's DrafterConcat tensors of every MTP layer
// (the parts' rows one after the other, quantized as one matrix, as
// mlx-vlm's sanitize concatenates before its splitter quantizes) and
// returns the source tensors they consume.
func planConcat(pl *plan.Planner, m *model.Model, rename func(string) string, dtype st.DType, rule plan.QuantRule) (map[string]bool, error) {
	used := map[string]bool{}
	pl.Component = plan.ComponentHead
	for j := range m.MTPDepth {
		lp, rel := m.HeadLayerPrefix(j), "layers."+strconv.Itoa(j)+"."
		for _, c := range m.Family.MLX.DrafterConcat {
			var segs []plan.Segment
			var rows, rowLen int64
			for _, part := range c.Parts {
				t, ok := m.Checkpoint.Tensors[lp+part]
				if !ok || len(t.Shape) != 2 {
					return nil, fmt.Errorf("--target mlx: %s's drafter concatenates %s from %s, which is not a matrix of the checkpoint", m.Family, rel+c.Out, lp+part)
				}
				if rowLen != 0 && t.Shape[1] != rowLen {
					return nil, fmt.Errorf("--target mlx: %s: %s has rows of %d, the other parts of %s rows of %d", m.Family, lp+part, t.Shape[1], c.Out, rowLen)
				}
				rowLen = t.Shape[1]
				segs = append(segs, pl.Segment(lp+part, 0, t.Shape[0]))
				rows += t.Shape[0]
				used[lp+part] = true
			}
			name := rename(rel + c.Out)
			var q *plan.Quant
			if rule != nil {
				q = rule(segs[0].Source, name, rowLen)
			}
			pl.Add(plan.OutTensor{Name: name, Segments: segs, RowLen: rowLen, Shape: []int64{rows, rowLen}, DType: dtype}, q)
		}
	}
	return used, nil
}

// planDeinterleave plans the family's DrafterDeinterleave tensors of every
// MTP layer (row r of the source to the (r mod n)-th output, as mlx-vlm's
// sanitize de-interleaves before its splitter quantizes) and returns the
// source tensors they consume.
func planDeinterleave(pl *plan.Planner, m *model.Model, rename func(string) string, dtype st.DType, rule plan.QuantRule) (map[string]bool, error) {
	used := map[string]bool{}
	pl.Component = plan.ComponentHead
	for j := range m.MTPDepth {
		lp, rel := m.HeadLayerPrefix(j), "layers."+strconv.Itoa(j)+"."
		for _, sp := range m.Family.MLX.DrafterDeinterleave {
			src := lp + sp.Src
			t, ok := m.Checkpoint.Tensors[src]
			n := int64(len(sp.Outs))
			if !ok || len(t.Shape) != 2 || t.Shape[0]%n != 0 {
				return nil, fmt.Errorf("--target mlx: %s's drafter deals the rows of %s into %d tensors: it is not a matrix of the checkpoint with a multiple of %d rows", m.Family, src, n, n)
			}
			used[src] = true
			for k, out := range sp.Outs {
				var segs []plan.Segment
				for r := int64(k); r < t.Shape[0]; r += n {
					segs = append(segs, pl.Segment(src, r, 1))
				}
				name := rename(rel + out)
				var q *plan.Quant
				if rule != nil {
					q = rule(src, name, t.Shape[1])
				}
				pl.Add(plan.OutTensor{Name: name, Segments: segs, RowLen: t.Shape[1], Shape: []int64{t.Shape[0] / n, t.Shape[1]}, DType: dtype}, q)
			}
		}
	}
	return used, nil
}

// drafterConfig writes the drafter's config.json the way mlx-vlm's splitter
// does (json.dump of the top level sorted, indent 2, no final newline): the
// family's drafter model_type, the source text_config (for a flat config
// the whole config plus rope_parameters), block_size = depth + 2, and the
// quantization block when the head is quantized.
func drafterConfig(m *model.Model, p *plan.Plan, o Options) ([]byte, error) {
	text, err := textConfigObject(m)
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"model_type":          m.Family.MLX.DrafterModelType,
		"block_size":          m.MTPDepth + cmp.Or(m.Family.MLX.DrafterBlockExtra, 2),
		"text_config":         text,
		"tie_word_embeddings": m.Config.TieWordEmbeddings,
	}
	if f := m.Family.MLX.DrafterConfig; f != nil {
		maps.Copy(cfg, f(m))
	}
	switch {
	case o.Head.Quantized():
		q := quantizationConfig(p.Tensors, plan.Quant{Mode: o.Head.Mode, Bits: o.Head.Bits, GroupSize: o.GroupSize}, false)
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	case m.Family.MLX.DrafterStorageQuant != nil && slices.ContainsFunc(p.Tensors, func(t plan.OutTensor) bool { return t.Quant != nil }):
		// The splitter's quantization_from_source: one fixed block.
		sq := m.Family.MLX.DrafterStorageQuant
		q := jsonobj.Object{{Key: "group_size", Value: sq.GroupSize}, {Key: "bits", Value: sq.Bits}, {Key: "mode", Value: sq.Mode}}
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	case m.Family.MLX.DrafterKeepsStorage && slices.ContainsFunc(p.Tensors, func(t plan.OutTensor) bool { return t.Quant != nil }):
		// The splitter's _quantization_from_weights: its default, then the
		// modules the release stores quantized.
		q := quantizationConfig(p.Tensors, plan.Quant{Mode: codec.ModeMLXAffine, Bits: 8, GroupSize: 64}, false)
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	}
	out, err := jsonobj.Indent(cfg, "  ")
	if m.Family.MLX.DrafterStageFiles { // written with a final newline
		return out, err
	}
	return bytes.TrimSuffix(out, []byte("\n")), err
}

// textConfigObject returns the source's text configuration as a JSON value
// that the drafter's TextConfig reads: nested text_config as is, or the
// whole flat config, plus what the family's drafter needs (DrafterTextConfig).
// Members keep the source's order and values their literal: "attention_dropout":
// 0.0 stays 0.0, as the splitter's json.load and json.dump keep them.
func textConfigObject(m *model.Model) (jsonobj.Object, error) {
	text, err := jsonobj.Decode(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	if raw, ok := text.Get("text_config"); ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if text, err = jsonobj.Decode(raw); err != nil {
			return nil, fmt.Errorf("%s: text_config: %w", model.ConfigFile, err)
		}
	}
	// A flat config's own storage (an FP8 release's) is not the drafter's,
	// unless the family's splitter copies it along.
	if !m.Family.MLX.DrafterSourceQuantConfig {
		text = slices.DeleteFunc(text, func(kv jsonobj.KV) bool { return kv.Key == "quantization_config" })
	}
	if f := m.Family.MLX.DrafterTextConfig; f != nil {
		f(m, &text)
	}
	return text, nil
}

// Card: the drafter pairs with an MLX conversion of the same trunk; the
// snippet runs it with mlx-vlm, unless the family's MLX table says no
// released mlx-vlm can yet.
func (drafter) Card(man *manifests.Manifest) manifests.TargetCard {
	ms := familyMLX(man)
	how := mlxVLMSnippet("(`{base}` is the trunk, or any MLX conversion of it)", "{base}", ms.DrafterKind)
	if ms.DrafterWhole {
		return wholeCard(man)
	}
	if ms.DrafterUnrunnable != "" {
		how = []string{"Nothing runs this drafter yet: " + ms.DrafterUnrunnable + ". The folder is what mlx-vlm's own `" +
			ms.DrafterModelType + "` splitter writes, for the mlx-vlm release that adds the model."}
	}
	return manifests.TargetCard{
		Library: "mlx", Consumer: "MLX", TitlePrecision: man.Options["head_precision"],
		What:      "the multi-token-prediction (MTP) head as an MLX speculative drafter (mlx-vlm's `" + cmp.Or(ms.DrafterModelType, "*_mtp") + "` format)",
		Pairing:   "It pairs with an MLX conversion of the same trunk (`{base}`): the drafter shares the trunk's embedding and lm_head.",
		Experts:   "stacked as mlx-lm's `switch_mlp` `[E, out, in]`",
		Precision: precisionLines(man),
		HowToRun:  how,
	}
}

// familyMLX is the MLX table of the manifest's family (empty when unknown).
func familyMLX(man *manifests.Manifest) model.MLXSpec {
	if f, ok := model.LookupFamily(man.Model.Family); ok {
		return f.MLX
	}
	return model.MLXSpec{}
}

// mlxVLMSnippet is the card's mlx-vlm example: trunk generates (a note on
// what it is), the folder drafts.
func mlxVLMSnippet(note, trunk, kind string) []string {
	return []string{
		"With mlx-vlm (0.7.10 tested): the trunk generates, this head drafts the next tokens " + note + ":",
		"", "```python",
		"from mlx_vlm import generate, load",
		"from mlx_vlm.speculative.drafters import load_drafter",
		"",
		"model, processor = load(\"" + trunk + "\")",
		"drafter, kind = load_drafter(\"{repo}\")  # kind == \"" + cmp.Or(kind, "mtp") + "\"",
		"result = generate(model, processor, \"The capital of France is\", max_tokens=40, draft_model=drafter, draft_kind=kind)",
		"print(result.text)",
		"```",
	}
}

// keptStorage is the rule of a drafter that keeps the release's storage:
// FP4 routed experts mxfp4 of their own group (moved as they are,
// plan.TMoveMXFP4), MXFP8 tensors mxfp8 of theirs (moved where whole,
// plan.TMoveMXFP8; kv_b_proj's halves re-quantized, as the splitter's
// sanitize does), block-FP8 tensors with ue8m0 scales mxfp8 of 32 (the
// codes moved, each block's scale repeated per group: plan.TMoveMXFP8),
// everything else unquantized.
func keptStorage(m *model.Model) plan.QuantRule {
	return func(src, _ string, _ int64) *plan.Quant {
		if _, block, ok := m.MXFP8Scale(src); ok {
			return &plan.Quant{Mode: codec.ModeMLXMXFP8, Bits: 8, GroupSize: int(block[1])}
		}
		if scale, _, ok := m.BlockScale(src); ok && m.Checkpoint.Tensors[scale].DType == st.F8E8M0 {
			// Block FP8 with ue8m0 scales: mxfp8 of MX's group, each
			// block's scale repeated (blockFP8Movable checked the blocks).
			return &plan.Quant{Mode: codec.ModeMLXMXFP8, Bits: 8, GroupSize: model.MXFP8Block}
		}
		for _, blk := range m.MTPExperts {
			if src != blk.Prefix {
				continue
			}
			if _, block, ok := m.FP4Scale(blk.Prefix + "0." + m.Spec.MoE.PerExpert[0]); ok {
				return &plan.Quant{Mode: codec.ModeMLXMXFP4, Bits: 4, GroupSize: int(block[1])}
			}
		}
		return nil
	}
}

// orderExperts puts each MTP layer's stacked expert tensors in the order
// the drafter's sanitize stacks them (MLXSpec.DrafterExpertOrder), where
// they stand in the plan.
func orderExperts(ts []plan.OutTensor, m *model.Model, rename func(string) string) {
	order := m.Family.MLX.DrafterExpertOrder
	if order == nil {
		return
	}
	for j := range m.MTPDepth {
		var at []int
		byProj := map[int]plan.OutTensor{}
		for k, stacked := range m.Spec.MoE.Stacked {
			name := rename("layers." + strconv.Itoa(j) + "." + stacked)
			if i := slices.IndexFunc(ts, func(t plan.OutTensor) bool { return t.Name == name }); i >= 0 {
				at = append(at, i)
				byProj[k] = ts[i]
			}
		}
		slices.Sort(at)
		n := 0
		for _, k := range order {
			if t, ok := byProj[k]; ok && n < len(at) {
				ts[at[n]] = t
				n++
			}
		}
	}
}

// blockFP8Movable refuses a head whose block-FP8 weights the splitter's
// sanitize cannot carry as mxfp8: scales other than ue8m0 (F8_E8M0), or
// weights that are not whole blocks. mlx-vlm repeats each scale over a
// whole 128 × 128 block (mx.repeat by 4, then by 128), so a partial block
// leaves scales of another shape than the weight's and the folder does
// not load ("Expected shape (64, 4) but received shape (128, 4)").
func blockFP8Movable(m *model.Model, drafter string) error {
	for _, n := range m.HeadTensors() {
		scale, block, ok := m.BlockScale(n)
		if !ok {
			continue
		}
		t := m.Checkpoint.Tensors[n]
		if m.Checkpoint.Tensors[scale].DType != st.F8E8M0 {
			return fmt.Errorf("mlx-vlm's %s splitter carries block-FP8 weights as mxfp8 with their ue8m0 (F8_E8M0) scales; %s's scale %s is %s", drafter, n, scale, m.Checkpoint.Tensors[scale].DType)
		}
		if len(t.Shape) != 2 {
			continue
		}
		seg := rows.Segment{Source: n, Rows: t.Shape[0], Scale: scale, Block: block}
		if err := rows.BlockMovable(m.Checkpoint, seg, t.Shape[1], model.MXFP8Block); err != nil {
			return fmt.Errorf("mlx-vlm's %s splitter repeats each FP8 block scale over a whole %d × %d block into mxfp8's, which for %v leaves scales of another shape than the weight's (its folder does not load): %w", drafter, block[0], block[1], t.Shape, err)
		}
	}
	return nil
}

// oneBitLoads refuses a 1-bit drafter mlx-vlm could not load: its loader
// makes 1-bit Linear and Embedding modules only (mlx-vlm 0.7.10
// quantization/one_bit.py, replace_one_bit_modules) and raises for any
// other quantized module, a stack of experts (SwitchLinear) or of heads
// (MLA's MultiLinear): a quantized tensor of more than two dimensions.
func oneBitLoads(ts []plan.OutTensor, modelType string) error {
	for _, t := range ts {
		if t.Quant != nil && t.Quant.Bits == 1 && len(t.Shape) > 2 {
			return fmt.Errorf("--head-precision int1: mlx-vlm 0.7.10 loads 1-bit Linear and Embedding modules only (\"1-bit inference does not yet support\" any other), and this %s drafter's %s is a stack of %d (experts or heads), so its load_drafter would refuse the folder mlx-vlm's own splitter writes at 1 bit; take int2 or more", modelType, t.Name, t.Shape[0])
		}
	}
	return nil
}

// nameExperts names each MTP layer's stacked expert tensors as the
// family's DrafterName names them whole ("layers.{j}." + MoE.Stacked[k]),
// where that differs from the layer's drafter prefix followed by the
// stacked name (the planner's naming): a drafter that drops a level of
// the layer's names (DSpark's stages.{s}. without decoder.).
func nameExperts(ts []plan.OutTensor, m *model.Model, rename func(string) string) {
	if m.Spec.MoE == nil {
		return
	}
	for j := range m.MTPExperts {
		layer := "layers." + strconv.Itoa(j) + "."
		for _, stacked := range m.Spec.MoE.Stacked {
			planned, want := rename(layer)+stacked, rename(layer+stacked)
			if i := slices.IndexFunc(ts, func(t plan.OutTensor) bool { return t.Name == planned }); i >= 0 && want != planned {
				ts[i].Name = want
			}
		}
	}
}

// stageFiles lays the drafter out as mlx-vlm's DSpark splitter writes it
// (MLXSpec.DrafterStageFiles): each MTP layer's tensors, in the order the
// splitter converts them (layer by layer), in a shard of their own,
// model-0000{j+1}-of-0000{n}.safetensors, whose metadata names the
// drafter's model_type; model.safetensors.index.json as json.dumps(index,
// indent=2, sort_keys=True) + "\n", total_size every stored entry's bytes.
func stageFiles(m *model.Model, p *plan.Plan) error {
	n := m.MTPDepth
	name := func(j int) string { return fmt.Sprintf("model-%05d-of-%05d.safetensors", j+1, n) }
	stage := func(t plan.OutTensor) int {
		rel := strings.TrimPrefix(m.HeadRelative(t.Segments[0].Source), "layers.")
		j, err := strconv.Atoi(rel[:max(strings.IndexByte(rel, '.'), 0)])
		if err != nil {
			return -1
		}
		return j
	}
	var total int64
	files := map[string]json.RawMessage{}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		j := stage(*t)
		if j < 0 || j >= n {
			return fmt.Errorf("--target mlx: %s's drafter writes a shard per MTP layer; %s is of none", m.Family, t.Segments[0].Source)
		}
		t.File = name(j)
		for _, e := range t.Entries() {
			total += plan.EntryBytes(e)
			files[e.Name] = json.RawMessage(strconv.Quote(t.File))
		}
	}
	slices.SortStableFunc(p.Tensors, func(a, b plan.OutTensor) int { return cmp.Compare(stage(a), stage(b)) })
	p.TensorFiles = p.TensorFiles[:0]
	for j := range n {
		p.TensorFiles = append(p.TensorFiles, name(j))
	}
	p.Metadata["model_type"] = m.Family.MLX.DrafterModelType
	index, err := jsonobj.Indent(jsonobj.Object{{Key: "metadata", Value: jsonobj.Object{{Key: "total_size", Value: total}}}, {Key: "weight_map", Value: jsonobj.Sorted(files)}}, "  ")
	if err != nil {
		return err
	}
	p.Files = append(p.Files, plan.OutFile{Name: st.IndexFile, Contents: index})
	return nil
}
