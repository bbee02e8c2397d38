package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// RepoQuant is the method a repo's quantization_config stores it with (one
// of the four meanings of "quant" docs/development.md tells apart), as vLLM
// names its config class (its get_name(), which the rules switch on),
// decided the way vLLM's override_quantization_method does.
type RepoQuant string

const (
	RepoQuantNone              RepoQuant = ""
	RepoQuantCompressedTensors RepoQuant = "compressed-tensors"
	RepoQuantGPTQ              RepoQuant = "auto_gptq" // quant_method "gptq" (auto_gptq.py:214-233)
	RepoQuantAWQ               RepoQuant = "auto_awq"  // quant_method "awq"
	RepoQuantFP8               RepoQuant = "fp8"       // block FP8 (the official FP8 releases)
	RepoQuantModelOpt          RepoQuant = "modelopt"  // quant_algo FP8
	RepoQuantModelOptFP4       RepoQuant = "modelopt_fp4"
	RepoQuantModelOptMixed     RepoQuant = "modelopt_mixed"
	RepoQuantModelOptMXFP8     RepoQuant = "modelopt_mxfp8"
	RepoQuantQuark             RepoQuant = "quark"
)

// refusedMethods are the methods whose runtimes cannot be told to build a
// head unquantized, each with why.
var refusedMethods = map[string]string{
	"auto-round":       "AutoRound: vLLM resolves its block_name_to_quantize inconsistently for the draft (vllm#49552) and neither runtime reads an exclusion list it takes",
	"intel/auto-round": "AutoRound: vLLM resolves its block_name_to_quantize inconsistently for the draft (vllm#49552) and neither runtime reads an exclusion list it takes",
	"inc":              "INC: vLLM resolves its block_name_to_quantize inconsistently for the draft (vllm#49552)",
	"bitsandbytes":     "bitsandbytes quantizes at load; its llm_int8_skip_modules are not read the same way by vLLM's and SGLang's MTP classes",
	"hqq":              "HQQ is not served with MTP by vLLM or SGLang",
	"torchao":          "torchao quantizes at load by module type; no exclusion list reaches the MTP classes",
	"mxfp4":            "MXFP4 (gpt-oss) has no exclusion list the MTP classes read",
	"fbgemm_fp8":       "fbgemm_fp8's modules_to_not_convert is not read for the MTP classes",
	"experts_int8":     "experts_int8 quantizes every MoE block at load, the head's included",
	"gguf":             "a GGUF repo is served through vLLM's GGUF loader: use --target gguf",
}

// Quant is a repo's quantization_config, read for the rules and edited to
// exclude the head.
type Quant struct {
	Method RepoQuant
	// QuantMethod is quant_method as written.
	QuantMethod string
	// Ignore is the method's exclusion list: compressed-tensors ignore,
	// ModelOpt ignore / exclude_modules, Quark exclude, AWQ
	// modules_to_not_convert, FP8 ignored_layers or modules_to_not_convert.
	Ignore []string
	// IgnoreKey is where Ignore lives ("ignore", "modules_to_not_convert",
	// "quantization.exclude_modules", ...), for edits and messages.
	IgnoreKey string
	// Dynamic are GPTQModel's dynamic keys, in order.
	Dynamic []string
	// ModulesInBlock is GPTQ's modules_in_block_to_quantize, flattened.
	ModulesInBlock []string
	// LMHeadQuantized: GPTQ's and AWQ's lm_head flag.
	LMHeadQuantized bool
	// Targets are compressed-tensors' config_groups targets.
	Targets []string
	// QuantizedLayers are ModelOpt MIXED_PRECISION's quantized_layers.
	QuantizedLayers []string
	// NVFP4Serialized: ModelOpt NVFP4 weights stored as NVFP4.
	NVFP4Serialized bool
	// BlockSize is FP8's weight_block_size.
	BlockSize []int64
	// DotScale: the repo names its FP8 block scales X.scale, the DeepSeek-V4
	// releases' storage (FP8's scale_fmt "ue8m0", F8_E8M0 scales; or an FP8
	// weight of the repo found with an X.scale beside it, Flash-Base's float
	// ones), its FP4 routed experts too (I8 codes, an X.scale per 32
	// inputs); vLLM's DeepSeek-V4 loader renames them weight_scale_inv and
	// weight_scale (nvidia/mtp.py:432-438).
	DotScale bool
	// StaticActivations: the method quantizes activations with a scale
	// stored per module (input_scale): compressed-tensors input_activations
	// not dynamic, FP8's activation_scheme static, ModelOpt FP8 and NVFP4.
	StaticActivations bool
	// DescAct is GPTQ's desc_act (act-order: g_idx is read).
	DescAct bool
	// Asymmetric: compressed-tensors weights not symmetric (weight_zero_point).
	Asymmetric bool
	// Bits are the weights' bits (GPTQ's and AWQ's bits, compressed-tensors'
	// weights.num_bits): how many a packed int32 holds. 0: not said.
	Bits int

	root jsonobj.Object // the whole quantization_config
}

// ParseQuant reads config.json's quantization_config (raw nil: none).
func ParseQuant(raw json.RawMessage) (*Quant, error) {
	q := &Quant{}
	if len(raw) == 0 || string(raw) == "null" {
		return q, nil
	}
	root, err := jsonobj.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("quantization_config: %w", err)
	}
	q.root = root
	var c struct {
		QuantMethod     string          `json:"quant_method"`
		Ignore          []string        `json:"ignore"`
		Exclude         []string        `json:"exclude"`
		NotConvert      []string        `json:"modules_to_not_convert"`
		IgnoredLayers   []string        `json:"ignored_layers"`
		Dynamic         jsonobj.Object  `json:"-"`
		InBlock         json.RawMessage `json:"modules_in_block_to_quantize"`
		LMHead          bool            `json:"lm_head"`
		QuantAlgo       string          `json:"quant_algo"`
		QuantizedLayers map[string]any  `json:"quantized_layers"`
		ConfigGroups    map[string]struct {
			Targets []string `json:"targets"`
			Weights *struct {
				Symmetric *bool `json:"symmetric"`
				NumBits   int   `json:"num_bits"`
			} `json:"weights"`
			InputActivations *struct {
				Dynamic *bool `json:"dynamic"`
			} `json:"input_activations"`
		} `json:"config_groups"`
		DescAct          bool   `json:"desc_act"`
		Bits             int    `json:"bits"`
		ActivationScheme string `json:"activation_scheme"`
		Quantization     *struct {
			QuantAlgo       string         `json:"quant_algo"`
			ExcludeModules  []string       `json:"exclude_modules"`
			QuantizedLayers map[string]any `json:"quantized_layers"`
		} `json:"quantization"`
		WeightBlockSize []int64 `json:"weight_block_size"`
		ScaleFmt        string  `json:"scale_fmt"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("quantization_config.%s is a JSON %s, not what the runtimes read there", te.Field, te.Value)
		}
		return nil, fmt.Errorf("quantization_config: %w", err)
	}
	q.QuantMethod = c.QuantMethod
	switch m := strings.ToLower(c.QuantMethod); m {
	case "compressed-tensors":
		q.Method, q.Ignore, q.IgnoreKey = RepoQuantCompressedTensors, c.Ignore, "ignore"
		for _, g := range sortedKeys(c.ConfigGroups) {
			cg := c.ConfigGroups[g]
			q.Targets = append(q.Targets, cg.Targets...)
			q.StaticActivations = q.StaticActivations || (cg.InputActivations != nil && cg.InputActivations.Dynamic != nil && !*cg.InputActivations.Dynamic)
			q.Asymmetric = q.Asymmetric || (cg.Weights != nil && cg.Weights.Symmetric != nil && !*cg.Weights.Symmetric)
			if cg.Weights != nil && q.Bits == 0 {
				q.Bits = cg.Weights.NumBits
			}
		}
	case "gptq":
		q.Method, q.LMHeadQuantized, q.DescAct, q.Bits = RepoQuantGPTQ, c.LMHead, c.DescAct, c.Bits
		if d, ok := root.Get("dynamic"); ok && string(d) != "null" {
			obj, err := jsonobj.Decode(d)
			if err != nil {
				return nil, fmt.Errorf("quantization_config.dynamic: %w", err)
			}
			for _, kv := range obj {
				q.Dynamic = append(q.Dynamic, kv.Key)
			}
		}
		if len(c.InBlock) > 0 && string(c.InBlock) != "null" {
			var nested any
			if err := json.Unmarshal(c.InBlock, &nested); err != nil {
				return nil, fmt.Errorf("quantization_config.modules_in_block_to_quantize: %w", err)
			}
			q.ModulesInBlock = flatten(nested)
		}
	case "awq":
		q.Method, q.Ignore, q.IgnoreKey, q.LMHeadQuantized, q.Bits = RepoQuantAWQ, c.NotConvert, "modules_to_not_convert", c.LMHead, c.Bits
	case "fp8":
		q.Method, q.BlockSize, q.StaticActivations, q.DotScale = RepoQuantFP8, c.WeightBlockSize, c.ActivationScheme == "static", c.ScaleFmt == "ue8m0"
		// fp8.py:162-168: ignored_layers, or modules_to_not_convert when that is empty.
		q.Ignore, q.IgnoreKey = c.IgnoredLayers, "ignored_layers"
		if len(q.Ignore) == 0 {
			q.Ignore, q.IgnoreKey = c.NotConvert, "modules_to_not_convert"
		}
	case "modelopt":
		// modelopt.py:320-356: the legacy nested "quantization" block, or
		// config.json's flat form with "ignore".
		algo, layers := c.QuantAlgo, c.QuantizedLayers
		q.Ignore, q.IgnoreKey = c.Ignore, "ignore"
		if c.Quantization != nil {
			algo, layers = c.Quantization.QuantAlgo, c.Quantization.QuantizedLayers
			q.Ignore, q.IgnoreKey = c.Quantization.ExcludeModules, "quantization.exclude_modules"
		}
		if layers == nil {
			layers = c.QuantizedLayers
		}
		q.QuantizedLayers = sortedKeys(layers)
		switch strings.ToUpper(algo) {
		case "FP8": // modelopt.py: ModelOptFp8LinearMethod's static input_scale
			q.Method, q.StaticActivations = RepoQuantModelOpt, true
		case "NVFP4": // ModelOptNvFp4LinearMethod's input_scale
			q.Method, q.NVFP4Serialized, q.StaticActivations = RepoQuantModelOptFP4, true, true
		case "MIXED_PRECISION":
			q.Method = RepoQuantModelOptMixed
		case "MXFP8":
			q.Method = RepoQuantModelOptMXFP8
		default:
			return nil, fmt.Errorf("quantization_config: ModelOpt quant_algo %q is not one this tool knows the runtimes' rules for (FP8, NVFP4, MXFP8, MIXED_PRECISION)", algo)
		}
	case "quark":
		q.Method, q.Ignore, q.IgnoreKey = RepoQuantQuark, c.Exclude, "exclude"
	default:
		if why, ok := refusedMethods[m]; ok {
			return nil, RefusedMethodError{Method: c.QuantMethod, Why: why}
		}
		return nil, RefusedMethodError{Method: c.QuantMethod, Why: "not a method whose vLLM and SGLang rules this tool knows (compressed-tensors, gptq, awq, fp8, modelopt, quark)"}
	}
	return q, nil
}

// RefusedMethodError is a quantization method whose runtimes cannot be told
// to build the head unquantized.
type RefusedMethodError struct{ Method, Why string }

func (e RefusedMethodError) Error() string {
	return fmt.Sprintf("quantization_config.quant_method %q: %s", e.Method, e.Why)
}

func flatten(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// withExclusions is the quantization_config with entries added so both
// runtimes build the given modules unquantized, in the method's own form
// (the entries the config has are kept as they are); derived lists the
// repo's modules stored float: the list vLLM derives for AWQ without one.
func (q *Quant) withExclusions(mods []Module, hfs hfNames, derived []string) (jsonobj.Object, []string, error) {
	root := append(jsonobj.Object{}, q.root...)
	var added []string
	appendList := func(key string, cur []string, entries []string) error {
		list := slices.Clone(cur)
		for _, e := range entries {
			if !slices.Contains(list, e) {
				list = append(list, e)
				added = append(added, e)
			}
		}
		if list == nil {
			list = []string{}
		}
		if nested, ok := strings.CutPrefix(key, "quantization."); ok {
			raw, _ := root.Get("quantization")
			obj, err := jsonobj.Decode(raw)
			if err != nil {
				return fmt.Errorf("quantization_config.quantization: %w", err)
			}
			obj.Set(nested, list)
			root.Set("quantization", obj)
			return nil
		}
		root.Set(key, list)
		return nil
	}
	prefixes := hfs.prefixes(mods)
	var err error
	switch q.Method {
	case RepoQuantCompressedTensors:
		var es []string
		for _, p := range prefixes {
			es = append(es, "re:^"+regexQuote(p)+".*")
		}
		err = appendList("ignore", q.Ignore, es)
	case RepoQuantGPTQ:
		raw, _ := root.Get("dynamic")
		dyn, derr := jsonobj.Decode(raw)
		if derr != nil && len(raw) > 0 && string(raw) != "null" {
			return nil, nil, fmt.Errorf("quantization_config.dynamic: %w", derr)
		}
		// First: the runtimes take the first key that matches
		// (gptq_utils.py:91-103), and a positive one before ours would win;
		// the repo's own key of that spelling is moved there, its value kept.
		var first jsonobj.Object
		for _, p := range prefixes {
			k := "-:^" + regexQuote(p) + ".*"
			i := slices.IndexFunc(dyn, func(kv jsonobj.KV) bool { return kv.Key == k })
			switch {
			case i == 0 && len(first) == 0:
				first, dyn = append(first, dyn[0]), dyn[1:]
			case i >= 0:
				first = append(first, dyn[i])
				dyn = slices.Delete(slices.Clone(dyn), i, i+1)
				added = append(added, k+" (moved first)")
			default:
				first = append(first, jsonobj.KV{Key: k, Value: jsonobj.Object{}})
				added = append(added, k)
			}
		}
		root.Set("dynamic", append(first, dyn...))
	case RepoQuantAWQ:
		cur := q.Ignore
		if len(cur) == 0 {
			// auto_awq.py:370-388: without a list vLLM derives one from the
			// headers (every module with no quantized tensor); writing a
			// list turns that off, so it is written out with the head added.
			cur = derived
		}
		err = appendList("modules_to_not_convert", cur, prefixes)
	case RepoQuantFP8:
		// fp8.py:177-200: exact module names (a fused module's shards; the
		// experts by the experts module's name, quant_utils.py:682-686).
		var es []string
		for _, mod := range mods {
			for _, p := range mod.parts() {
				es = append(es, p)
				for _, rt := range Runtimes {
					if n := hfs.name(rt, p); n != "" {
						es = append(es, n)
					}
				}
			}
		}
		err = appendList(q.IgnoreKey, q.Ignore, es)
	case RepoQuantModelOpt, RepoQuantModelOptFP4, RepoQuantModelOptMXFP8:
		var es []string
		for _, p := range prefixes {
			es = append(es, p+"*")
		}
		err = appendList(q.IgnoreKey, q.Ignore, es)
	case RepoQuantQuark:
		var es []string
		for _, p := range prefixes {
			es = append(es, "re:^"+regexQuote(p)+".*")
		}
		// SGLang's qwen3_5_mtp.py:83-90 turns the whole head unquantized
		// only when an mtp.* entry names the experts; vLLM's Quark matches
		// the experts module by name (quark/utils.py:48-53).
		for _, mod := range mods {
			if mod.Kind == KindExperts {
				es = append(es, mod.Name)
				if n := hfs.name(SGLang, mod.Name); n != mod.Name {
					es = append(es, n)
				}
			}
		}
		err = appendList("exclude", q.Ignore, es)
	case RepoQuantModelOptMixed:
		// Unlisted modules are unquantized (modelopt.py:1715-1765; SGLang
		// qwen3_5_mtp.py:60-64): nothing to add, a listed head module is refused by the check.
	}
	if err != nil {
		return nil, nil, err
	}
	return root, added, nil
}

// regexQuote escapes what Python's re treats specially in a module prefix.
func regexQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.^$*+?()[]{}|`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
