package mlx

// --target combined --into: the MTP head added to an MLX model folder that
// mlx_lm.convert (any bits, group size, mode or mixed recipe) or an
// mlx-community upload made of the same model. The trunk's files are left
// alone; the head goes in a file of its own, which mlx-lm loads with the
// rest (load_model reads every model*.safetensors of the folder and its
// sanitize drops mtp.* of converted files); config.json and the index are
// updated to declare it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// HeadFile is the head's file in an MLX folder: mlx-lm (and mlx-lm based
// servers) load every model*.safetensors of a folder.
const HeadFile = "model-mtp.safetensors"

// weightGlob is how mlx-lm's load_model finds a folder's weight files.
const weightGlob = "model*.safetensors"

// configLimit bounds the folder's config.json as every reader of a
// config.json does (inspect's included).
const configLimit = model.MaxConfigSize

var _ targets.IntoPlanner = combined{}

// folder is what --into reads of an MLX folder: config.json and the index
// as they were before mtpconv first updated them, the names and headers of
// its weight files, and the files that hold an MTP head.
type folder struct {
	dir                 string
	config, index       []byte // index nil when the folder has none
	configSum, indexSum string // sha256 of the files as they are now
	cfg                 *model.Config
	root                jsonobj.Object // config.json's members, in order
	weights             []string
	heads               []string // weight files holding mtp.* tensors (our HeadFile included)
	hasHeadFile         bool     // HeadFile is there
	ownHead             bool     // and an earlier --into wrote it
	floatDType          st.DType // of the trunk's embedding, when stored float
	quant               *folderQuant
	vision              string // what makes it an mlx-vlm folder ("" for an mlx-lm one)
	depthKey            string // the key the folder declares the MTP depth with ("" if none)
	declaredDepth       int
}

// folderQuant is the folder's default quantization (config.json
// "quantization": what mlx-lm applies to a module without its own entry).
type folderQuant struct {
	GroupSize int    `json:"group_size"`
	Bits      int    `json:"bits"`
	Mode      string `json:"mode"`
}

// readFolder reads an MLX folder for --into, refusing what is not one.
func readFolder(dir string) (*folder, error) {
	f := &folder{dir: dir}
	var err error
	if f.config, f.configSum, err = manifests.IntoBase(dir, model.ConfigFile, configLimit); err != nil {
		return nil, err
	}
	if f.cfg, err = model.ParseConfig(f.config); err != nil {
		return nil, fmt.Errorf("--into %s: %s: %w", dir, model.ConfigFile, err)
	}
	if f.root, err = jsonobj.Decode(f.config); err != nil {
		return nil, fmt.Errorf("--into %s: %s: %w", dir, model.ConfigFile, err)
	}
	if raw, ok := f.root.Get("quantization"); ok {
		if err := json.Unmarshal(raw, &f.quant); err != nil || f.quant == nil || f.quant.Bits <= 0 {
			return nil, fmt.Errorf("--into %s: %s: \"quantization\" is not mlx-lm's (group_size, bits, mode)", dir, model.ConfigFile)
		}
		if f.quant.Mode == "" {
			f.quant.Mode = "affine"
		}
	}
	if raw, ok := f.root.Get("vision_config"); ok && string(bytes.TrimSpace(raw)) != "null" {
		f.vision = "its " + model.ConfigFile + " has vision_config"
	}
	f.declaredDepth, _ = f.cfg.ConfigMTPDepth()
	for _, k := range []string{"mtp_num_hidden_layers", "num_nextn_predict_layers"} {
		if bytes.Contains(f.config, []byte(strconv.Quote(k))) {
			f.depthKey = k
			break
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, st.IndexFile)); err == nil {
		if f.index, f.indexSum, err = manifests.IntoBase(dir, st.IndexFile, st.MaxHeaderSize); err != nil {
			return nil, err
		}
	}
	names, err := filepath.Glob(filepath.Join(dir, weightGlob))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("--into %s is not an MLX model folder: it has no %s", dir, weightGlob)
	}
	for _, path := range names {
		name := filepath.Base(path)
		h, err := readHeader(path)
		if err != nil {
			return nil, fmt.Errorf("--into %s: %w", dir, err)
		}
		if name == HeadFile {
			f.hasHeadFile = true
			if f.ownHead, err = manifests.IntoOwned(dir, name); err != nil {
				return nil, err
			}
		}
		if !f.ownHead || name != HeadFile {
			if h.Metadata["format"] != "mlx" {
				return nil, fmt.Errorf("--into %s is not an MLX model folder: %s is not an MLX file (its metadata says format %q; mlx_lm.convert writes \"mlx\")", dir, name, h.Metadata["format"])
			}
			f.weights = append(f.weights, name)
		}
		for _, t := range h.Tensors {
			if strings.HasPrefix(t.Name, "mtp.") || strings.Contains(t.Name, ".mtp.") {
				f.heads = append(f.heads, name)
				break
			}
		}
		for _, t := range h.Tensors {
			if f.vision == "" && (strings.HasPrefix(t.Name, "vision_tower.") || strings.Contains(t.Name, ".vision_tower.")) {
				f.vision = name + " holds " + t.Name
			}
			if strings.HasSuffix(t.Name, "embed_tokens.weight") && (t.DType == st.BF16 || t.DType == st.F16) {
				f.floatDType = t.DType
			}
		}
	}
	return f, nil
}

func readHeader(path string) (*st.Header, error) {
	file, fi, err := st.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return st.ReadHeader(file, fi.Size(), filepath.Base(path))
}

// sameModel refuses a folder whose config differs from the source's in a
// key the head's shapes (or its pairing with the trunk) depend on, naming it.
func (f *folder) sameModel(m *model.Model) error {
	c, src := f.cfg, m.Config
	for _, k := range []struct {
		key       string
		into, src any
	}{
		{"model_type", c.ModelType, src.ModelType},
		{"text model_type", c.TextModelType, src.TextModelType},
		{"hidden_size", c.HiddenSize, src.HiddenSize},
		{"vocab_size", c.VocabSize, src.VocabSize},
		{"num_attention_heads", c.NumAttentionHeads, src.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads, src.NumKeyValueHeads},
		{"head_dim", c.HeadDim, src.HeadDim},
		{"attn_output_gate", c.AttnOutputGate == nil || *c.AttnOutputGate, src.AttnOutputGate == nil || *src.AttnOutputGate},
		{"num_experts", c.NumExperts, src.NumExperts},
		{"num_experts_per_tok", c.NumExpertsPerTok, src.NumExpertsPerTok},
		{"moe_intermediate_size", c.MoeIntermediateSize, src.MoeIntermediateSize},
		{"shared_expert_intermediate_size", c.SharedExpertIntermed, src.SharedExpertIntermed},
		{"intermediate_size", c.IntermediateSize, src.IntermediateSize},
	} {
		if k.into != k.src {
			return fmt.Errorf("--into %s holds another model: its %s says %s %v, the source %v", f.dir, model.ConfigFile, k.key, k.into, k.src)
		}
	}
	if f.declaredDepth != 0 && f.declaredDepth != m.MTPDepth {
		return fmt.Errorf("--into %s holds another model: its %s says %s %d, the source's head has %d layers", f.dir, model.ConfigFile, f.depthKey, f.declaredDepth, m.MTPDepth)
	}
	return nil
}

// CheckInto accepts an MLX folder of the same model that holds no MTP head,
// or only the one an earlier --into added (replaced with --force). It
// returns the file mtpconv owns there.
func (cb combined) CheckInto(dir string, m *model.Model) ([]string, error) {
	f, err := readFolder(dir)
	if err != nil {
		return nil, err
	}
	return []string{HeadFile}, cb.checkFolder(f, m)
}

func (combined) checkFolder(f *folder, m *model.Model) error {
	if err := combinedRefusal(m); err != nil {
		return err
	}
	if f.vision != "" {
		// mlx-vlm keeps the vision tower and its own names (language_model.*):
		// mlx-lm, which loads the head of --into, does not load such a folder.
		return fmt.Errorf("--into %s is an mlx-vlm folder (%s): combined --into adds the head to mlx-lm folders (mlx_lm.convert, the mlx-community text conversions) only; mlx-vlm folders are not supported yet (use --target mlx for mlx-vlm's drafter)", f.dir, f.vision)
	}
	if err := f.sameModel(m); err != nil {
		return err
	}
	if f.hasHeadFile && !f.ownHead {
		return fmt.Errorf("--into %s already has %s, which mtpconv did not write; refusing to replace it", f.dir, HeadFile)
	}
	for _, h := range f.heads {
		if h != HeadFile || !f.ownHead {
			return fmt.Errorf("--into %s already holds an MTP head in %s, a file mtpconv did not write; it cannot be replaced without rewriting that file", f.dir, h)
		}
	}
	if f.index != nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(f.index, &idx); err != nil {
			return fmt.Errorf("--into %s: %s: %w", f.dir, st.IndexFile, err)
		}
		for k, file := range idx.WeightMap {
			if strings.HasPrefix(k, "mtp.") {
				return fmt.Errorf("--into %s: %s lists MTP tensor %s (in %s), a head mtpconv did not add", f.dir, st.IndexFile, k, file)
			}
		}
	}
	return nil
}

// intoOnly are the options --into does not take: the trunk is the folder's.
var intoOnly = []string{targets.OptTrunkPrecision, targets.OptTrunkRecipe, targets.OptQBits, targets.OptQGroupSize, targets.OptQMode, targets.OptQuantPredicate, targets.OptMaxShardSize}

// PlanInto plans the head for the folder: in HeadFile, named and quantized
// exactly as --target combined writes it, at the folder's quantization
// unless --head-precision says otherwise; config.json and the index are the
// folder's with the head declared.
func (cb combined) PlanInto(dir string, m *model.Model, uo targets.Options) (*plan.Plan, error) {
	var bad []string
	for _, k := range intoOnly {
		if uo.Set[k] {
			bad = append(bad, "--"+k)
		}
	}
	if len(bad) > 0 {
		return nil, targets.UsageError{Err: fmt.Errorf("--into keeps the folder's trunk as it is: %s does not apply (the head's options are --head-precision, --group-size, --mlx-rounding, --router-bits)", strings.Join(bad, ", "))}
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	f, err := readFolder(dir)
	if err != nil {
		return nil, err
	}
	if err := cb.checkFolder(f, m); err != nil {
		return nil, err
	}
	uo, note := f.headDefaults(uo)
	o, err := options(uo)
	if err != nil {
		return nil, targets.UsageError{Err: err}
	}
	if err := no1Bit(o); err != nil {
		return nil, err
	}
	pl := &plan.Planner{M: m, File: HeadFile}
	planHead(pl, m, o)
	p := &plan.Plan{
		Target: cb.Name(), Tensors: pl.Out, TensorFiles: []string{HeadFile},
		Metadata: map[string]string{"format": "mlx"},
		Options: map[string]string{"head_precision": o.Head.Name, "group_size": strconv.Itoa(o.GroupSize),
			"mlx_rounding": o.Rounding, "router_bits": strconv.Itoa(o.RouterBits), "trunk": "the folder's own (--into)"},
		Notes:    append(o.Notes, note),
		IntoKept: f.weights,
	}
	var trunkBytes int64
	for _, w := range f.weights {
		if fi, err := os.Stat(filepath.Join(dir, w)); err == nil {
			trunkBytes += fi.Size()
		}
	}
	kept := fmt.Sprintf("the trunk's %d weight files (%.2f GB) are left as they are and hashed once, so verify can tell they are unchanged", len(f.weights), float64(trunkBytes)/1e9)
	if len(f.weights) == 1 {
		kept = fmt.Sprintf("the trunk's weight file (%.2f GB) is left as it is and hashed once, so verify can tell it is unchanged", float64(trunkBytes)/1e9)
	}
	p.Notes = append(p.Notes, kept)
	if f.index != nil {
		idx, err := f.updatedIndex(pl.Out)
		if err != nil {
			return nil, err
		}
		p.Files = append(p.Files, plan.OutFile{Name: st.IndexFile, Contents: idx})
		p.IntoUpdates = append(p.IntoUpdates, plan.IntoUpdate{Name: st.IndexFile, SHA256: f.indexSum})
	}
	cfg, err := f.updatedConfig(m, pl.Out, o)
	if err != nil {
		return nil, err
	}
	// config.json last: it is what declares the head. A float head in a
	// folder that declares its depth changes nothing there: the file is left
	// alone (unless an earlier graft changed it).
	if !bytes.Equal(cfg, f.config) || manifests.SHA256(f.config) != f.configSum {
		p.Files = append(p.Files, plan.OutFile{Name: model.ConfigFile, Contents: cfg})
		p.IntoUpdates = append(p.IntoUpdates, plan.IntoUpdate{Name: model.ConfigFile, SHA256: f.configSum})
	}
	return p, nil
}

// headDefaults gives the head the folder's quantization where the user did
// not choose: its default mode, bits and group size (what mlx-lm applies to
// a module without an entry of its own; a mixed recipe's default is its
// low-bit setting), or, for a float folder, its float dtype.
func (f *folder) headDefaults(uo targets.Options) (targets.Options, string) {
	set := map[string]bool{}
	for k, v := range uo.Set {
		set[k] = v
	}
	uo.Set = set
	if set[targets.OptHeadPrecision] || uo.HeadPrecision != "" {
		return uo, "the head's precision is --head-precision " + uo.HeadPrecision
	}
	if f.quant == nil {
		uo.HeadPrecision = "bf16"
		if f.floatDType == st.F16 {
			uo.HeadPrecision = "f16"
		}
		return uo, "the head is " + uo.HeadPrecision + ", as the folder's weights (--head-precision to choose)"
	}
	name := f.quant.Mode
	if name == "affine" {
		name = "int" + strconv.Itoa(f.quant.Bits)
	}
	uo.HeadPrecision = name
	if !set[targets.OptGroupSize] {
		uo.GroupSize, set[targets.OptGroupSize] = f.quant.GroupSize, true
	}
	return uo, fmt.Sprintf("the head takes the folder's quantization: %s, group size %d (--head-precision to choose)", name, uo.GroupSize)
}

// updatedConfig is the folder's config.json with the head declared: an
// entry per quantized head module in "quantization" (and in
// "quantization_config" where mlx-lm mirrors it there; both added when the
// folder is float and the head is not), and the MTP depth when the folder
// does not declare it. Members keep their order and values; the layout is
// mlx-lm's (four-space indent).
func (f *folder) updatedConfig(m *model.Model, head []plan.OutTensor, o Options) ([]byte, error) {
	root := append(jsonobj.Object{}, f.root...)
	entries := jsonobj.Object{}
	for _, t := range head {
		if t.Quant != nil {
			entries = append(entries, jsonobj.KV{Key: strings.TrimSuffix(t.Name, ".weight"), Value: quantEntry(*t.Quant)})
		}
	}
	if len(entries) > 0 {
		blocks := 0
		for _, key := range []string{"quantization", "quantization_config"} {
			raw, ok := root.Get(key)
			if !ok {
				continue
			}
			q, err := jsonobj.Decode(raw)
			if err != nil || q == nil {
				continue // not mlx-lm's block (mlx-lm reads "quantization" first)
			}
			if _, ok := q.Get("bits"); !ok {
				continue
			}
			var kept jsonobj.Object
			for _, e := range q {
				if !strings.HasPrefix(e.Key, "mtp.") {
					kept = append(kept, e)
				}
			}
			root.Set(key, append(kept, entries...))
			blocks++
		}
		if blocks == 0 {
			q := append(quantEntry(*head[firstQuantized(head)].Quant), entries...)
			root.Set("quantization", q)
			root.Set("quantization_config", q)
		}
	}
	if f.declaredDepth == 0 {
		key := f.depthKey
		if key == "" {
			key = "mtp_num_hidden_layers" // the source's own key, unless it spells it GLM's way
			if m.Config.MTPNumHiddenLayers == nil && m.Config.NumNextnPredictLayers != nil {
				key = "num_nextn_predict_layers"
			}
		}
		if raw, ok := root.Get("text_config"); ok && f.cfg.Nested {
			text, err := jsonobj.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("--into %s: %s: text_config: %w", f.dir, model.ConfigFile, err)
			}
			text.Set(key, m.MTPDepth)
			root.Set("text_config", text)
		} else {
			root.Set(key, m.MTPDepth)
		}
	}
	out, err := jsonobj.Indent(root, "    ")
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(f.config, []byte("\n")) {
		out = bytes.TrimSuffix(out, []byte("\n")) // mlx-lm's json.dump ends without one
	}
	return out, nil
}

func firstQuantized(ts []plan.OutTensor) int {
	for i, t := range ts {
		if t.Quant != nil {
			return i
		}
	}
	return 0
}

func quantEntry(q plan.Quant) jsonobj.Object {
	return jsonobj.Object{{Key: "group_size", Value: q.GroupSize}, {Key: "bits", Value: q.Bits}, {Key: "mode", Value: q.Mode.MLXModeName()}}
}

// updatedIndex is the folder's index with the head's stored tensors mapped
// to HeadFile (weight_map sorted, as mlx-lm writes it) and their bytes
// added to total_size; total_parameters, mlx-lm's count of the model it
// loads, stays.
func (f *folder) updatedIndex(head []plan.OutTensor) ([]byte, error) {
	bad := func(err error) error { return fmt.Errorf("--into %s: %s: %w", f.dir, st.IndexFile, err) }
	root, err := jsonobj.Decode(f.index)
	if err != nil {
		return nil, bad(err)
	}
	raw, ok := root.Get("weight_map")
	if !ok {
		return nil, bad(fmt.Errorf("no weight_map"))
	}
	wm := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &wm); err != nil {
		return nil, bad(err)
	}
	var added int64
	for _, t := range head {
		for _, e := range t.Entries() {
			wm[e.Name] = json.RawMessage(strconv.Quote(HeadFile))
			added += plan.EntryBytes(e)
		}
	}
	root.Set("weight_map", jsonobj.Sorted(wm))
	if err := targets.AddToTotalSize(&root, added); err != nil {
		return nil, bad(err)
	}
	out, err := jsonobj.Indent(root, "    ")
	if err != nil {
		return nil, err
	}
	if !bytes.HasSuffix(f.index, []byte("\n")) {
		out = bytes.TrimSuffix(out, []byte("\n"))
	}
	return out, nil
}
