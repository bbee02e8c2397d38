// Package mlx is the two MLX targets: "mlx", the MTP head as an mlx-vlm
// drafter folder, and "combined", one mlx-lm safetensors file holding the
// trunk and the head. It knows MLX's conventions (names after sanitize,
// config.json quantization entries, shards and index); the model's own
// names come from its family's Spec.
package mlx

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// Precision is what a component is written as: a float dtype, or an MLX
// quantization mode at some bits (affine: scales and biases in Float; the
// microscaling modes: U8 scales, no biases).
type Precision struct {
	Name  string
	Float st.DType
	Bits  int            // 0 for a float precision
	Mode  plan.QuantMode // "" for a float precision
	Group int            // the one group size the mode allows; 0: 32, 64 or 128 (affine)
}

// Quantized reports whether the precision quantizes.
func (p Precision) Quantized() bool { return p.Bits > 0 }

// Precisions accepted by --head-precision and --trunk-precision: the float
// dtypes, MLX affine at every bit width MLX packs (intN), and MLX's
// microscaling modes.
var Precisions = []string{"f16", "bf16", "int1", "int2", "int3", "int4", "int5", "int6", "int8", "mxfp4", "mxfp8", "nvfp4", "fp8"}

// fpModes are MLX's microscaling modes: their bits and their one group size.
var fpModes = map[string]Precision{
	"mxfp4": {"mxfp4", st.BF16, 4, codec.ModeMLXMXFP4, 32},
	"mxfp8": {"mxfp8", st.BF16, 8, codec.ModeMLXMXFP8, 32},
	"nvfp4": {"nvfp4", st.BF16, 4, codec.ModeMLXNVFP4, 16},
}

// ParsePrecision reads one of Precisions.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "f16":
		return Precision{Name: s, Float: st.F16}, nil
	case "bf16":
		return Precision{Name: s, Float: st.BF16}, nil
	case "int1", "int2", "int3", "int4", "int5", "int6", "int8":
		return Precision{Name: s, Float: st.BF16, Bits: int(s[3] - '0'), Mode: codec.ModeMLXAffine}, nil
	}
	if p, ok := fpModes[s]; ok {
		return p, nil
	}
	if s == "fp8" {
		// An 8-bit float head, as FP8 users ask for it: MLX's own FP8 format is
		// mxfp8 (e4m3 codes, a power-of-two scale per 32 values). A release's
		// 128 × 128 e4m3 blocks cannot be carried over as they are: their
		// scales are arbitrary floats over 16,384 values, so the exact
		// dequantized weights are quantized again, as mx.quantize(mode="mxfp8") does.
		p := fpModes["mxfp8"]
		return p, nil
	}
	return Precision{}, fmt.Errorf("precision %q is not one of %s", s, strings.Join(Precisions, ", "))
}

// mlxLMPrecision is the precision mlx_lm.convert's --q-mode and --q-bits
// name (bits 0: the mode's default, as mlx-lm has it).
func mlxLMPrecision(mode string, bits int) (string, error) {
	if mode == "" {
		mode = "affine"
	}
	if mode == "affine" {
		if bits == 0 {
			bits = 4
		}
		switch bits {
		case 2, 3, 4, 5, 6, 8:
			return "int" + strconv.Itoa(bits), nil
		}
		return "", fmt.Errorf("--q-bits %d: affine takes 2, 3, 4, 5, 6 or 8", bits)
	}
	p, ok := fpModes[mode]
	if !ok {
		return "", fmt.Errorf("--q-mode %q: must be affine, mxfp4, mxfp8 or nvfp4", mode)
	}
	if bits != 0 && bits != p.Bits {
		return "", fmt.Errorf("--q-bits %d: %s is %d-bit only", bits, mode, p.Bits)
	}
	return mode, nil
}

// Recipes are mlx-lm's mixed-bit recipes (mlx_lm.convert --quant-predicate):
// low and high bits.
var Recipes = map[string][2]int{"mixed_2_6": {2, 6}, "mixed_3_4": {3, 4}, "mixed_3_6": {3, 6}, "mixed_4_6": {4, 6}}

func recipeNames() string {
	names := make([]string, 0, len(Recipes))
	for n := range Recipes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Options are the choices of the MLX targets.
type Options struct {
	Head       Precision
	Trunk      Precision // combined target only
	GroupSize  int       // the head's group size (and the trunk's unless TrunkGroup says otherwise)
	TrunkGroup int       // the trunk's group size
	Recipe     string    // combined target: mlx-lm's mixed recipe for the trunk ("" for none)
	Rounding   string    // gpu or cpu
	RouterBits int       // floor for the router and shared-expert gate when quantized; 0 keeps the component's bits
	// RoutersFloat keeps the routers float in a quantized component (the
	// family's mlx-vlm splitter does); RouterBits then does not apply.
	RoutersFloat bool
	MaxShard     int64    // combined target: split model.safetensors into shards of at most this many tensor bytes (0: one file)
	Notes        []string // what the user should know about how the flags were read
}

// Defaults of the MLX targets: bf16 for draft fidelity, mlx-lm's group size.
const (
	defaultPrecision  = "bf16"
	defaultGroupSize  = 64
	defaultRounding   = "gpu"
	defaultRouterBits = 8
)

// options applies the defaults to the user's choices and checks them.
// Where our flag and mlx-lm's spelling of it are both given, ours wins
// (--trunk-precision over --q-bits/--q-mode, --trunk-recipe over
// --quant-predicate), except --q-group-size, which is the trunk's own and so
// wins over --group-size for the trunk.
func options(o targets.Options) (Options, error) {
	var out Options
	var err error
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	if out.Head, err = ParsePrecision(or(o.HeadPrecision, defaultPrecision)); err != nil {
		return out, fmt.Errorf("--head-precision: %w", err)
	}
	// An option counts as given when the flag was set or the library caller
	// filled it in.
	given := func(name string, filled bool) bool { return o.Set[name] || filled }
	trunk, trunkFlag := defaultPrecision, ""
	qBits, qMode := given(targets.OptQBits, o.QBits != 0), given(targets.OptQMode, o.QMode != "")
	switch {
	case given(targets.OptTrunkPrecision, o.TrunkPrecision != ""):
		trunk, trunkFlag = o.TrunkPrecision, "--"+targets.OptTrunkPrecision
		if qBits || qMode {
			out.Notes = append(out.Notes, "--trunk-precision wins over --q-bits/--q-mode; they were ignored")
		}
	case qBits || qMode:
		if trunk, err = mlxLMPrecision(o.QMode, o.QBits); err != nil {
			return out, err
		}
		trunkFlag = "--q-bits/--q-mode"
	}
	if out.Trunk, err = ParsePrecision(trunk); err != nil {
		return out, fmt.Errorf("--trunk-precision: %w", err)
	}
	recipeFlag := "--" + targets.OptTrunkRecipe
	switch {
	case given(targets.OptTrunkRecipe, o.TrunkRecipe != ""):
		out.Recipe = o.TrunkRecipe
		if given(targets.OptQuantPredicate, o.QuantPredicate != "") && o.QuantPredicate != o.TrunkRecipe {
			out.Notes = append(out.Notes, "--trunk-recipe wins over --quant-predicate; it was ignored")
		}
	case given(targets.OptQuantPredicate, o.QuantPredicate != ""):
		out.Recipe, recipeFlag = o.QuantPredicate, "--"+targets.OptQuantPredicate
	}
	if out.Recipe != "" {
		if _, ok := Recipes[out.Recipe]; !ok {
			return out, fmt.Errorf("%s %q: must be one of %s", recipeFlag, out.Recipe, recipeNames())
		}
		// mlx-lm: "Quant predicates only support 'affine' quantization"; its
		// --q-mode affine may stay.
		if trunkFlag != "" && !(trunkFlag == "--q-bits/--q-mode" && !qBits && or(o.QMode, "affine") == "affine") {
			return out, fmt.Errorf("%s %s sets the trunk's bits layer by layer (affine); leave out %s", recipeFlag, out.Recipe, trunkFlag)
		}
		out.Trunk = Precision{Name: out.Recipe, Float: st.BF16, Bits: Recipes[out.Recipe][0], Mode: codec.ModeMLXAffine}
	}
	out.Rounding, out.RouterBits, out.MaxShard = or(o.MLXRounding, defaultRounding), defaultRouterBits, o.MaxShardSize
	if o.Set[targets.OptRouterBits] {
		out.RouterBits = o.RouterBits
	}
	// Group sizes: the flag's, else the mode's own (affine: mlx-lm's 64).
	groupOf := func(p Precision) int {
		if p.Group > 0 {
			return p.Group
		}
		return defaultGroupSize
	}
	out.GroupSize, out.TrunkGroup = groupOf(out.Head), groupOf(out.Trunk)
	headFlag, trunkGroupFlag := "", ""
	if o.Set[targets.OptGroupSize] {
		out.GroupSize, out.TrunkGroup = o.GroupSize, o.GroupSize
		headFlag, trunkGroupFlag = "--group-size", "--group-size"
	}
	if given(targets.OptQGroupSize, o.QGroupSize != 0) {
		out.TrunkGroup, trunkGroupFlag = o.QGroupSize, "--q-group-size"
		if o.Set[targets.OptGroupSize] && o.GroupSize != o.QGroupSize {
			out.Notes = append(out.Notes, "--q-group-size wins over --group-size for the trunk")
		}
		if !out.Trunk.Quantized() {
			// mlx-lm ignores --q-group-size without -q; so do we, but say so.
			out.Notes = append(out.Notes, "--q-group-size has no effect: the trunk is not quantized")
		}
	}
	if err := checkGroup(headFlag, out.GroupSize, out.Head); err != nil {
		return out, err
	}
	// The trunk's group only matters when it is quantized (the mlx target
	// has no trunk at all): --group-size 16 for an nvfp4 head is no error
	// about a bf16 trunk.
	if out.Trunk.Quantized() {
		if err := checkGroup(trunkGroupFlag, out.TrunkGroup, out.Trunk); err != nil {
			return out, err
		}
	}
	if out.Rounding != "gpu" && out.Rounding != "cpu" {
		return out, fmt.Errorf("--mlx-rounding %q: must be gpu or cpu", out.Rounding)
	}
	if out.Head.Bits == 1 && out.Rounding != "cpu" {
		return out, fmt.Errorf("--head-precision int1: MLX's 1-bit affine has a rule of its own, reproduced for MLX's CPU kernel only (its Metal kernel's is not known here): add --mlx-rounding cpu")
	}
	if out.RouterBits != 0 && out.RouterBits != 8 {
		return out, fmt.Errorf("--router-bits %d: must be 8 or 0", out.RouterBits)
	}
	return out, nil
}

// checkGroup refuses a group size the component's mode does not allow,
// naming the ones it does.
func checkGroup(flag string, g int, p Precision) error {
	if flag == "" {
		flag = "group size"
	}
	if p.Group > 0 {
		if g != p.Group {
			return fmt.Errorf("%s %d: %s quantizes in groups of %d only", flag, g, p.Name, p.Group)
		}
		return nil
	}
	switch g {
	case 32, 64, 128:
		return nil
	}
	if p.Quantized() {
		return fmt.Errorf("%s %d: %s (MLX affine) takes 32, 64 or 128", flag, g, p.Name)
	}
	return fmt.Errorf("%s %d: must be 32, 64 or 128", flag, g)
}

// rule is the quantization of a component's linear weights: the component's
// mode and bits at group g; the router and shared-expert gate float
// (RoutersFloat) or at RouterBits, affine group 64 (mlx-lm's own predicate
// for these MoE models: it returns {group_size 64, bits 8}, which MLX
// quantizes as affine whatever the mode); rows that do not divide by the
// group size kept float (as mlx_lm.convert does).
func (o Options) rule(m *model.Model, p Precision, g int) plan.QuantRule {
	if !p.Quantized() {
		return nil
	}
	return func(src, name string, in int64) *plan.Quant {
		mode, bits, gs := p.Mode, p.Bits, g
		switch router := m.Is(src, model.RoleRouter); {
		case router && o.RoutersFloat:
			return nil
		case router && o.RouterBits > 0:
			mode, bits, gs = codec.ModeMLXAffine, o.RouterBits, 64
		}
		if in%int64(gs) != 0 {
			return nil
		}
		return &plan.Quant{Mode: mode, Bits: bits, GroupSize: gs, Rounding: o.Rounding}
	}
}

// recipeRule is mlx-lm's mixed_quant_predicate for the trunk: v_proj and
// down_proj of the first and last eighth of the layers and of every third
// layer in between, and lm_head, at the high bits; everything else
// (routers included: the recipe replaces the model's own predicate) at the
// low bits; group g. The layer index is the first all-digit component of
// the module path, counted at the position it has in a down_proj path.
func (o Options) recipeRule(m *model.Model, g int, layerAt int) plan.QuantRule {
	bits := Recipes[o.Recipe]
	n := m.Config.NumHiddenLayers
	return func(src, name string, in int64) *plan.Quant {
		if in%int64(g) != 0 {
			return nil
		}
		path := strings.TrimSuffix(name, ".weight")
		parts := strings.Split(path, ".")
		index := 0
		if len(parts) > layerAt {
			index, _ = strconv.Atoi(parts[layerAt])
		}
		more := index < n/8 || index >= 7*n/8 || pyMod(index-n/8, 3) == 2
		b := bits[0]
		switch {
		case (strings.Contains(path, "v_proj") || strings.Contains(path, "v_a_proj") || strings.Contains(path, "v_b_proj")) && more,
			strings.Contains(path, "down_proj") && more,
			strings.Contains(path, "lm_head"):
			b = bits[1]
		}
		return &plan.Quant{Mode: codec.ModeMLXAffine, Bits: b, GroupSize: g, Rounding: o.Rounding}
	}
}

// pyMod is Python's %: the result has the sign of the divisor.
func pyMod(a, b int) int { return ((a % b) + b) % b }

// layerLocation is where mlx-lm's recipe finds the layer index: the first
// all-digit component of the first module path holding down_proj.
func layerLocation(names []string) (int, error) {
	for _, n := range names {
		if !strings.Contains(n, "down_proj") {
			continue
		}
		parts := strings.Split(n, ".")
		for i, p := range parts {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				return i, nil
			}
		}
		return len(parts), nil
	}
	return 0, fmt.Errorf("the model has no down_proj module for a mixed recipe")
}

// quantizationConfig builds mlx-lm's "quantization" block: the defaults,
// then one entry per module (output name without .weight) whose mode, bits
// or group size differ, or every quantized module of the trunk when a
// recipe decided them (as mlx_lm.convert writes a predicate's choices).
func quantizationConfig(tensors []plan.OutTensor, def plan.Quant, everyTrunk bool) jsonobj.Object {
	q := jsonobj.Object{{Key: "group_size", Value: def.GroupSize}, {Key: "bits", Value: def.Bits}, {Key: "mode", Value: def.Mode.MLXModeName()}}
	for _, t := range tensors {
		if t.Quant == nil {
			continue
		}
		same := t.Quant.Mode == def.Mode && t.Quant.Bits == def.Bits && t.Quant.GroupSize == def.GroupSize
		if same && !(everyTrunk && t.Component == plan.ComponentTrunk) {
			continue
		}
		q = append(q, jsonobj.KV{Key: strings.TrimSuffix(t.Name, ".weight"), Value: jsonobj.Object{{Key: "group_size", Value: t.Quant.GroupSize}, {Key: "bits", Value: t.Quant.Bits}, {Key: "mode", Value: t.Quant.Mode.MLXModeName()}}})
	}
	return q
}

// no1Bit refuses a 1-bit component of an mlx-lm model (--target combined):
// 1 bit is offered for the mlx-vlm drafter, checked against its splitter
// and mlx_vlm.convert; no 1-bit head or trunk was checked against
// mlx_lm.convert.
func no1Bit(o Options) error {
	if o.Head.Bits == 1 || o.Trunk.Bits == 1 {
		return targets.UsageError{Err: fmt.Errorf("int1 is --target mlx's (the 1-bit drafter mlx-vlm's splitter writes): mtpconv has not checked a 1-bit head or trunk of an mlx-lm model against mlx_lm.convert")}
	}
	return nil
}
