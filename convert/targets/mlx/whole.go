package mlx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// wholeDrafter finishes the plan of a drafter that is the source
// checkpoint itself (MLXSpec.DrafterWhole: the Gemma-4 assistant) with the
// files mlx_vlm.convert writes beside its model.safetensors: config.json
// and model.safetensors.index.json (and the tokenizer, copied).
func wholeDrafter(m *model.Model, p *plan.Plan, o Options) (*plan.Plan, error) {
	cfg, err := wholeConfig(m, p, o)
	if err != nil {
		return nil, err
	}
	index, err := singleIndex(p.Tensors)
	if err != nil {
		return nil, err
	}
	p.Files = append(p.Files, plan.OutFile{Name: "config.json", Contents: cfg}, plan.OutFile{Name: st.IndexFile, Contents: index})
	p.Files = append(p.Files, targets.TokenizerCopies(m)...)
	return p, nil
}

// convertDType is the float dtype mlx_vlm.convert casts a whole drafter's
// floats to when it is given none (convert.py: config.json's top-level
// torch_dtype, else text_config's dtype, if one of MLX's conversion dtypes)
// and the key it came from; "" when it casts nothing (the stored dtypes stay).
func convertDType(m *model.Model) (st.DType, string) {
	var cfg struct {
		TorchDType string `json:"torch_dtype"`
		Text       struct {
			DType string `json:"dtype"`
		} `json:"text_config"`
	}
	if json.Unmarshal(m.Config.Raw, &cfg) != nil {
		return "", ""
	}
	name, key := cfg.TorchDType, "torch_dtype"
	if name == "" {
		name, key = cfg.Text.DType, "text_config.dtype"
	}
	dt, ok := map[string]st.DType{"float16": st.F16, "bfloat16": st.BF16, "float32": st.F32}[name]
	if !ok {
		return "", ""
	}
	return dt, key + " " + name
}

// wholeConfig is config.json as mlx_vlm.convert writes it (utils.save_config):
// the source's whole configuration, _name_or_path and torch_dtype dropped,
// the top level sorted (nested objects keep the source's order, values their
// literal), json.dump's indent 4 without a final newline; quantized, its
// quantization block as quantization and quantization_config and the
// vision_config it sets to {} when absent (convert's
// config.setdefault("vision_config", {}) before quantize_model).
func wholeConfig(m *model.Model, p *plan.Plan, o Options) ([]byte, error) {
	cfg, err := jsonobj.Decode(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	members := map[string]any{}
	for _, kv := range cfg {
		members[kv.Key] = kv.Value
	}
	delete(members, "_name_or_path")
	delete(members, "torch_dtype")
	if o.Head.Quantized() {
		if _, ok := members["vision_config"]; !ok {
			members["vision_config"] = jsonobj.Object{}
		}
		q := quantizationConfig(p.Tensors, plan.Quant{Mode: o.Head.Mode, Bits: o.Head.Bits, GroupSize: o.GroupSize}, false)
		members["quantization"], members["quantization_config"] = q, q
	}
	var out jsonobj.Object
	for _, k := range slices.Sorted(maps.Keys(members)) {
		out = append(out, jsonobj.KV{Key: k, Value: members[k]})
	}
	b, err := jsonobj.Indent(out, "    ")
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// singleIndex is the model.safetensors.index.json mlx-vlm's save_weights
// writes beside a single model.safetensors: total_size the bytes of every
// stored entry, weight_map each entry's file in name order, indent 4, no
// final newline.
func singleIndex(tensors []plan.OutTensor) ([]byte, error) {
	var total int64
	files := map[string]json.RawMessage{}
	for _, t := range tensors {
		for _, e := range t.Entries() {
			total += plan.EntryBytes(e)
			f, err := json.Marshal(t.File)
			if err != nil {
				return nil, err
			}
			files[e.Name] = f
		}
	}
	b, err := jsonobj.Indent(jsonobj.Object{{Key: "metadata", Value: jsonobj.Object{{Key: "total_size", Value: total}}}, {Key: "weight_map", Value: jsonobj.Sorted(files)}}, "    ")
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// wholeCard is the card of a drafter that is a model of its own (the
// Gemma-4 assistant): the mlx-vlm snippet's trunk is its target.
func wholeCard(man *manifests.Manifest) manifests.TargetCard {
	title := "drafter"
	if f, ok := model.LookupFamily(man.Model.Family); ok {
		title = f.Title
	}
	return manifests.TargetCard{
		Library: "mlx", Consumer: "MLX", TitlePrecision: man.Options["head_precision"],
		What:      "the " + title + ", a separate drafter model that shares its target's KV cache, as the MLX folder mlx-vlm drafts with (what `mlx_vlm.convert` writes from it)",
		MLP:       "dense, in every block of the drafter",
		Pairing:   "It pairs with an MLX conversion of its target model: it reads the target's token embedding, last hidden state and KV cache, and has an embedding, final norm and LM head of its own.",
		Precision: precisionLines(man),
		HowToRun:  mlxVLMSnippet("(`TARGET` is an MLX conversion of the target model)", "TARGET", ""),
	}
}
