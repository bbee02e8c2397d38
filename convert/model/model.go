package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/source"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Group names for tensor accounting.
const (
	GroupTrunk  = "trunk"
	GroupVision = "vision"
	GroupMTP    = "mtp"
)

// GroupStats counts the tensors and bytes of one group.
type GroupStats struct {
	Tensors int   `json:"tensors"`
	Bytes   int64 `json:"bytes"`
}

// Model is what a checkpoint is: family, dimensions, layer types, MTP head
// and expert layouts, with every problem found. It holds no tensor data.
type Model struct {
	Family     *Family // the family (its Name in reports and manifests; its per-target tables)
	Spec       *Spec   // what the family's checkpoints hold, for this config
	Config     *Config
	Checkpoint *st.Checkpoint
	TextPrefix string // e.g. "model.language_model."
	LayerTypes []string

	MTPDepth       int
	ConfigMTPDepth int  // as declared, when declared
	ConfigDeclares bool // whether config.json declares an MTP depth

	TrunkExperts []ExpertBlock
	MTPExperts   []ExpertBlock

	Groups  map[string]*GroupStats
	DTypes  map[string]int
	FP8     bool     // F8 tensors other than MXFP8 ones
	FP8Info *FP8Info // the block-scaled FP8 storage, when the source is an FP8 release
	MXFP8   int      // MXFP8 tensors (mxfp8.go), each read with its scale
	FP4     int      // FP4 (e2m1) tensors (fp4.go), each read with its E8M0 scale
	FP4Per  int64    // values per scale of every FP4 tensor (0: they differ)

	// Problems of the MTP head refuse any export; trunk problems refuse
	// targets that need the trunk.
	MTPProblems   []string
	TrunkProblems []string

	// BaseModel is the Hub id the user gave the source (--base-model): it
	// names the source in model files over what the source says (Origin).
	BaseModel string

	roles  map[string]Role       // of every tensor the family explains
	shards map[string]*RowShards // the FP8 weights stored as tensor-parallel shards
}

// Role is what the family says a tensor is for (zero for tensors it does not name).
func (m *Model) Role(name string) Role { return m.roles[name] }

// Is reports whether a tensor has a role.
func (m *Model) Is(name string, r Role) bool { return m.roles[name]&r != 0 }

// BlockScale names the block-scale tensor of an FP8 weight and the block
// size it is stored in (config.json's quantization_config), if src is one.
func (m *Model) BlockScale(src string) (scale string, block []int64, ok bool) {
	t, found := m.Checkpoint.Tensors[src]
	if !found || t.DType != st.F8E4M3 || m.Config.QuantizationConfig == nil {
		return "", nil, false
	}
	scale = m.fp8ScaleOf(src)
	if _, found := m.Checkpoint.Tensors[scale]; !found {
		return "", nil, false
	}
	return scale, m.Config.QuantizationConfig.WeightBlockSize, true
}

// HeadTensors lists the head's tensors a target plans one by one, in
// checkpoint order: all but the routed experts (planned stacked) and FP8
// block scales (read with their weights).
func (m *Model) HeadTensors() []string {
	return m.tensorsWhere(func(n string) bool { return m.IsHead(n) })
}

// TrunkTensors lists the trunk's tensors a target plans one by one, likewise.
func (m *Model) TrunkTensors() []string {
	return m.tensorsWhere(func(n string) bool { return m.Group(n) == GroupTrunk })
}

func (m *Model) tensorsWhere(in func(string) bool) []string {
	var out []string
	for _, n := range m.Checkpoint.Names {
		if in(n) && !m.IsRoutedExpert(n) && !m.IsBlockScale(n) {
			out = append(out, n)
		}
	}
	return out
}

// IsRoutedExpert reports whether a tensor is one of a MoE block's routed experts
// (planned as stacked [E, out, in] weights, never one by one).
func (m *Model) IsRoutedExpert(name string) bool {
	return m.Spec.MoE != nil && strings.Contains(name, "."+m.Spec.MoE.Experts)
}

// ExpertLayer is the prefix of the layer that holds a block of routed experts.
func (m *Model) ExpertLayer(blk ExpertBlock) string {
	return strings.TrimSuffix(blk.Prefix, m.Spec.MoE.Experts)
}

// Group returns the accounting group of a tensor name.
func (m *Model) Group(name string) string {
	if m.IsHead(name) {
		return GroupMTP
	}
	for _, p := range m.Spec.VisionPrefixes {
		if strings.HasPrefix(name, p) {
			return GroupVision
		}
	}
	return GroupTrunk
}

// Describe detects the family of a checkpoint and checks its trunk and MTP
// head for completeness against the config. It fails only when the family is
// unknown; everything else is recorded as a problem.
func Describe(cfg *Config, ck *st.Checkpoint) (*Model, error) {
	fam, err := cfg.Family()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	spec := fam.Spec(cfg)
	if err := checkLimits(cfg, ck, spec); err != nil {
		return nil, err
	}
	m := &Model{Family: fam, Spec: spec, Config: cfg, Checkpoint: ck, LayerTypes: cfg.LayerTypes,
		Groups: map[string]*GroupStats{GroupTrunk: {}, GroupVision: {}, GroupMTP: {}}, DTypes: map[string]int{}}
	m.TextPrefix = spec.TextPrefixes[0]
	for _, p := range spec.TextPrefixes {
		if len(spec.TrunkTop) == 0 { // a drafter checkpoint: no trunk
			break
		}
		if _, ok := ck.Tensors[p+spec.TrunkTop[0].Suffix]; ok { // the token embedding
			m.TextPrefix = p
			break
		}
	}
	for _, n := range ck.Names {
		t := ck.Tensors[n]
		g := m.Groups[m.Group(n)]
		g.Tensors++
		g.Bytes += t.Bytes()
		m.DTypes[string(t.DType)]++
		if _, block, fp4 := m.FP4Scale(n); fp4 {
			if m.FP4++; m.FP4 == 1 {
				m.FP4Per = block[1]
			} else if m.FP4Per != block[1] {
				m.FP4Per = 0
			}
		}
		if _, _, mx := m.MXFP8Scale(n); mx {
			m.MXFP8++
		} else if t.DType.IsFloat8() {
			m.FP8 = true
		}
	}
	m.roles = map[string]Role{}
	m.describeTrunk()
	m.describeMTP()
	fp8, fp8Problems := m.fp8()
	m.FP8Info = fp8
	for _, p := range fp8Problems {
		// A config problem refuses every export; a weight's, those that need it.
		if p.tensor == "" || m.Group(p.tensor) == GroupMTP {
			m.MTPProblems = append(m.MTPProblems, p.msg)
		} else if m.Group(p.tensor) == GroupTrunk {
			m.TrunkProblems = append(m.TrunkProblems, p.msg)
		}
	}
	// Anything left over is unexplained; scales of an FP8 release are named as such.
	for _, n := range ck.Names {
		if _, ok := m.roles[n]; ok || m.Group(n) == GroupVision {
			continue
		}
		if m.IsBlockScale(n) {
			continue // checked with its weight (fp8.go)
		}
		msg := fmt.Sprintf("%s: tensor %s is not part of the %s layout", ck.Tensors[n].Shard.Name, n, m.Family.Name)
		if w, ok := strings.CutSuffix(n, ScaleSuffix); ok {
			msg = fmt.Sprintf("%s: tensor %s is an FP8 block scale, but %s is not an F8_E4M3 weight of this checkpoint", ck.Tensors[n].Shard.Name, n, w)
		}
		if m.Group(n) == GroupMTP {
			m.MTPProblems = append(m.MTPProblems, msg)
		} else {
			m.TrunkProblems = append(m.TrunkProblems, msg)
		}
	}
	return m, nil
}

func (m *Model) describeTrunk() {
	ck, p, spec := m.Checkpoint.Tensors, m.TextPrefix, m.Spec
	m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, p, spec.TrunkTop, m.roles)...)
	if spec.LMHead != nil {
		m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, "", []Want{*spec.LMHead}, m.roles)...)
	}
	for i := 0; i < m.Config.NumHiddenLayers; i++ {
		lp := p + "layers." + strconv.Itoa(i) + "."
		wants := spec.TrunkLayer(i)
		if !spec.moeLayer(i) {
			m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, lp, wants, m.roles)...)
			continue
		}
		if blk, ok := m.experts(lp, &m.TrunkProblems); ok {
			wants = append(wants, spec.Experts(blk.Layout)...)
			m.TrunkExperts = append(m.TrunkExperts, blk)
		}
		m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, lp, wants, m.roles)...)
	}
}

// experts detects the routed experts of the layer under lp, recording a failure in problems.
func (m *Model) experts(lp string, problems *[]string) (ExpertBlock, bool) {
	if m.Spec.MoE == nil {
		return ExpertBlock{}, false
	}
	blk, err := detectExperts(m.Checkpoint.Tensors, m.Spec.MoE, lp)
	if err != nil {
		*problems = append(*problems, err.Error())
		return blk, false
	}
	return m.countExperts(blk), true
}

func (m *Model) describeMTP() {
	c, ck, spec := m.Config, m.Checkpoint.Tensors, m.Spec
	hp := spec.headPattern(m.TextPrefix, c.NumHiddenLayers)
	for _, n := range m.Checkpoint.Names {
		if j, _, ok := spec.headPart(n, c.NumHiddenLayers); ok && j < 1<<16 && j+1 > m.MTPDepth {
			m.MTPDepth = j + 1
		}
	}
	m.ConfigMTPDepth, m.ConfigDeclares = c.ConfigMTPDepth()
	hasMTP := m.Groups[GroupMTP].Tensors > 0
	switch {
	case !hasMTP:
		m.MTPProblems = append(m.MTPProblems, fmt.Sprintf("the checkpoint has no %s* tensors: there is no MTP head to export", hp))
		return
	case m.MTPDepth == 0:
		m.MTPProblems = append(m.MTPProblems, fmt.Sprintf("the checkpoint has %s* tensors but no %slayers.{j}.* layer", hp, hp))
	case m.ConfigDeclares && m.ConfigMTPDepth != m.MTPDepth:
		m.MTPProblems = append(m.MTPProblems, fmt.Sprintf("%s declares %d MTP layers, the tensors hold %d", ConfigFile, m.ConfigMTPDepth, m.MTPDepth))
	}
	m.MTPProblems = append(m.MTPProblems, checkTensors(ck, spec.HeadPrefix, spec.HeadTop, m.roles)...)
	for j := 0; j < m.MTPDepth; j++ {
		lp := m.HeadLayerPrefix(j)
		wants := spec.HeadLayerWants(j)
		if !spec.moeLayer(c.NumHiddenLayers + j) {
			m.MTPProblems = append(m.MTPProblems, checkTensors(ck, lp, wants, m.roles)...)
			continue
		}
		if blk, ok := m.experts(lp, &m.MTPProblems); ok {
			wants = append(append([]Want{}, wants...), spec.Experts(blk.Layout)...)
			m.MTPExperts = append(m.MTPExperts, blk)
		}
		m.MTPProblems = append(m.MTPProblems, checkTensors(ck, lp, wants, m.roles)...)
	}
}

// countExperts fills in the expert count of a fused block from its shape.
func (m *Model) countExperts(b ExpertBlock) ExpertBlock {
	if b.Layout == Fused {
		b.Count = 0
		if t, ok := m.Checkpoint.Tensors[b.Prefix+m.Spec.MoE.FusedGateUp]; ok && len(t.Shape) == 3 {
			b.Count = int(t.Shape[0])
		}
	}
	return b
}

// HeadError refuses an incomplete or inconsistent MTP head, listing every problem.
func (m *Model) HeadError() error {
	if len(m.MTPProblems) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the MTP head is incomplete or inconsistent:\n  - %s", m.Checkpoint.Source.Name(), strings.Join(CapList(m.MTPProblems, "problems"), "\n  - "))
}

// TrunkError refuses an incomplete trunk, for targets that convert it.
func (m *Model) TrunkError() error {
	if len(m.TrunkProblems) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the trunk is incomplete or inconsistent:\n  - %s", m.Checkpoint.Source.Name(), strings.Join(CapList(m.TrunkProblems, "problems"), "\n  - "))
}

// Load reads config.json and the checkpoint inventory of src and describes the model.
// The caller closes m.Checkpoint.
func Load(src source.Source) (*Model, error) {
	cfg, err := LoadConfig(src)
	if err != nil {
		return nil, err
	}
	ck, err := st.Open(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Name(), err)
	}
	m, err := Describe(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, fmt.Errorf("%s: %w", src.Name(), err)
	}
	return m, nil
}
