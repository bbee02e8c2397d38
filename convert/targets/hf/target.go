// Package hf is target hf: the MTP head as the official checkpoint stores it
// (its own tensor names, layout and norm convention) for the runtimes that
// read the head from a Hugging Face repo, vLLM and SGLang. --into adds it to
// a repo whose trunk another tool quantized, declaring it in the index and
// config.json so both runtimes build it unquantized; --out writes a repo of
// the head alone. The decision rules of both runtimes, which inspect reports
// and --into checks itself against, are in rules.go.
package hf

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/internal/jsonobj"
	"github.com/mtpconv/mtpconv/manifests"
)

func init() { targets.RegisterTarget(target{}) }

// target is --target hf.
type target struct{}

var _ targets.Target = target{}

// HeadFile is the head's file in a repo --into adds it to (listed in the
// index, which vLLM, SGLang and transformers read the weight files from).
const HeadFile = "model-mtp.safetensors"

// OutFile is the weight file of a repo of the head alone.
const OutFile = "model.safetensors"

func (target) Name() string { return "hf" }
func (target) Usage() string {
	return "the MTP head in the official checkpoint's names for vLLM and SGLang: --into a quantized HF repo, or --out a repo of the head alone"
}
func (target) Accepts() []string { return []string{targets.OptHeadPrecision} }

// precisions are the --head-precision values: the head as stored (bf16).
var precisions = []string{"bf16"}

// headPrecision checks --head-precision.
func headPrecision(o targets.Options) (string, error) {
	p := o.HeadPrecision
	if p == "" {
		p = "bf16"
	}
	if !slices.Contains(precisions, p) {
		return "", targets.UsageError{Err: fmt.Errorf("--target hf: --head-precision %q: must be %v (the runtimes build an unquantized head from bf16 weights)", p, precisions)}
	}
	return p, nil
}

// planHead plans every head tensor under its own name in file: float
// tensors as bf16 (those whose dtype the family keeps, as stored; bf16
// bytes copied unchanged), FP8 weights dequantized through their block
// scales. No norm is shifted: the runtimes add the +1 of Qwen's
// zero-centred norms themselves.
func planHead(m *model.Model, file string) []plan.OutTensor {
	pl := &plan.Planner{M: m, File: file, Component: plan.ComponentHead}
	for _, n := range m.Checkpoint.Names {
		if !m.IsHead(n) || m.IsBlockScale(n) {
			continue
		}
		t := m.Checkpoint.Tensors[n]
		shape := slices.Clone(t.Shape)
		rowLen := int64(1)
		if len(shape) > 0 {
			rowLen = shape[len(shape)-1]
		}
		dtype := st.BF16
		if m.Is(n, model.RoleKeepDType) {
			dtype = t.DType
		}
		pl.Add(plan.OutTensor{Name: n, Segments: []plan.Segment{pl.Segment(n, 0, t.Elements()/rowLen)}, RowLen: rowLen, Shape: shape, DType: dtype}, nil)
	}
	return pl.Out
}

// Plan is --out: a repo of the head alone, of the kind SGLang takes as
// --speculative-draft-model-path (lmsys/DeepSeek-V3-NextN): the head in
// model.safetensors, the source's config.json without its quantization
// (the head is bf16) and with the MTP depth declared, and its tokenizer.
func (t target) Plan(m *model.Model, o targets.Options) (*plan.Plan, error) {
	prec, err := headPrecision(o)
	if err != nil {
		return nil, err
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	cfg, err := headOnlyConfig(m)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{
		Target: t.Name(), Tensors: planHead(m, OutFile), TensorFiles: []string{OutFile},
		Metadata: map[string]string{"format": "pt"},
		Options:  map[string]string{"head_precision": prec},
		Files:    append([]plan.OutFile{{Name: model.ConfigFile, Contents: cfg}}, targets.TokenizerCopies(m)...),
	}
	return p, nil
}

// headOnlyConfig is the source's config.json for a repo of the head alone:
// members in order, quantization_config dropped (an FP8 release's head is
// written bf16), the MTP depth declared.
func headOnlyConfig(m *model.Model) ([]byte, error) {
	root, err := jsonobj.Decode(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	if d, ok := m.Config.ConfigMTPDepth(); !ok || d == 0 {
		if err := setDepth(&root, m, m.Config.Nested); err != nil {
			return nil, err
		}
	}
	var kept jsonobj.Object
	for _, kv := range root {
		if kv.Key == "quantization_config" {
			continue
		}
		if raw, ok := kv.Value.(json.RawMessage); ok && kv.Key == "text_config" {
			text, err := jsonobj.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: text_config: %w", model.ConfigFile, err)
			}
			kv.Value = slices.DeleteFunc(text, func(e jsonobj.KV) bool { return e.Key == "quantization_config" })
		}
		kept = append(kept, kv)
	}
	return jsonobj.Indent(kept, "  ")
}

// setDepth declares the head's depth in the key the family reads
// (mtp_num_hidden_layers unless the config spells it GLM's way), in
// text_config when the config nests one.
func setDepth(root *jsonobj.Object, m *model.Model, nested bool) error {
	key := "mtp_num_hidden_layers"
	if m.Config.MTPNumHiddenLayers == nil && (m.Config.NumNextnPredictLayers != nil || m.Spec.HeadInLayers) {
		key = "num_nextn_predict_layers"
	}
	if tc, ok := root.Get("text_config"); ok && nested {
		text, err := jsonobj.Decode(tc)
		if err != nil {
			return fmt.Errorf("%s: text_config: %w", model.ConfigFile, err)
		}
		if !text.Has(key) && root.Has(key) {
			root.Set(key, m.MTPDepth)
			return nil
		}
		text.Set(key, m.MTPDepth)
		root.Set("text_config", text)
		return nil
	}
	root.Set(key, m.MTPDepth)
	return nil
}

// Card: the head for vLLM and SGLang.
func (target) Card(man *manifests.Manifest) manifests.TargetCard {
	return manifests.TargetCard{
		Library: "transformers", Consumer: "vLLM and SGLang", TitlePrecision: man.Options["head_precision"], Tags: []string{"safetensors"},
		What:    "the multi-token-prediction (MTP) head in the official checkpoint's own tensor names, for vLLM and SGLang",
		Pairing: "It drafts for `{base}` (or a quantization of it): the runtimes take the embedding and lm_head from the target model.",
		Experts: "as the source stores them",
		HowToRun: []string{
			"With SGLang, as the draft model of the full model:",
			"", "```sh",
			"python -m sglang.launch_server --model-path ORG/FULL-MODEL --speculative-algorithm NEXTN \\",
			"    --speculative-draft-model-path PATH/TO/THIS/FOLDER --speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2",
			"```",
			"", "To serve the head from the model's own repo instead (vLLM `speculative_config={\"method\": \"mtp\"}`), add it there with `mtpconv export --target hf --into REPO`.",
		},
	}
}
