package mlx

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// combined is --target combined: one MLX safetensors file holding the trunk
// in stock mlx-lm's post-sanitize names and layout (norms shifted, conv1d
// relayed, experts stacked, vision dropped) plus the head inline under its
// own prefix in the layout one-file engines read. Trunk and head precisions
// are independent.
type combined struct{}

var _ targets.Target = combined{}

func (combined) Name() string { return "combined" }
func (combined) Usage() string {
	return "one mlx-lm safetensors file with the trunk and the MTP head"
}
func (combined) Accepts() []string {
	return []string{targets.OptHeadPrecision, targets.OptTrunkPrecision, targets.OptTrunkRecipe, targets.OptGroupSize, targets.OptMLXRounding,
		targets.OptRouterBits, targets.OptMaxShardSize, targets.OptQBits, targets.OptQGroupSize, targets.OptQMode, targets.OptQuantPredicate}
}

func (cb combined) Plan(m *model.Model, uo targets.Options) (*plan.Plan, error) {
	o, err := options(uo)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	if err := no1Bit(o); err != nil {
		return nil, err
	}
	if err := combinedRefusal(m); err != nil { // the family's, before anything of the checkpoint
		return nil, err
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if err := m.TrunkError(); err != nil {
		return nil, err
	}
	pl := &plan.Planner{M: m, File: "model.safetensors"}
	trunkName := func(n string) string { return m.Family.MLX.TrunkName(m, n) }
	trunkRule := o.rule(m, o.Trunk, o.TrunkGroup)
	if o.Recipe != "" {
		var names []string
		for _, n := range m.Checkpoint.Names {
			if m.Group(n) == model.GroupTrunk {
				names = append(names, trunkName(n))
			}
		}
		for _, blk := range m.TrunkExperts {
			names = append(names, trunkName(m.ExpertLayer(blk))+m.Spec.MoE.Stacked[2])
		}
		at, err := layerLocation(names)
		if err != nil {
			return nil, err
		}
		trunkRule = o.recipeRule(m, o.TrunkGroup, at)
	}
	pl.Component = plan.ComponentTrunk
	for _, n := range m.TrunkTensors() {
		pl.Plain(n, trunkName(n), o.Trunk.Float, trunkRule)
	}
	for _, blk := range m.TrunkExperts {
		pl.Experts(blk, trunkName(m.ExpertLayer(blk)), o.Trunk.Float, trunkRule)
	}
	planHead(pl, m, o)

	tensors, files, index, err := shard(pl.Out, o.MaxShard)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{
		Target: cb.Name(), Tensors: tensors, TensorFiles: files,
		Metadata: map[string]string{"format": "mlx"},
		Options: map[string]string{"head_precision": o.Head.Name, "trunk_precision": o.Trunk.Name,
			"group_size": strconv.Itoa(o.GroupSize), "mlx_rounding": o.Rounding, "router_bits": strconv.Itoa(o.RouterBits)},
		Notes: o.Notes,
	}
	if o.TrunkGroup != o.GroupSize && o.Trunk.Quantized() {
		p.Options["trunk_group_size"] = strconv.Itoa(o.TrunkGroup)
	}
	if o.Recipe != "" {
		p.Options["trunk_recipe"] = o.Recipe
	}
	cfg, err := combinedConfig(m, p, o)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, plan.OutFile{Name: "config.json", Contents: cfg})
	if index != nil {
		p.Files = append(p.Files, plan.OutFile{Name: st.IndexFile, Contents: index})
		p.Options["max_shard_size"] = strconv.FormatInt(o.MaxShard, 10)
	}
	p.Files = append(p.Files, targets.TokenizerCopies(m)...)
	var names []string
	for _, f := range p.Files {
		names = append(names, f.Name)
	}
	if !targets.HasTokenizer(names) {
		p.Notes = append(p.Notes, targets.NoTokenizer)
	}
	hp := m.Spec.HeadPrefix
	p.Notes = append(p.Notes, fmt.Sprintf("stock mlx-lm >= 0.32.0 loads this file (it drops %s* and shifts no norm on converted files); mlx-lm 0.30.7 to 0.31.3 shift every norm a second time when %s* keys are present", hp, hp))
	return p, nil
}

// planHead plans the head as the combined file holds it: under its
// checkpoint names (mtp.* for a head apart), experts stacked, at the head's
// precision.
func planHead(pl *plan.Planner, m *model.Model, o Options) {
	pl.Head(m.HeadName, o.Head.Float, o.rule(m, o.Head, o.GroupSize), nil)
}

// combinedConfig is the source config.json with vision_config dropped and
// mlx-lm's quantization block (plus an identical quantization_config), top
// level keys sorted, as mlx_lm.convert writes it.
func combinedConfig(m *model.Model, p *plan.Plan, o Options) ([]byte, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(m.Config.Raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	delete(root, "vision_config")
	// The output's storage is ours: a source's own (an FP8 release's) is not carried over.
	delete(root, "quantization_config")
	cfg := map[string]any{}
	for k, v := range root {
		cfg[k] = v
	}
	// The defaults are the trunk's (mlx_lm.convert's: with a recipe, bits 4),
	// else the head's; modules that differ are listed.
	def := plan.Quant{Mode: o.Trunk.Mode, Bits: o.Trunk.Bits, GroupSize: o.TrunkGroup}
	if o.Recipe != "" {
		def.Bits = 4
	}
	if !o.Trunk.Quantized() {
		def = plan.Quant{Mode: o.Head.Mode, Bits: o.Head.Bits, GroupSize: o.GroupSize}
	}
	if def.Bits > 0 {
		q := quantizationConfig(p.Tensors, def, o.Recipe != "")
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	}
	return jsonobj.Indent(cfg, "    ")
}

// shard assigns tensors, in name order, to files of at most max tensor bytes
// (mlx-lm's rule: a new shard when the next tensor would overflow the
// current one), names them model-0000i-of-0000N.safetensors, and returns
// the index (nil for a single model.safetensors).
func shard(tensors []plan.OutTensor, max int64) ([]plan.OutTensor, []string, []byte, error) {
	if max <= 0 {
		return tensors, []string{"model.safetensors"}, nil, nil
	}
	sorted := append([]plan.OutTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var sizes []int64
	assign := make([]int, len(sorted))
	for i, t := range sorted {
		var n int64
		for _, e := range t.Entries() {
			n += plan.EntryBytes(e)
		}
		if len(sizes) == 0 || (sizes[len(sizes)-1] > 0 && sizes[len(sizes)-1]+n > max) {
			sizes = append(sizes, 0)
		}
		sizes[len(sizes)-1] += n
		assign[i] = len(sizes) - 1
	}
	if len(sizes) == 1 {
		return tensors, []string{"model.safetensors"}, nil, nil
	}
	var files []string
	for i := range sizes {
		files = append(files, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(sizes)))
	}
	weightMap := map[string]string{}
	var total int64
	for i := range sorted {
		sorted[i].File = files[assign[i]]
		for _, e := range sorted[i].Entries() {
			weightMap[e.Name] = sorted[i].File
		}
	}
	for _, s := range sizes {
		total += s
	}
	index, err := jsonobj.Indent(jsonobj.Object{{Key: "metadata", Value: jsonobj.Object{{Key: "total_size", Value: total}}}, {Key: "weight_map", Value: weightMap}}, "    ")
	return sorted, files, index, err
}

// Card: the trunk loads with stock mlx-lm; the head rides along inline.
func (combined) Card(man *manifests.Manifest) manifests.TargetCard {
	precision := man.Options["trunk_precision"]
	if h := man.Options["head_precision"]; h != "" && h != precision {
		precision = cmp.Or(precision, "trunk") + ", head " + h
	}
	if r := man.Options["trunk_recipe"]; r != "" {
		precision = r + ", head " + man.Options["head_precision"]
	}
	how := []string{
		"The trunk loads with stock mlx-lm (0.32.2 tested; versions 0.30.7 to 0.31.3 shift the norms a second time when `mtp.*` keys are present, do not use them):",
		"", "```sh", "mlx_lm.generate --model {repo} --prompt \"The capital of France is\"", "```", "",
		"One-file engines such as lemon-mlx-engine read the `mtp.*` head from the same file.",
	}
	var names []string
	for _, f := range man.Files {
		names = append(names, f.Name)
	}
	if !targets.HasTokenizer(names) {
		how = []string{"Nothing generates with this folder as it is: " + targets.NoTokenizer + ". Stock mlx-lm (0.32.2 tested) then loads the trunk; " +
			"one-file engines such as lemon-mlx-engine read the `mtp.*` head from the same file."}
	}
	return manifests.TargetCard{
		Library: "mlx", Consumer: "MLX", Whole: true, TitlePrecision: precision,
		What:      "the whole model in one MLX file: the trunk in stock mlx-lm's layout plus its multi-token-prediction (MTP) head inline (`mtp.*`)",
		Pairing:   "It runs alone: stock mlx-lm generates with the trunk, and engines that draft with `mtp.*` find the head in the same file.",
		Experts:   "stacked as mlx-lm's `switch_mlp` `[E, out, in]`",
		Warnings:  []string{OldMLXLMWarning},
		Precision: precisionLines(man),
		HowToRun:  how,
	}
}

// OldMLXLMWarning is the caveat of every MLX file that carries mtp.* keys.
const OldMLXLMWarning = manifests.OldMLXLMWarning

// combinedRefusal is the error for a family whose combined file stock
// mlx-lm cannot load, naming the families it can.
func combinedRefusal(m *model.Model) error {
	r := m.Family.MLX.CombinedRefusal
	if r == "" {
		return nil
	}
	ok := model.FamiliesWhere(func(f *model.Family) bool { return f.MLX.CombinedRefusal == "" })
	return fmt.Errorf("--target combined supports %s checkpoints; %s", strings.Join(ok, ", "), r)
}
