package convert

import (
	"fmt"
	"slices"
	"strings"
)

// Family is the knowledge about one model family's checkpoint, one file per
// family (qwen3_5_moe.go, qwen3_next.go). Nothing outside a family's file
// names one of its tensors: describing, planning and lowering read the Spec.
type Family interface {
	// Name is the family's name in reports and manifests.
	Name() string
	// Matches recognises the family from config.json.
	Matches(c *Config) bool
	// Spec is everything the family's checkpoints hold, for one config.
	Spec(c *Config) *Spec
}

// families are the supported families, each registered from its own file.
// Their Matches never overlap, so the order does not matter; it is kept
// sorted by name for messages.
var families []Family

// registerFamily adds a family; each family file calls it from init.
func registerFamily(f Family) {
	i, _ := slices.BinarySearchFunc(families, f.Name(), func(a Family, n string) int { return strings.Compare(a.Name(), n) })
	families = slices.Insert(families, i, f)
}

// Role is what a tensor is for, as far as the conversion rules care.
type Role uint8

const (
	// RoleZeroCentredNorm is an RMSNorm weight stored as w, effective 1+w.
	RoleZeroCentredNorm Role = 1 << iota
	// RoleKeepDType is never cast: it keeps its stored dtype.
	RoleKeepDType
	// RoleConv1d is a depthwise conv1d weight stored [C,1,K] (PyTorch); MLX wants [C,K,1].
	RoleConv1d
	// RoleRouter stays at higher precision than its component (MoE router, shared-expert gate).
	RoleRouter
)

// Want is one tensor a layer must hold, with the shape the config implies.
type Want struct {
	Suffix string
	Shape  []int64
	Role   Role
}

// MoE is how a family stores the routed experts of a MoE block.
type MoE struct {
	// Experts is the prefix of the routed experts under a layer, e.g. "mlp.experts.".
	Experts string
	// Fused names the two fused tensors (no .weight suffix): gate and up
	// stacked [E, 2I, H] (gate first), down [E, H, I].
	FusedGateUp, FusedDown string
	// PerExpert names the three projections of expert e: Experts + "{e}." + name.
	PerExpert [3]string // gate, up, down
	// Stacked is where targets put the stacked [E, out, in] gate, up and down
	// weights, under the layer (mlx-lm's SwitchGLU names, which the OpenVINO
	// IR reuses for its constants).
	Stacked [3]string
}

// Spec is what a family's checkpoint holds for one config, and how its MTP
// head computes. It is data: describing, planning and lowering read it.
type Spec struct {
	TextPrefixes   []string // where the text weights live, most specific first
	VisionPrefixes []string // the vision tower, dropped by every target
	HeadPrefix     string   // every MTP tensor starts with it, e.g. "mtp."

	TrunkTop   []Want                           // under the text prefix
	LMHead     *Want                            // at the root; nil when tied to the embedding
	TrunkLayer func(layerType string) []Want    // under the text prefix + "layers.{i}."
	HeadTop    []Want                           // under HeadPrefix
	HeadLayer  []Want                           // under HeadPrefix + "layers.{j}."
	MoE        *MoE                             // nil for a dense MLP
	Experts    func(layout ExpertLayout) []Want // the routed-expert tensors of one block, under a layer
	Forward    func(m *Model) Forward           // the MTP forward, for targets that lower it
	MLX        MLXSpec
}

// MLXSpec is how the MLX consumers (mlx-lm, mlx-vlm) name and configure this family.
type MLXSpec struct {
	// DrafterModelType is mlx-vlm's model_type for the head alone.
	DrafterModelType string
	// DrafterTextConfig fills keys the drafter's TextConfig needs that the
	// family's config.json may lack (given the text config object).
	DrafterTextConfig func(m *Model, text map[string]any)
	// TrunkName maps a trunk tensor name to mlx-lm's post-sanitize name.
	TrunkName func(m *Model, name string) string
	// CombinedRefusal, when set, is why stock mlx-lm cannot load a combined file.
	CombinedRefusal string
}

// Forward is a family's MTP forward, abstractly: the targets lower it.
type Forward struct {
	EmbedNorm  string // RMSNorm of the next tokens' embedding
	HiddenNorm string // RMSNorm of the trunk's hidden state (after its final norm)
	// EmbeddingFirst: fc's input is concat(embedding, hidden) in this order.
	EmbeddingFirst bool
	FC             string
	Layers         []ForwardLayer
	FinalNorm      string
	Eps            float64
}

// Attention kinds.
const (
	// AttnGatedFull is full softmax attention with q/k norms, partial
	// rotary, GQA and a sigmoid output gate interleaved per head in q_proj.
	AttnGatedFull = "gated_full"
)

// MLP kinds.
const (
	MLPSparseMoE = "sparse_moe" // routed top-k experts plus a sigmoid-gated shared expert
	MLPDense     = "dense"      // gate, up, down (SwiGLU)
)

// ForwardLayer is one decoder layer of the head: pre-norm attention and MLP with residuals.
type ForwardLayer struct {
	Prefix            string // names of the layer's nodes start with it
	InputNorm         string
	PostAttentionNorm string
	Attention         Attention
	MLP               MLP
}

// Attention is a layer's attention block.
type Attention struct {
	Kind                     string
	Prefix                   string
	Q, K, V, O, QNorm, KNorm string
	Heads, KVHeads, HeadDim  int
	RotaryDim                int
	RopeTheta                float64
	OutputGate               bool
}

// MLP is a layer's feed-forward block.
type MLP struct {
	Kind   string
	Prefix string
	// Sparse MoE: router, stacked expert weights, shared expert and its gate.
	Router           string
	Gate, Up, Down   string // stacked [E, out, in] (MoE) or [out, in] (dense)
	Experts, TopK    int
	NormTopK         bool
	SharedPrefix     string
	SharedGate       string
	SharedUp         string
	SharedDown       string
	SharedExpertGate string
}

// matchesConfig recognises a family by config.json: a model_type (top level
// or text_config's) among modelTypes, or an architecture starting with arch.
func matchesConfig(c *Config, modelTypes []string, arch string) bool {
	for _, t := range modelTypes {
		if c.ModelType == t || c.TextModelType == t {
			return true
		}
	}
	for _, a := range c.Architectures {
		if strings.HasPrefix(a, arch) {
			return true
		}
	}
	return false
}

// detectFamily finds the family of a config.
func detectFamily(cfg *Config) (Family, error) {
	for _, f := range families {
		if f.Matches(cfg) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%s: model_type %q (architectures %v) is not a supported family (%s)",
		ConfigFile, cfg.ModelType, cfg.Architectures, strings.Join(Families(), ", "))
}

// SpecFor is the Spec of the family a config belongs to.
func SpecFor(cfg *Config) (*Spec, error) {
	f, err := detectFamily(cfg)
	if err != nil {
		return nil, err
	}
	return f.Spec(cfg), nil
}

// Families lists the supported family names.
func Families() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.Name())
	}
	return out
}

// FamiliesWhere lists the families whose Spec satisfies ok (static facts
// only: the Spec is taken for an empty config).
func FamiliesWhere(ok func(*Spec) bool) []string {
	var out []string
	for _, f := range families {
		if ok(f.Spec(&Config{})) {
			out = append(out, f.Name())
		}
	}
	return out
}
