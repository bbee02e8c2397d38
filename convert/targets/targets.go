// Package targets is the registry of output kinds (one package each below
// it: gguf, mlx, openvino): the Target interface, the user's export
// Options, and how an option a target does not take is refused.
package targets

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/plan"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/manifests"
)

// Target is one output kind, one package each under convert/targets, behind
// the registry: it says which export options it takes and their defaults,
// plans an export as data, and finishes what Run wrote (files that need the
// finished weights, such as an OpenVINO graph).
type Target interface {
	// Name is the --target value.
	Name() string
	// Usage is one line for --help.
	Usage() string
	// Accepts lists the options (their flag names) the target takes; any
	// other option set by the user is an error.
	Accepts() []string
	// Plan decides the whole export. o holds every option, defaults not yet applied.
	Plan(m *model.Model, o Options) (*plan.Plan, error)
	// Card is what the model card and summaries say about an output of this target.
	Card(man *manifests.Manifest) manifests.TargetCard
}

// Finisher is a Target whose files are completed after Run: Finish writes
// into dir (or, with dir empty, only sizes) and returns the final records
// of the files it wrote or changed.
type Finisher interface {
	Finish(dir string, m *model.Model, p *plan.Plan, prov Provenance, res *run.Result) ([]manifests.File, error)
}

// Intoer is a Target that can add its output to an existing folder of the
// same model (export --into): CheckInto refuses a folder that is not one
// (saying what differs) and names the files of the output that go into it,
// in the order they go in: a file after the files it refers to (an OpenVINO
// .bin before its .xml). These tensor files are the only ones planned; the
// export records them in the manifest as the only files of the folder that
// are ours. A file of one of these names that mtpconv did not write
// (optimum-intel exports an MTP IR of its own) is never replaced, moved or
// deleted, even with --force: the user moves it.
type Intoer interface {
	CheckInto(dir string, m *model.Model) ([]string, error)
}

// InPlaceIntoer is an Intoer whose files each describe only themselves (an
// HF repo's safetensors file and index), so that a new one renamed over an
// old one leaves no mixed output at any step: an earlier --into's files are
// replaced by that rename, never removed first (an index listing a removed
// head would serve the trunk without it while the config declares it).
type InPlaceIntoer interface {
	Intoer
	ReplacesInPlace()
}

// IntoPlanner is an Intoer whose output depends on the folder it goes into
// (MLX: the head in a file of its own, the folder's config.json and index
// updated to declare it). PlanInto plans the export for dir, reading the
// folder's files it updates with manifests.IntoBase; the export replaces
// them (listed in Plan.IntoUpdates) each atomically, after keeping a copy of
// the bytes the folder had under manifests.IntoOriginals, and records all
// of it in the manifest's Into record.
type IntoPlanner interface {
	Intoer
	PlanInto(dir string, m *model.Model, o Options) (*plan.Plan, error)
}

// Options are the user's export choices. Set records which were given, so a
// target can refuse an option it does not take and apply its own defaults.
type Options struct {
	HeadPrecision   string
	TrunkPrecision  string
	LMHeadPrecision string
	GroupSize       int
	Sym             bool
	MLXRounding     string
	RouterBits      int
	MaxShardSize    int64
	TrunkRecipe     string // mixed_2_6, mixed_3_4, mixed_3_6 or mixed_4_6
	// mlx-lm's spellings (mlx_lm.convert --q-bits, --q-group-size, --q-mode,
	// --quant-predicate), for the trunk of the MLX targets.
	QBits          int
	QGroupSize     int
	QMode          string
	QuantPredicate string
	GGUFType       string
	// Graft is a trunk GGUF the gguf target writes the head into (one
	// bundled file); Force lets it replace a head the trunk already holds.
	Graft string
	Force bool
	// Runtime is the one runtime an HF repo is mended for (vllm or
	// sglang), "" for both.
	Runtime string
	Set     map[string]bool
}

// Option names, as the CLI flags spell them.
const (
	OptHeadPrecision   = "head-precision"
	OptTrunkPrecision  = "trunk-precision"
	OptLMHeadPrecision = "lm-head-precision"
	OptGroupSize       = "group-size"
	OptSym             = "sym"
	OptMLXRounding     = "mlx-rounding"
	OptRouterBits      = "router-bits"
	OptMaxShardSize    = "max-shard-size"
	OptTrunkRecipe     = "trunk-recipe"
	OptQBits           = "q-bits"
	OptQGroupSize      = "q-group-size"
	OptQMode           = "q-mode"
	OptQuantPredicate  = "quant-predicate"
	OptGGUFType        = "gguf-type"
	OptRuntime         = "runtime"
	OptGraft           = "graft"
)

// Provenance is what an export records about itself inside its files.
type Provenance struct {
	Version string // the tool's version
	Source  string // the source model's name (Origin.Name): a Hub id or a folder's base name, never a path
}

var targets = map[string]Target{}

// RegisterTarget adds a target; each target package calls it from init.
func RegisterTarget(t Target) {
	if _, dup := targets[t.Name()]; dup {
		panic("convert: target " + t.Name() + " registered twice")
	}
	targets[t.Name()] = t
}

// TargetNames lists the registered targets, sorted.
func TargetNames() []string {
	out := make([]string, 0, len(targets))
	for n := range targets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupTarget finds a registered target.
func LookupTarget(name string) (Target, error) {
	t, ok := targets[name]
	if !ok {
		if _, lower := targets[strings.ToLower(name)]; lower {
			return nil, fmt.Errorf("--target %q: target names are lower case: --target %s", name, strings.ToLower(name))
		}
		return nil, fmt.Errorf("--target %q: must be %s", name, strings.Join(TargetNames(), ", "))
	}
	return t, nil
}

// IntoElsewhere is a target that takes no --into but knows what does the
// same for its consumer: Instead names it, for the error.
type IntoElsewhere interface {
	Instead() string
}

// CheckOptions refuses options the target does not take.
func CheckOptions(t Target, o Options) error {
	ok := map[string]bool{}
	for _, a := range t.Accepts() {
		ok[a] = true
	}
	var bad []string
	for k, set := range o.Set {
		if set && !ok[k] {
			bad = append(bad, "--"+k)
		}
	}
	sort.Strings(bad)
	if len(bad) == 0 {
		return nil
	}
	why := ""
	if fr, ok := t.(FlagReasons); ok {
		for _, b := range bad {
			if r := fr.WhyNot(strings.TrimPrefix(b, "--")); r != "" {
				why += "; " + b + ": " + r
			}
		}
	}
	return fmt.Errorf("--target %s does not take %s (it takes %s)%s", t.Name(), strings.Join(bad, ", "), flagList(t.Accepts()), why)
}

// FlagReasons is a target that says why it does not take an option its
// reference tool has (the tool's spelling of a choice the target names
// otherwise, or a choice no consumer of its output offers): CheckOptions
// adds the reason to the refusal.
type FlagReasons interface {
	// WhyNot is the reason for the option named (without "--"), "" for none.
	WhyNot(option string) string
}

func flagList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return strings.Join(out, ", ")
}

// UsageError is a bad option value: the CLI exits 2 for it, as for a bad flag.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// CardOf is what an output's target says about it on cards and summaries
// (nothing for a target this build does not know).
func CardOf(man *manifests.Manifest) manifests.TargetCard {
	if t, ok := targets[man.Target]; ok {
		return t.Card(man)
	}
	return manifests.TargetCard{}
}

// tokenizerFiles are the tokenizer's files a folder of the head alone
// carries, so that its consumer can load it by itself.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json", "chat_template.jinja", "generation_config.json"}

// TokenizerCopies are the source's tokenizer files, copied as they are.
func TokenizerCopies(m *model.Model) []plan.OutFile {
	var out []plan.OutFile
	for _, f := range tokenizerFiles {
		if src, err := m.Checkpoint.Source.Open(f); err == nil {
			src.Close()
			out = append(out, plan.OutFile{Name: f, CopyFrom: f})
		}
	}
	return out
}

// HasTokenizer reports whether an output's files (by name) hold a
// tokenizer its consumer can load by itself (tokenizer.json, or a BPE's
// vocab.json and merges.txt): a card offers to generate with the folder
// only then.
func HasTokenizer(names []string) bool {
	return slices.Contains(names, "tokenizer.json") || slices.Contains(names, "vocab.json") && slices.Contains(names, "merges.txt")
}

// NoTokenizer is what an export and its card say of a whole model written
// without a tokenizer.
const NoTokenizer = "the source has no tokenizer (tokenizer.json, or vocab.json and merges.txt), so neither has this folder: copy the base model's tokenizer files into it before generating with it"

// ShellQuote quotes a path for a shell when it needs it, for the commands
// that messages print.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
