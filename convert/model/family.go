package model

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	gg "github.com/mtpconv/mtpconv/formats/gguf"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// Family is one model family: a descriptor value its file registers once
// (RegisterFamily from init). Nothing outside a family's files names one of
// its tensors or config keys: describing, planning, lowering and every
// target read its Spec and its per-target tables. What does not depend on a
// checkpoint's config (identity, the per-target tables with their refusal
// sentences) is a field here, read without a config; Spec holds what does.
type Family struct {
	// Name is the family's name in reports and manifests.
	Name string
	// Title is the family as its users know it, in messages.
	Title string
	// Docs is the family's docs page, from the repository root
	// ("docs/glm.md"): the README's family matrix links to it.
	Docs string
	// Layout is what the family's own file holds, one line, for
	// docs/development.md's layout table (generated from the registry).
	Layout string
	// ModelTypes and Arch recognise the family from config.json's identity
	// alone, before any other key is read (MatchesIdentity); Match, when
	// set, decides instead.
	ModelTypes []string
	Arch       string
	Match      func(id Identity) bool
	// ParseConfig decodes and validates config.json (DecodeConfig and the
	// Config's checks are the shared helpers).
	ParseConfig func(raw []byte) (*Config, error)
	// Spec is everything the family's checkpoints hold, for one config.
	Spec func(c *Config) *Spec
	// ZeroCentredHead: the head's RMSNorms are stored w and applied as 1+w
	// (its Spec's head norms have RoleZeroCentredNorm; read without a
	// config where only the family is known, a drafter folder or a GGUF file).
	ZeroCentredHead bool
	// HeadLayerLists are config.json's per-layer lists that hold an entry
	// for each MTP layer after the trunk's: the runtimes build MTP layer j
	// from entry num_hidden_layers + j (vLLM's step3p5.py indexes them
	// unguarded). A repo whose lists stop at the trunk (a quantizer that
	// re-saved the config through transformers, whose Step-3.7 config class
	// cuts them) fails to load its head or builds it otherwise: inspect names
	// such a list, and --target hf --into restores the source's entries.
	HeadLayerLists []string

	// How each target's consumers name, describe and run the family; a
	// target the family cannot go to says why in its table's refusal.
	MLX      MLXSpec
	GGUF     GGUFSpec
	OpenVINO OpenVINOSpec
	HF       HFSpec

	// file is the source file that registered the family (its own file).
	file string
}

// File is the base name of the source file that registered the family: its own file.
func (f *Family) File() string { return f.file }

// String is the family's name, as messages print it.
func (f *Family) String() string { return f.Name }

// Matches recognises the family from config.json's identity.
func (f *Family) Matches(id Identity) bool {
	if f.Match != nil {
		return f.Match(id)
	}
	return MatchesIdentity(id, f.ModelTypes, f.Arch)
}

// families are the supported families, each registered from its own file.
// Their Matches never overlap, so the order does not matter; it is kept
// sorted by name for messages.
var families []*Family

// RegisterFamily adds a family; each family file calls it from init (a
// test family from its test, removing it again with the returned func).
func RegisterFamily(f *Family) (unregister func()) {
	if _, file, _, ok := runtime.Caller(1); ok {
		f.file = filepath.Base(file)
	}
	i, _ := slices.BinarySearchFunc(families, f.Name, func(a *Family, n string) int { return strings.Compare(a.Name, n) })
	families = slices.Insert(families, i, f)
	return func() {
		families = slices.DeleteFunc(families, func(g *Family) bool { return g == f })
	}
}

// Role is what a tensor is for, as far as the conversion rules care.
type Role uint8

const (
	// RoleZeroCentredNorm is an RMSNorm weight stored as w, effective 1+w.
	// A norm without it is plain (stored as applied).
	RoleZeroCentredNorm Role = 1 << iota
	// RoleKeepDType is never cast: it keeps its stored dtype (the only
	// role an integer tensor, an index buffer, may have).
	RoleKeepDType
	// RoleConv1d is a depthwise conv1d weight stored [C,1,K] (PyTorch); MLX wants [C,K,1].
	RoleConv1d
	// RoleRouter stays at higher precision than its component (MoE router,
	// shared-expert gate, the routing's score-correction bias).
	RoleRouter
	// RoleOptional may be absent: a checkpoint (or the converter that made
	// it) may drop it, and completeness does not ask for it.
	RoleOptional
)

// Want is one tensor a layer must hold, with the shape the config implies.
// A bias is a Want like any other ("self_attn.q_proj.bias", one dimension).
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
	// NoGate: the experts have an up and a down projection only (a ReLU²
	// MLP, Nemotron-H); PerExpert[0], Stacked[0] and the fused gate half are unused.
	NoGate bool
	// Width is the experts' input and output width when it is not
	// hidden_size: a latent MoE's (moe_latent_size), projected into and out
	// of it around the experts.
	Width int
}

// SwitchGLUExperts is the expert storage the Qwen and DeepSeek-V3 lineages
// and most families after them share: mlp.experts.{e}.{gate,up,down}_proj
// in the releases, transformers 5's fused gate_up_proj / down_proj, and
// mlx-lm's stacked switch_mlp.
func SwitchGLUExperts() *MoE {
	return &MoE{
		Experts: "mlp.experts.", FusedGateUp: "gate_up_proj", FusedDown: "down_proj",
		PerExpert: [3]string{"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
		Stacked:   [3]string{"mlp.switch_mlp.gate_proj.weight", "mlp.switch_mlp.up_proj.weight", "mlp.switch_mlp.down_proj.weight"},
	}
}

// ExpertWidth is the routed experts' input and output width.
func (e *MoE) ExpertWidth(c *Config) int64 {
	if e.Width > 0 {
		return int64(e.Width)
	}
	return int64(c.HiddenSize)
}

// Projections are the indices (0 gate, 1 up, 2 down) of the experts' stacked projections.
func (e *MoE) Projections() []int {
	if e.NoGate {
		return []int{1, 2}
	}
	return []int{0, 1, 2}
}

// Spec is what a family's checkpoint holds for one config, and how its MTP
// head computes. It is data: describing, planning and lowering read it.
//
// The head sits in one of two places. Apart (Qwen: HeadPrefix "mtp."),
// with HeadTop under the prefix and MTP layer j under HeadPrefix +
// "layers.{j}.". Or in the layer list (HeadInLayers: DeepSeek-V3, GLM-4.x,
// MiMo, Step), MTP layer j being the text layer num_hidden_layers + j, each
// with its own eh_proj, enorm, hnorm and shared_head.* among its HeadLayer
// wants; HeadTop is then empty.
type Spec struct {
	TextPrefixes   []string // where the text weights live, most specific first
	VisionPrefixes []string // the vision tower, dropped by every target
	HeadPrefix     string   // every tensor of a head apart starts with it, e.g. "mtp."
	HeadInLayers   bool     // the MTP layers follow the trunk's in the layer list
	// HeadOneLayer: the head apart is one MTP layer made of sub-layers, every
	// tensor under HeadPrefix belonging to it under its own name there
	// (Nemotron-H: mtp.layers.0 the attention, mtp.layers.1 the MoE, which
	// llama.cpp folds into block n_layer). Its HeadLayer wants and MoE
	// experts are named under HeadPrefix ("layers.1.mixer.experts.").
	HeadOneLayer bool
	// HeadLayersNumbered: MTP layer j lives at HeadPrefix + "{j}." rather
	// than HeadPrefix + "layers.{j}." (DeepSeek-V4's mtp.0.*).
	HeadLayersNumbered bool
	// HeadLayers is where a head apart keeps its layers under HeadPrefix
	// ("" means "layers."): a drafter checkpoint that is all head (the
	// Gemma-4 assistant: HeadPrefix "", its blocks at "model.layers.{j}.").
	HeadLayers string

	TrunkTop   []Want             // under the text prefix
	LMHead     *Want              // at the root; nil when tied to the embedding
	TrunkLayer func(i int) []Want // under the text prefix + "layers.{i}."
	HeadTop    []Want             // under HeadPrefix (a head apart)
	HeadLayer  []Want             // under each MTP layer's prefix
	// HeadLayerAt, when set, gives MTP layer j's wants where they differ by
	// depth (Inkling: each depth a sliding-window or a full-attention block of
	// its own dimensions; the Gemma-4 assistant: sliding and full attention of
	// other head sizes); nil: HeadLayer for every depth (HeadLayerWants).
	HeadLayerAt func(j int) []Want
	MoE         *MoE // nil for a dense MLP
	// ExpertsAsTensors: the routed experts are wanted tensors carried
	// whole (Hy4's fused stacks, kept fused by its only consumer), not
	// MoE expert blocks; outputs still hold every expert.
	ExpertsAsTensors bool
	Experts          func(layout ExpertLayout) []Want // the routed-expert tensors of one block, under a layer
	// MoELayer reports whether layer i routes experts (the MTP layer j is
	// i = num_hidden_layers + j); nil: every layer does when MoE is set.
	// A MoE trunk with leading dense layers (first_k_dense_replace) says
	// no for those, and lists their dense MLP in TrunkLayer.
	MoELayer func(i int) bool
	Forward  func(m *Model) Forward // the MTP forward, for targets that lower it
	// FP8Shards, when set, says which FP8 weights of a release are stored
	// as tensor-parallel shards and how (nil, nil for the others), from
	// the weight's and its scale's shapes; an error refuses the weight.
	FP8Shards func(m *Model, weight string) (*RowShards, error)

	// What inspect says of the family's own config.
	Report ReportSpec
}

// HFSpec is how vLLM and SGLang build the family's head from a Hugging Face
// repo: the facts of their MTP model classes that the decision rules of
// convert/targets/hf need (the rules themselves are the runtimes' and live
// there). Modules are named by the checkpoint's module names (a weight's
// name without ".weight"); Plain and LMHeads list them by their name under
// the head's layer or prefix (HeadRelative without "layers.{j}.").
type HFSpec struct {
	// Refusal, when set, is the one sentence naming the runtime that is
	// missing (neither pinned vLLM nor SGLang builds the family's head).
	Refusal string
	// Unported, when set, is the one sentence saying why the target does
	// not write the head although a runtime builds it: how the runtimes
	// build its modules is not ported (the target refuses; inspect's
	// serving report does not judge the head).
	Unported string
	// OwnRepo, when set, is the one sentence saying that the runtimes serve
	// the family's drafter as a model of its own, from its own repo, and
	// how: the source already is what they load, so the target writes
	// nothing and inspect does not judge it as a head of a trunk repo.
	OwnRepo string
	// MTPClass names the runtimes' MTP model class (vLLM's
	// model_executor/models/<MTPClass>.py and SGLang's models/ sibling),
	// whose own overrides of the repo's quantization the rules port.
	MTPClass string
	// PlainVLLM and PlainSGLang are the modules each runtime builds without
	// the repo's quantization config (a torch nn.Linear, or a linear layer
	// given none): never quantized, whatever the config says.
	PlainVLLM, PlainSGLang []string
	// LMHeads are the modules built as a ParallelLMHead (quantized only by
	// a method that quantizes LM heads), which both runtimes replace by the
	// trunk's lm_head when drafting: optional in a repo (hf.servedByTarget).
	LMHeads []string
	// SGLangName maps a head module to SGLang's name for it when SGLang's
	// MTP class places it elsewhere (GLM's NextN layer is model.decoder);
	// nil: the checkpoint's name.
	SGLangName func(c *Config, module string) string
	// VLLMName is the same for vLLM (Step-3.5's decoder under mtp_block,
	// Ling-3.0's attention as self_attn); nil: the checkpoint's name.
	VLLMName func(c *Config, module string) string
	// OwnLMHeads: the runtimes draft with each MTP layer's own LM head
	// (Step-3.5's per-layer shared_head), not the trunk's: the repo must
	// hold it.
	OwnLMHeads bool
	// ExpertProjections are the names, under expert 0, by which the
	// runtimes' MoE layers ask a compressed-tensors config about the
	// routed experts (their ckpt_names: DeepSeek-V4's w1, w3, w2), each
	// under the runtime's name for the checkpoint's expert 0; nil:
	// gate_proj, up_proj, down_proj.
	ExpertProjections []string
	// FixedDepth, when set, is the number of MTP layers both runtimes'
	// classes build whatever the config says (MiMo-V2: one): no depth key is
	// written, and layers past it are held but not run.
	FixedDepth int
	// OutTrunk are trunk tensors a repo of the head alone (--out) carries
	// because the runtime's draft class loads them from the draft's own
	// weights, not from the target model (Inkling's backbone embed_norm).
	OutTrunk []string
	// Refuse, when set, says why the target refuses this config although
	// the family is ported ("" when it does not): a layout of the family
	// whose modules the port does not name.
	Refuse func(c *Config) string
}

// ReportSpec is what inspect says of a family's own config, beyond the keys
// every family shares (hidden size, vocabulary, experts, ...).
type ReportSpec struct {
	Dims      map[string]any // the family's own config values, by config key
	Attention string         // its attention, in words
	Layers    string         // its layer list, in words
	Routing   string         // how its MoE routes, in words (empty: softmax top-k)
	MLP       string         // its dense MLP's kind (empty: SwiGLU)
}

// GGUFSpec is how llama.cpp names and describes the family: its
// architecture, and what its reference converter (convert_hf_to_gguf.py,
// gguf-py's constants and tensor map) writes for it. Names are data keyed
// by the family's own tensor names; the target only applies them.
type GGUFSpec struct {
	// Refusal, when set, is the one sentence saying why no llama.cpp runs
	// the family's head (the pinned llama.cpp has no draft graph for it):
	// the target writes nothing nobody can draft with.
	Refusal string
	// Refuse, when set, says why the target refuses this config although
	// llama.cpp runs the family ("" when it does not): a release of the
	// family no pinned llama.cpp has an architecture for (DeepSeek-V4.1's
	// DSpark stages beside V4-Flash-0731's).
	Refuse func(c *Config) string
	// Arch is llama.cpp's architecture (general.architecture, the prefix of its keys).
	Arch string
	// PreTokenizer is tokenizer.ggml.pre for the family's official tokenizers.
	PreTokenizer string
	// Top gives the kind of the tensors outside the layers: a TrunkTop
	// suffix (under the text prefix) or the LM head's name.
	Top map[string]gg.TensorName
	// HeadTop gives the kind of a tensor under the head prefix, in block n_layer.
	HeadTop map[string]gg.TensorName
	// Layer gives the kind of a tensor under a decoder layer (MTP layer j
	// is block n_layer + j). The kinds' table (formats/gguf) names it and
	// decides its type.
	Layer map[string]gg.TensorName
	// Hparams, when set, adjusts config.json's values before the base keys
	// are derived from them, as the family's set_gguf_parameters does
	// before calling its base class's (deepseek2's one key-value head).
	Hparams func(m *Model, h Hparams)
	// Metadata sets the family's own architecture keys after the base ones
	// (Model.GGUFMetadata), in the reference converter's order.
	Metadata func(m *Model, h Hparams, g *GGUFKeys) error
	// HeadBlockFromSubLayer: the reference converter renames the head's
	// tensors into block n_layer only after it read their block number from
	// the source name (mtp.layers.{k}: the sub-layer's), so the kinds it
	// keeps float32 by block (the MoE router) are written in the output
	// float type in the head (NemotronHModel.modify_tensors).
	HeadBlockFromSubLayer bool
	// PermuteQK: the reference converter reorders the rows of each head of
	// the head's attn_q and attn_k as LlamaModel.permute does for its rotary
	// layout (undo_permute; attn_k over the key-value heads), whether or not
	// the attention rotates (Nemotron-H's does not: q·k is unchanged).
	PermuteQK bool
	// ChainedHeads: llama.cpp's draft graph for the architecture runs
	// several MTP layers, chained (each drafts from the hidden state the one
	// before it computed, with its own shared head): Step-3.5/3.7, MiMo-V2,
	// Hy3. Without it the target takes one MTP layer, as the runtime asserts.
	ChainedHeads bool
	// HFVocab, when set, is tokenizer.ggml.model of a vocabulary the
	// reference converter reads with gguf-py's LlamaHfVocab (a BPE
	// tokenizer with byte fallback: Gemma 4's "gemma4"); empty, the GPT-2
	// BPE vocabulary. UserDefinedTokens are the tokens the family's
	// set_vocab marks USER_DEFINED in it (rendered, not control).
	HFVocab           string
	UserDefinedTokens []string
	// Drop lists the names (HeadRelative prefixes) of the head's tensors
	// the reference converter drops (the Gemma-4 assistant's centroid LM
	// head, masked_embedding.*).
	Drop []string
	// Drafter: the file is a separate drafter model (the Gemma-4
	// assistant, DSpark's dflash draft), all of it the head: its blocks are
	// the head's layers (blocks 0.., Model.GGUFHeadBlock), nothing of a
	// trunk is copied (neither Top nor the LM head is read), no graft.
	Drafter bool
	// DrafterCard is what a Drafter's model card says of the file: what
	// it is (after the family's title), its MLP, what it pairs with; and
	// SpecType, llama.cpp's --spec-type that drafts with it ("" for
	// draft-mtp).
	DrafterCard GGUFDrafterCard
	SpecType    string
	// TokenizerKeys, when set, are the keys the family's set_vocab adds
	// after the vocabulary (DSpark's tokenizer.ggml.mask_token_id).
	TokenizerKeys func(m *Model) []gg.KV
	// SpecialTokens are the special-token ids the reference converter sets
	// for the family over tokenizer_config.json's, by token text, in its order.
	SpecialTokens []SpecialToken
	// Computed lists the tensors the reference converter derives from the
	// config instead of reading them (its generate_extra_tensors: llama3
	// RoPE scaling's rope_freqs), which it writes first, in the sidecar, the
	// trunk and the bundled file alike; each is named by its recipe
	// (package computed), and a graft keeps the trunk's.
	Computed func(m *Model) []ComputedTensor
	// Joins are the head's tensors made of several by columns.
	Joins []GGUFJoin
	// StoredTypes: the reference converter writes every tensor in the type
	// the checkpoint stores it (float32 stays F32, a bf16 matrix BF16, a
	// bf16 vector F32), whatever the output type, and FP4 routed experts
	// as MXFP4 from their own bytes (DeepSeek-V4's tensor_force_quant and
	// repack_mxfp4_blocks): one sidecar for bf16 and f16, file type
	// MXFP4_MOE when it holds MXFP4; llama-quantize's types are refused
	// (they would requantize the experts).
	StoredTypes bool
	// ChatTemplateFirst: the converter sets a default chat template before
	// any other key, so the tokenizer's, which replaces it, stays the
	// file's second key.
	ChatTemplateFirst bool
}

// GGUFDrafterCard is what a drafter file's model card says of it: what it
// is (after the family's title), its MLP and what it pairs with.
type GGUFDrafterCard struct{ What, MLP, Pairing string }

// GGUFJoin is one GGUF tensor the reference converter makes of several
// tensors of an MTP layer concatenated by columns, in Parts' order (names
// under the layer, each mapped to the joined tensor's kind in
// GGUFSpec.Layer; two parts are the embedding's projection, then the
// hidden state's, whose errors are measured apart), stored as Type when
// set ("Q8_0": its tensor_force_quant) rather than by its kind.
type GGUFJoin struct {
	Parts []string
	Type  string
}

// ComputedTensor is a tensor outside the blocks computed from the config:
// its GGUF kind and its source, a computed recipe name (computed.Prefix).
type ComputedTensor struct {
	Name   gg.TensorName
	Source string
}

// SpecialToken is a special token a family's vocabulary sets: its type
// (bos, eos, unk, eot, eom, ...) and the text of the added token.
type SpecialToken struct{ Type, Content string }

// OpenVINOSpec says whether an OpenVINO pipeline runs the family's head.
type OpenVINOSpec struct {
	// Refusal, when set, is the one sentence naming the consumer that is
	// missing: the target writes nothing nobody can run.
	Refusal string
}

// MLXSpec is how the MLX consumers (mlx-lm, mlx-vlm) name and configure this family.
type MLXSpec struct {
	// Refusal, when set, is the one sentence saying why the mlx target
	// writes no drafter for the family and which tool does (or that none
	// runs it): the target writes nothing.
	Refusal string
	// Refuse, when set, says why the mlx target writes no drafter for this
	// config although it does for the family ("" when it does): a release
	// of the family no mlx-vlm drafts.
	Refuse func(c *Config) string
	// DrafterModelType is mlx-vlm's model_type for the head alone.
	DrafterModelType string
	// DrafterUnrunnable, when set, says why no released mlx-vlm runs the
	// drafter yet (its splitter writes the folder, load_drafter cannot build
	// it): the card says it in place of a snippet, the export prints it, the
	// README's row quotes it.
	DrafterUnrunnable string
	// DrafterTextConfig fills keys the drafter's TextConfig needs that the
	// family's config.json may lack (given the text config object, its
	// members in the source's order).
	DrafterTextConfig func(m *Model, text *jsonobj.Object)
	// DrafterConfig gives the keys the family's splitter adds to the
	// drafter's config.json beside text_config (Inkling's num_mtp_layers).
	DrafterConfig func(m *Model) map[string]any
	// DrafterTrunk maps trunk tensors the family's splitter copies into the
	// drafter, by their name under the text prefix, to their drafter names
	// (Inkling's final norm).
	DrafterTrunk map[string]string
	// TrunkName maps a trunk tensor name to mlx-lm's post-sanitize name.
	TrunkName func(m *Model, name string) string
	// CombinedRefusal, when set, is why stock mlx-lm cannot load a combined file.
	CombinedRefusal string
	// DrafterWhole: the drafter is the source checkpoint itself, as
	// mlx_vlm.convert writes it (a drafter that is a checkpoint of its own,
	// all head): every tensor under its stored name, config.json the
	// source's whole configuration, model.safetensors.index.json beside.
	DrafterWhole bool
	// DrafterIndexDType is the integer dtype mlx-vlm's sanitize casts the
	// family's kept integer buffers (RoleKeepDType) to ("" keeps them as
	// stored).
	DrafterIndexDType st.DType
	// DrafterName maps a head tensor's HeadRelative name (or a layer prefix
	// "layers.{j}.", or a layer's stacked experts "layers.{j}." +
	// MoE.Stacked[k]) to its drafter name, "" for a tensor the splitter's
	// sanitize drops; nil keeps it.
	DrafterName func(rel string) string
	// DrafterKind is the kind load_drafter gives the folder, the
	// draft_kind mlx-vlm's generate drafts it with ("mtp" when empty;
	// "dflash" for a block drafter).
	DrafterKind string
	// DrafterStageFiles: the splitter writes each MTP layer's tensors to a
	// shard of its own, model-0000{j+1}-of-0000{n}.safetensors (its
	// metadata naming the drafter's model_type), with an index written
	// by json.dumps(indent=2, sort_keys=True) and config.json with a final
	// newline (mlx-vlm's DSpark splitter's split).
	DrafterStageFiles bool
	// DrafterBlockExtra: the drafter's block_size is the MTP depth plus it
	// (mlx-vlm's splitter for the family); 0 means 2.
	DrafterBlockExtra int
	// DrafterKVB names, under the drafter's layer, the two halves a
	// multi-head latent attention kv_b_proj is split into: the key half
	// transposed per head [heads, kv_lora, nope], the value half [heads, v, kv_lora].
	DrafterKVB [2]string
	// DrafterRoutersFloat: a quantized drafter keeps the MoE routers float,
	// as the family's mlx-vlm splitter does (--router-bits does not apply).
	DrafterRoutersFloat bool
	// DrafterNormsStored: the drafter applies the head's zero-centred norms
	// as 1+w itself (Qwen3.8-Flash-Next's qwen4_exp_mtp), so they are
	// written as the checkpoint stores them, not shifted.
	DrafterNormsStored bool
	// DrafterConcat lists the drafter tensors mlx-vlm's sanitize
	// concatenates along their rows from several tensors of one MTP layer
	// (GLM-5.3-Flash's qkv_a_proj of q_a_proj and kv_a_proj_with_mqa).
	DrafterConcat []DrafterConcat
	// DrafterKeepsStorage: mlx-vlm's splitter keeps the release's own
	// quantized storage and ignores any quantization asked
	// (quantization_from_source): FP4 routed experts stay mxfp4 (moved,
	// plan.TMoveMXFP4), block-FP8 weights with ue8m0 scales mxfp8 (the
	// codes moved, each block's scale repeated per 32: plan.TMoveMXFP8;
	// whole blocks only), every other tensor as stored (bf16 and float32
	// uncast); config.json's quantization block is the splitter's default
	// (affine, 8 bits, group 64) and one entry per mxfp4 or mxfp8 module.
	// The target writes that one form and refuses other precisions.
	DrafterKeepsStorage bool
	// DrafterSourceQuantConfig: the splitter copies a flat config whole
	// into text_config, its quantization_config too (read_text_config's
	// dict(source_config)); otherwise the drafter's text_config drops it.
	DrafterSourceQuantConfig bool
	// DrafterStorageQuant, with DrafterKeepsStorage, is config.json's
	// quantization block as the splitter records a release stored in one
	// MX format throughout: that block alone, no per-module entries (Hy4's
	// mxfp8, group 32); nil: the default and per-module entries above.
	DrafterStorageQuant *StorageQuant
	// DrafterExpertOrder is the order the drafter's sanitize stacks the
	// routed experts' projections in (indexes of gate, up, down), which is
	// the order its quantization block lists them; nil: gate, up, down.
	DrafterExpertOrder []int
	// DrafterShape, when set, gives the stored shape of a drafter tensor
	// (by its drafter name) that the drafter's sanitize reshapes.
	DrafterShape func(c *Config, name string, shape []int64) []int64
	// DrafterDeinterleave lists the head tensors of each MTP layer whose
	// rows mlx-vlm's sanitize deals out in turn (row r to Outs[r mod n]):
	// Inkling's fused gate/up projection, interleaved row by row.
	DrafterDeinterleave []DrafterSplit
}

// StorageQuant is a quantization block of an MLX config.json.
type StorageQuant struct {
	GroupSize, Bits int
	Mode            string
}

// DrafterSplit is a head tensor of an MTP layer dealt row by row into
// several drafter tensors: its suffix and theirs under the layer.
type DrafterSplit struct {
	Src  string
	Outs []string
}

// DrafterConcat is one drafter tensor made of head tensors stacked along
// their rows, in order: its suffix and theirs under an MTP layer.
type DrafterConcat struct {
	Out   string
	Parts []string
}

// Forward is a family's MTP forward, abstractly: the targets lower it, or
// refuse a kind they have no lowering for, naming it.
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
	// AttnGQA is grouped-query attention with optional q/k/v biases and
	// q/k norms and partial rotary (GLM-4.5/4.6/4.7).
	AttnGQA = "gqa"
	// AttnMLA is multi-head latent attention: low-rank query and key-value
	// projections, a rotary part and a no-position part per head
	// (DeepSeek-V2/V3, GLM-4.7-Flash).
	AttnMLA = "mla"
)

// MLP kinds.
const (
	MLPSparseMoE = "sparse_moe" // routed top-k experts plus shared experts
	MLPDense     = "dense"      // gate, up, down (SwiGLU)
)

// Routing kinds of a sparse MoE.
const (
	// RouteSoftmaxTopK: softmax over the router's logits, top-k, optionally
	// renormalised (NormTopK); a sigmoid-gated shared expert (Qwen).
	RouteSoftmaxTopK = "softmax_topk"
	// RouteSigmoidGroupTopK: sigmoid scores plus e_score_correction_bias
	// choose top-k among the best TopKGroups of Groups expert groups; the
	// chosen scores (renormalised when NormTopK) times ScalingFactor weigh
	// the experts; ungated shared experts (DeepSeek-V3, GLM-4.x).
	RouteSigmoidGroupTopK = "sigmoid_group_topk"
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
	Q, K, V, O, QNorm, KNorm string // QNorm, KNorm "" when the kind has none
	QBias, KBias, VBias      string // "" when absent
	Heads, KVHeads, HeadDim  int
	RotaryDim                int
	RopeTheta                float64
	OutputGate               bool
	// Multi-head latent attention: Q is q_b_proj over QA (q_a_proj) and
	// QANorm when QLoraRank > 0; KVA (kv_a_proj_with_mqa), KVANorm and KVB
	// (kv_b_proj) give keys and values.
	QA, QANorm, KVA, KVANorm, KVB          string
	QLoraRank, KVLoraRank                  int
	QKNopeHeadDim, QKRopeHeadDim, VHeadDim int
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
	SharedExpertGate string // "" for ungated shared experts
	// Routing is RouteSoftmaxTopK (also when empty) or RouteSigmoidGroupTopK
	// with its score-correction bias, groups and scaling.
	Routing             string
	ScoreCorrectionBias string
	Groups, TopKGroups  int
	ScalingFactor       float64
}

// MatchesIdentity recognises a family by config.json: a model_type (top
// level or text_config's) among modelTypes, or an architecture starting
// with arch.
func MatchesIdentity(id Identity, modelTypes []string, arch string) bool {
	for _, t := range modelTypes {
		if id.ModelType == t || id.TextModelType == t {
			return true
		}
	}
	for _, a := range id.Architectures {
		if strings.HasPrefix(a, arch) {
			return true
		}
	}
	return false
}

// Unsupported is a family with an MTP head that mtpconv knows and does not
// convert yet: a config of one is refused naming the family as its users
// know it and what it lacks, not as an unknown model_type.
type Unsupported struct {
	// Architectures are its Hugging Face architectures (prefixes, as
	// MatchesIdentity takes them).
	Architectures []string
	// Name is the family as its users know it; Why, what it lacks.
	Name, Why string
}

// unsupported are the registered Unsupported families.
var unsupported []Unsupported

// RegisterUnsupported adds a family refused by name (from init).
func RegisterUnsupported(u Unsupported) { unsupported = append(unsupported, u) }

// UnsupportedFamilies lists the families refused by name, in the order
// they were registered (the docs render it).
func UnsupportedFamilies() []Unsupported { return slices.Clone(unsupported) }

// unsupportedFamily is the refusal of a known family mtpconv does not convert.
func unsupportedFamily(id Identity) error {
	for _, f := range unsupported {
		for _, a := range id.Architectures {
			for _, want := range f.Architectures {
				if strings.HasPrefix(a, want) {
					return fmt.Errorf("%s (architectures %v) is not supported yet: %s; mtpconv converts %s", f.Name, id.Architectures, f.Why, strings.Join(Families(), ", "))
				}
			}
		}
	}
	return nil
}

// DetectFamily finds the family of a config.json identity.
func DetectFamily(id Identity) (*Family, error) {
	for _, f := range families {
		if f.Matches(id) {
			return f, nil
		}
	}
	if err := unsupportedFamily(id); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("model_type %q (architectures %v) is not a supported family (%s)",
		id.ModelType, id.Architectures, strings.Join(Families(), ", "))
}

// LookupFamily finds a supported family by name.
func LookupFamily(name string) (*Family, bool) {
	for _, f := range families {
		if f.Name == name {
			return f, true
		}
	}
	return nil, false
}

// Family is the family that parsed the config (detected again from its
// identity for a Config built in code).
func (c *Config) Family() (*Family, error) {
	if c.family != nil {
		return c.family, nil
	}
	id := Identity{ModelType: c.ModelType, TextModelType: c.TextModelType, Architectures: c.Architectures}
	if r, err := ReadIdentity(c.Raw); len(c.Raw) > 0 && err == nil {
		id.Keys = r.Keys
	}
	return DetectFamily(id)
}

// SpecFor is the Spec of the family a config belongs to.
func SpecFor(cfg *Config) (*Spec, error) {
	f, err := cfg.Family()
	if err != nil {
		return nil, err
	}
	return f.Spec(cfg), nil
}

// Families lists the supported family names.
func Families() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.Name)
	}
	return out
}

// Registered lists the supported families' descriptors, sorted by name.
func Registered() []*Family { return slices.Clone(families) }

// FamiliesWhere lists the families whose descriptor satisfies ok (its
// static facts: identity and per-target tables).
func FamiliesWhere(ok func(*Family) bool) []string {
	var out []string
	for _, f := range families {
		if ok(f) {
			out = append(out, f.Name)
		}
	}
	return out
}

// HeadZeroCentred says whether the family applies its head's RMSNorms as 1+w.
func (s *Spec) HeadZeroCentred() bool {
	for _, w := range append(append([]Want{}, s.HeadTop...), s.HeadLayerWants(0)...) {
		if w.Role&RoleZeroCentredNorm != 0 {
			return true
		}
	}
	return false
}
