package convert

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// PlanCombined plans --target combined: one MLX safetensors file holding the
// trunk in stock mlx-lm's post-sanitize names and layout (norms shifted,
// conv1d relayed, experts as switch_mlp, vision dropped) plus the mtp.* head
// inline in the layout one-file engines read (norms shifted, experts split
// into mtp.layers.{j}.mlp.switch_mlp.*). The trunk and head precisions are
// independent.
func PlanCombined(m *Model, o MLXOptions) (*Plan, error) {
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	if err := m.TrunkError(); err != nil {
		return nil, err
	}
	if m.Family != qwen35MoE.name {
		// mlx-lm's qwen3_next loader only sanitizes raw per-expert files; on a
		// converted file it keeps mtp.* keys and the strict load fails.
		return nil, fmt.Errorf("--target combined supports %s checkpoints; stock mlx-lm cannot load a converted %s file that carries mtp.* tensors (use --target mlx for the head)", qwen35MoE.name, m.Family)
	}
	pl := &planner{m: m, file: "model.safetensors"}
	// Trunk: model.language_model.X -> language_model.model.X, lm_head.weight -> language_model.lm_head.weight.
	trunkName := func(n string) string {
		if rest, ok := strings.CutPrefix(n, m.TextPrefix); ok {
			return "language_model.model." + rest
		}
		return "language_model." + n
	}
	for _, n := range m.Checkpoint.Names {
		if m.Group(n) != GroupTrunk || strings.Contains(n, ".mlp.experts.") {
			continue
		}
		pl.plain(n, trunkName(n), o.Trunk, o)
	}
	for i, blk := range m.TrunkExperts {
		pl.experts(blk, trunkName(m.TextPrefix+"layers."+strconv.Itoa(i)+"."), o.Trunk, o)
	}
	pl.head(func(s string) string { return "mtp." + s }, o)

	tensors, files, index, err := shard(pl.out, o.MaxShard)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Target: TargetCombined, Tensors: tensors, TensorFiles: files,
		Metadata: map[string]string{"format": "mlx"},
		Options: map[string]string{"head_precision": o.Head.Name, "trunk_precision": o.Trunk.Name,
			"group_size": strconv.Itoa(o.GroupSize), "mlx_rounding": o.Rounding, "router_bits": strconv.Itoa(o.RouterBits)},
	}
	cfg, err := combinedConfig(m, p, o)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, OutFile{Name: "config.json", Contents: cfg})
	if index != nil {
		p.Files = append(p.Files, OutFile{Name: st.IndexFile, Contents: index})
		p.Options["max_shard_size"] = strconv.FormatInt(o.MaxShard, 10)
	}
	p.Files = append(p.Files, copies(m)...)
	p.Notes = append(p.Notes, "stock mlx-lm >= 0.32.0 loads this file (it drops mtp.* and shifts no norm on converted files); mlx-lm 0.30.7 to 0.31.3 shift every norm a second time when mtp.* keys are present")
	return p, nil
}

// combinedConfig is the source config.json with vision_config dropped and
// mlx-lm's quantization block (plus an identical quantization_config), top
// level keys sorted, as mlx_lm.convert writes it.
func combinedConfig(m *Model, p *Plan, o MLXOptions) ([]byte, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(m.Config.Raw, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	delete(root, "vision_config")
	cfg := map[string]any{}
	for k, v := range root {
		cfg[k] = v
	}
	def := o.Trunk
	if def.Bits == 0 {
		def = o.Head
	}
	if def.Bits > 0 {
		q := quantizationConfig(p.Tensors, Quant{Bits: def.Bits, GroupSize: o.GroupSize}, func(s string) string { return s })
		cfg["quantization"] = q
		cfg["quantization_config"] = q
	}
	return indentJSON(cfg, "    ")
}

// shard assigns tensors, in name order, to files of at most max tensor bytes
// (mlx-lm's rule: a new shard when the next tensor would overflow the
// current one), names them model-0000i-of-0000N.safetensors, and returns
// the index (nil for a single model.safetensors).
func shard(tensors []OutTensor, max int64) ([]OutTensor, []string, []byte, error) {
	if max <= 0 {
		return tensors, []string{"model.safetensors"}, nil, nil
	}
	sorted := append([]OutTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var sizes []int64
	assign := make([]int, len(sorted))
	for i, t := range sorted {
		var n int64
		for _, e := range t.Entries() {
			n += entryBytes(e)
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
	index, err := indentJSON(object{{"metadata", object{{"total_size", total}}}, {"weight_map", weightMap}}, "    ")
	return sorted, files, index, err
}
