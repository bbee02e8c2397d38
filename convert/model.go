package convert

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// family is the knowledge about one model family's checkpoint layout.
type family struct {
	name            string
	matches         func(*Config) bool
	textPrefixes    []string // candidates, most specific first
	visionPrefixes  []string
	linearAttention func(*Config) []want // the family-specific GatedDeltaNet tensors
}

var families = []*family{qwen35MoE, qwen3Next}

// gatedDeltaCommon lists the GatedDeltaNet tensors both families share.
// conv1d is expected in the raw PyTorch layout [C, 1, K].
func gatedDeltaCommon(c *Config) []want {
	h := int64(c.HiddenSize)
	kd := int64(c.LinearNumKeyHeads * c.LinearKeyHeadDim)
	vd := int64(c.LinearNumValueHeads * c.LinearValueHeadDim)
	nv := int64(c.LinearNumValueHeads)
	return []want{
		{"linear_attn.conv1d.weight", []int64{2*kd + vd, 1, int64(c.LinearConvKernelDim)}},
		{"linear_attn.A_log", []int64{nv}},
		{"linear_attn.dt_bias", []int64{nv}},
		{"linear_attn.norm.weight", []int64{int64(c.LinearValueHeadDim)}},
		{"linear_attn.out_proj.weight", []int64{h, vd}},
	}
}

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
	Family     string
	Config     *Config
	Checkpoint *st.Checkpoint
	TextPrefix string // e.g. "model.language_model."
	LayerTypes []string

	MTPDepth       int
	ConfigMTPDepth int  // as declared, when declared
	ConfigDeclares bool // whether config.json declares an MTP depth

	TrunkExperts []ExpertBlock
	MTPExperts   []ExpertBlock

	Groups map[string]*GroupStats
	DTypes map[string]int
	FP8    bool

	// Problems of the MTP head refuse any export; trunk problems refuse
	// targets that need the trunk.
	MTPProblems   []string
	TrunkProblems []string
}

// Group returns the accounting group of a tensor name.
func (m *Model) Group(name string) string {
	if strings.HasPrefix(name, "mtp.") {
		return GroupMTP
	}
	for _, p := range familyByName(m.Family).visionPrefixes {
		if strings.HasPrefix(name, p) {
			return GroupVision
		}
	}
	return GroupTrunk
}

func familyByName(name string) *family {
	for _, f := range families {
		if f.name == name {
			return f
		}
	}
	return &family{}
}

// Families lists the supported family names.
func Families() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.name)
	}
	return out
}

// Describe detects the family of a checkpoint and checks its trunk and MTP
// head for completeness against the config. It fails only when the family is
// unknown; everything else is recorded as a problem.
func Describe(cfg *Config, ck *st.Checkpoint) (*Model, error) {
	var fam *family
	for _, f := range families {
		if f.matches(cfg) {
			fam = f
			break
		}
	}
	if fam == nil {
		return nil, fmt.Errorf("%s: model_type %q (architectures %v) is not a supported family (%s)",
			ConfigFile, cfg.ModelType, cfg.Architectures, strings.Join(Families(), ", "))
	}
	if err := checkLimits(cfg, ck); err != nil {
		return nil, err
	}
	m := &Model{Family: fam.name, Config: cfg, Checkpoint: ck, LayerTypes: cfg.LayerTypes,
		Groups: map[string]*GroupStats{GroupTrunk: {}, GroupVision: {}, GroupMTP: {}}, DTypes: map[string]int{}}
	m.TextPrefix = fam.textPrefixes[0]
	for _, p := range fam.textPrefixes {
		if _, ok := ck.Tensors[p+"embed_tokens.weight"]; ok {
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
		if t.DType.IsFloat8() {
			m.FP8 = true
		}
	}
	found := map[string]bool{}
	m.describeTrunk(fam, found)
	m.describeMTP(found)
	// Anything left over is unexplained; scales of an FP8 release are named as such.
	for _, n := range ck.Names {
		if found[n] || m.Group(n) == GroupVision {
			continue
		}
		msg := fmt.Sprintf("%s: tensor %s is not part of the %s layout", ck.Tensors[n].Shard.Name, n, fam.name)
		if strings.HasSuffix(n, "weight_scale_inv") {
			msg = fmt.Sprintf("%s: tensor %s is an FP8 block scale; FP8 releases must be dequantised to bf16 first", ck.Tensors[n].Shard.Name, n)
		}
		if m.Group(n) == GroupMTP {
			m.MTPProblems = append(m.MTPProblems, msg)
		} else {
			m.TrunkProblems = append(m.TrunkProblems, msg)
		}
	}
	return m, nil
}

func (m *Model) describeTrunk(fam *family, found map[string]bool) {
	c, ck, p := m.Config, m.Checkpoint.Tensors, m.TextPrefix
	h, v := int64(c.HiddenSize), int64(c.VocabSize)
	top := []want{{"embed_tokens.weight", []int64{v, h}}, {"norm.weight", []int64{h}}}
	m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, p, top, found)...)
	if !c.TieWordEmbeddings {
		m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, "", []want{{"lm_head.weight", []int64{v, h}}}, found)...)
	}
	for i, lt := range m.LayerTypes {
		lp := p + "layers." + strconv.Itoa(i) + "."
		wants := []want{{"input_layernorm.weight", []int64{h}}, {"post_attention_layernorm.weight", []int64{h}}}
		if lt == FullAttention {
			wants = append(wants, fullAttention(c)...)
		} else {
			wants = append(wants, fam.linearAttention(c)...)
		}
		wants = append(wants, sparseMoE(c)...)
		blk, err := detectExperts(ck, lp)
		if err != nil {
			m.TrunkProblems = append(m.TrunkProblems, err.Error())
		} else {
			wants = append(wants, expertTensors(c, blk.Layout)...)
			m.TrunkExperts = append(m.TrunkExperts, m.countExperts(blk))
		}
		m.TrunkProblems = append(m.TrunkProblems, checkTensors(ck, lp, wants, found)...)
	}
}

func (m *Model) describeMTP(found map[string]bool) {
	c, ck := m.Config, m.Checkpoint.Tensors
	h := int64(c.HiddenSize)
	layers := map[int]bool{}
	for _, n := range m.Checkpoint.Names {
		rest, ok := strings.CutPrefix(n, "mtp.layers.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if j, err := strconv.Atoi(num); err == nil && j >= 0 && j < 1<<16 {
			layers[j] = true
		}
	}
	for j := range layers {
		if j+1 > m.MTPDepth {
			m.MTPDepth = j + 1
		}
	}
	m.ConfigMTPDepth, m.ConfigDeclares = c.ConfigMTPDepth()
	hasMTP := m.Groups[GroupMTP].Tensors > 0
	switch {
	case !hasMTP:
		m.MTPProblems = append(m.MTPProblems, "the checkpoint has no mtp.* tensors: there is no MTP head to export")
		return
	case m.MTPDepth == 0:
		m.MTPProblems = append(m.MTPProblems, "the checkpoint has mtp.* tensors but no mtp.layers.{j}.* layer")
	case m.ConfigDeclares && m.ConfigMTPDepth != m.MTPDepth:
		m.MTPProblems = append(m.MTPProblems, fmt.Sprintf("%s declares %d MTP layers, the tensors hold %d", ConfigFile, m.ConfigMTPDepth, m.MTPDepth))
	}
	top := []want{
		{"fc.weight", []int64{h, 2 * h}},
		{"pre_fc_norm_embedding.weight", []int64{h}},
		{"pre_fc_norm_hidden.weight", []int64{h}},
		{"norm.weight", []int64{h}},
	}
	m.MTPProblems = append(m.MTPProblems, checkTensors(ck, "mtp.", top, found)...)
	for j := 0; j < m.MTPDepth; j++ {
		lp := "mtp.layers." + strconv.Itoa(j) + "."
		wants := []want{{"input_layernorm.weight", []int64{h}}, {"post_attention_layernorm.weight", []int64{h}}}
		wants = append(wants, fullAttention(c)...)
		wants = append(wants, sparseMoE(c)...)
		blk, err := detectExperts(ck, lp)
		if err != nil {
			m.MTPProblems = append(m.MTPProblems, err.Error())
		} else {
			wants = append(wants, expertTensors(c, blk.Layout)...)
			m.MTPExperts = append(m.MTPExperts, m.countExperts(blk))
		}
		m.MTPProblems = append(m.MTPProblems, checkTensors(ck, lp, wants, found)...)
	}
}

// countExperts fills in the expert count of a fused block from its shape.
func (m *Model) countExperts(b ExpertBlock) ExpertBlock {
	if b.Layout == Fused {
		b.Count = 0
		if t, ok := m.Checkpoint.Tensors[b.Prefix+"gate_up_proj"]; ok && len(t.Shape) == 3 {
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
	return fmt.Errorf("%s: the MTP head is incomplete or inconsistent:\n  - %s", m.Checkpoint.Source.Name(), strings.Join(capList(m.MTPProblems, "problems"), "\n  - "))
}

// TrunkError refuses an incomplete trunk, for targets that convert it.
func (m *Model) TrunkError() error {
	if len(m.TrunkProblems) == 0 {
		return nil
	}
	return fmt.Errorf("%s: the trunk is incomplete or inconsistent:\n  - %s", m.Checkpoint.Source.Name(), strings.Join(capList(m.TrunkProblems, "problems"), "\n  - "))
}

// SortedDTypes lists the dtypes present, for stable reports.
func (m *Model) SortedDTypes() []string {
	var out []string
	for d := range m.DTypes {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Load reads config.json and the checkpoint inventory of src and describes the model.
// The caller closes m.Checkpoint.
func Load(src st.Source) (*Model, error) {
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
