package model

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Report is what `mtpconv inspect` says about a source checkpoint.
type Report struct {
	Kind          string                 `json:"kind"` // "source_checkpoint"
	Source        string                 `json:"source"`
	Family        string                 `json:"family"`
	ModelType     string                 `json:"model_type"`
	Architectures []string               `json:"architectures"`
	NestedConfig  bool                   `json:"nested_text_config"`
	Dims          map[string]any         `json:"dims"`
	LayerTypes    []string               `json:"layer_types"`
	Attention     string                 `json:"attention"`
	Layers        string                 `json:"layers"`
	Routing       string                 `json:"routing,omitempty"`
	MLP           string                 `json:"mlp,omitempty"` // a dense MLP's kind, when not SwiGLU
	MTP           MTPReport              `json:"mtp"`
	TrunkExperts  []ExpertBlock          `json:"trunk_experts"`
	Groups        map[string]*GroupStats `json:"groups"`
	DTypes        map[string]int         `json:"dtypes"`
	Dense         bool                   `json:"dense_mlp"` // a dense MLP (no experts) in trunk and head
	FP8           bool                   `json:"fp8"`
	MXFP8         int                    `json:"mxfp8_tensors,omitempty"` // MX fp8 tensors with their E8M0 scales (an MXFP8 release)
	FP4           int                    `json:"fp4_tensors,omitempty"`   // FP4 (e2m1) tensors with their E8M0 scales (DeepSeek-V4's routed experts)
	FP4Per        int64                  `json:"fp4_values_per_scale,omitempty"`
	FP8Storage    *FP8Info               `json:"fp8_storage,omitempty"` // an FP8 release: converted through its block scales
	Shards        []ShardReport          `json:"shards"`
	Tensors       []TensorReport         `json:"tensors"`
	Problems      []string               `json:"problems"` // the first MaxListed, then "and K more problems"
	ProblemCount  int                    `json:"problem_count"`
	HeadComplete  bool                   `json:"head_complete"`
	TrunkComplete bool                   `json:"trunk_complete"`
}

// MTPReport summarises the MTP head.
type MTPReport struct {
	Depth          int           `json:"depth"`
	ConfigDepth    *int          `json:"config_depth"` // null when config.json does not declare one
	Tensors        int           `json:"tensors"`
	Experts        []ExpertBlock `json:"experts"`
	ExpertsPerTok  int           `json:"experts_per_tok"`
	NormConvention string        `json:"norm_convention"`
}

// ShardReport is one file of the checkpoint.
type ShardReport struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Tensors int    `json:"tensors"`
}

// TensorReport is one tensor; SHA256 is of its raw bytes, when asked for.
type TensorReport struct {
	Name   string  `json:"name"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Shard  string  `json:"shard"`
	Bytes  int64   `json:"bytes"`
	Group  string  `json:"group"`
	SHA256 string  `json:"sha256,omitempty"`
}

// Inspect builds the report from the headers alone (the CLI's inspect --hash
// reads and hashes the tensors itself, interruptibly).
func (m *Model) Inspect() (*Report, error) {
	c := m.Config
	r := &Report{
		Kind: "source_checkpoint", Source: m.Checkpoint.Source.Name(), Family: m.Family.Name,
		ModelType: c.ModelType, Architectures: c.Architectures, NestedConfig: c.Nested,
		LayerTypes: m.LayerTypes, TrunkExperts: m.TrunkExperts, Groups: m.Groups, DTypes: m.DTypes, FP8: m.FP8, FP8Storage: m.FP8Info, MXFP8: m.MXFP8, FP4: m.FP4, FP4Per: m.FP4Per, Dense: c.Dense(),
		Attention: m.Spec.Report.Attention, Layers: m.Spec.Report.Layers, Routing: m.Spec.Report.Routing, MLP: m.Spec.Report.MLP,
		Dims: map[string]any{
			"hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers, "vocab_size": c.VocabSize,
			"num_attention_heads": c.NumAttentionHeads, "num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim,
			"rotary_dim": c.RotaryDim(), "rope_theta": c.RopeTheta,
			"num_experts": c.NumExperts, "num_experts_per_tok": c.NumExpertsPerTok,
			"moe_intermediate_size": c.MoeIntermediateSize, "shared_expert_intermediate_size": c.SharedExpertIntermed,
			"intermediate_size": c.IntermediateSize,
			"rms_norm_eps":      c.RMSNormEps, "tie_word_embeddings": c.TieWordEmbeddings,
		},
		MTP: MTPReport{Depth: m.MTPDepth, Tensors: m.Groups[GroupMTP].Tensors, Experts: m.MTPExperts,
			ExpertsPerTok: c.NumExpertsPerTok, NormConvention: m.headNormConvention()},
		HeadComplete: len(m.MTPProblems) == 0, TrunkComplete: len(m.TrunkProblems) == 0,
	}
	maps.Copy(r.Dims, m.Spec.Report.Dims)
	if r.Layers == "" {
		r.Layers = fmt.Sprint(c.NumHiddenLayers)
	}
	if r.MTP.Experts == nil {
		r.MTP.Experts = []ExpertBlock{}
	}
	if m.ConfigDeclares {
		d := m.ConfigMTPDepth
		r.MTP.ConfigDepth = &d
	}
	r.Problems = append(append([]string{}, m.MTPProblems...), m.TrunkProblems...)
	r.ProblemCount = len(r.Problems)
	r.Problems = CapList(r.Problems, "problems")
	if r.Problems == nil {
		r.Problems = []string{}
	}
	count := map[*st.Shard]int{}
	for _, n := range m.Checkpoint.Names {
		count[m.Checkpoint.Tensors[n].Shard]++
	}
	for _, s := range m.Checkpoint.Shards {
		r.Shards = append(r.Shards, ShardReport{s.Name, s.Header.FileSize, count[s]})
	}
	for _, n := range m.Checkpoint.Names {
		t := m.Checkpoint.Tensors[n]
		r.Tensors = append(r.Tensors, TensorReport{Name: n, DType: string(t.DType), Shape: t.Shape, Shard: t.Shard.Name, Bytes: t.Bytes(), Group: m.Group(n)})
	}
	return r, nil
}

// WriteText renders the report for a person.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	p("source:        %s", r.Source)
	p("family:        %s (model_type %s, %s, text_config %s)", r.Family, r.ModelType, strings.Join(r.Architectures, ","), map[bool]string{true: "nested", false: "flat"}[r.NestedConfig])
	d := r.Dims
	p("dims:          hidden %v, vocab %v", d["hidden_size"], d["vocab_size"])
	if r.Attention != "" {
		p("attention:     %s", r.Attention)
	}
	p("layers:        %s", r.Layers)
	if r.Dense {
		kind, where := r.MLP, "trunk and MTP head"
		if kind == "" {
			kind = "SwiGLU"
		}
		if r.Groups[GroupTrunk] != nil && r.Groups[GroupTrunk].Tensors == 0 {
			where = "the head only: no trunk"
		}
		p("mlp:           dense %s, intermediate %v (%s)", kind, d["intermediate_size"], where)
	} else {
		p("experts:       %v routed, top-%v, intermediate %v, shared expert %v", d["num_experts"], d["num_experts_per_tok"], d["moe_intermediate_size"], d["shared_expert_intermediate_size"])
		if r.Routing != "" {
			p("routing:       %s", r.Routing)
		}
	}
	cd := "not declared"
	if r.MTP.ConfigDepth != nil {
		cd = fmt.Sprint(*r.MTP.ConfigDepth)
	}
	p("mtp:           depth %d (config: %s), %d tensors", r.MTP.Depth, cd, r.MTP.Tensors)
	for _, e := range r.MTP.Experts {
		p("  experts:     %s: %d experts, %s", strings.TrimSuffix(e.Prefix, "."), e.Count, layoutWords(e.Layout))
	}
	layouts := map[ExpertLayout]int{}
	for _, e := range r.TrunkExperts {
		layouts[e.Layout]++
	}
	p("trunk experts: %s", countList(layouts, func(l ExpertLayout) string { return fmt.Sprintf("blocks %s", layoutWords(l)) }))
	for _, g := range []string{GroupTrunk, GroupVision, GroupMTP} {
		s := r.Groups[g]
		p("%-14s %d tensors, %s", g+":", s.Tensors, humanBytes(s.Bytes))
	}
	p("dtypes:        %s", countList(r.DTypes, func(d string) string { return d }))
	if f := r.FP8Storage; f != nil {
		p("fp8:           convertible: quant_method %s, fmt %s, blocks %v, scales %s; %d F8_E4M3 weights dequantized exactly on export", f.Method, f.Format, f.Block, f.ScaleDType, f.Weights)
		if len(f.KeptBF16) > 0 {
			p("  kept bf16:   %s", strings.Join(f.KeptBF16, ", "))
		}
	} else if r.FP8 {
		p("fp8:           F8 tensors without a usable FP8 declaration (see problems)")
	}
	if r.MXFP8 > 0 {
		p("mxfp8:         %d F8_E4M3 tensors with an F8_E8M0 scale per 32, decoded exactly where a float is written, moved as stored where MLX mxfp8 is", r.MXFP8)
	}
	if r.FP4 > 0 {
		per := "per block (of sizes that differ)"
		if r.FP4Per > 0 {
			per = fmt.Sprintf("per %d", r.FP4Per)
		}
		p("mxfp4:         %d FP4 (e2m1, two codes a byte) tensors with an F8_E8M0 scale %s, decoded exactly where a float is written, moved as stored where MLX mxfp4 or ggml MXFP4 is", r.FP4, per)
	}
	p("shards:        %d", len(r.Shards))
	if len(r.Problems) == 0 {
		p("problems:      none")
	} else {
		p("problems:      %d", r.ProblemCount)
		for _, s := range r.Problems {
			p("  - %s", s)
		}
	}
}

// WriteHashes lists every tensor with the sha256 of its bytes (inspect --hash).
func (r *Report) WriteHashes(w io.Writer) {
	fmt.Fprintf(w, "tensors:       %d, sha256 of each one's bytes:\n", len(r.Tensors))
	for _, t := range r.Tensors {
		fmt.Fprintf(w, "  %s  %s\n", t.SHA256, t.Name)
	}
}

func layoutWords(l ExpertLayout) string {
	switch l {
	case Fused:
		return "fused (gate_up and down stacked)"
	case PerExpert:
		return "stored one by one"
	}
	return string(l)
}

// countList writes counts as "4 fused, 2 per expert", sorted by name, or "none".
func countList[K ~string](counts map[K]int, name func(K) string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], name(k)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// headNormConvention says how the head's RMSNorm weights are stored, by the
// roles the family gives them.
func (m *Model) headNormConvention() string {
	if m.HeadHasZeroCentredNorms() {
		return "zero_centred (stored w, effective 1+w)"
	}
	return "plain (stored as applied)"
}

// HeadHasZeroCentredNorms says whether any of the head's norms is stored
// zero-centred (Qwen's), which every output stores shifted as 1+w.
func (m *Model) HeadHasZeroCentredNorms() bool {
	for n, r := range m.roles {
		if r&RoleZeroCentredNorm != 0 && m.IsHead(n) {
			return true
		}
	}
	return false
}
