package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mtpconv/mtpconv/manifests/words"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// CardFile is the model card's file name.
const CardFile = "README.md"

// TargetCard is what a target says about its outputs on a card: the Hub
// library, one sentence on what the folder holds, how it pairs with the
// trunk, how the experts are stored, how to run it (markdown), and warnings.
// In Pairing and HowToRun, {base} is the base model's Hub id (or the
// source's name) and {repo} the Hub id the output is published as.
type TargetCard struct {
	Library string // the Hub's library_name (gguf, mlx, openvino)
	// Consumer names the runtime in the title ("MLX", "llama.cpp").
	Consumer string
	// Whole is an output that is the whole model (trunk and head), which
	// generates text on its own; otherwise it is a head drafting next to its
	// trunk: no pipeline_tag, and an adapter of the base model on the Hub.
	Whole bool
	// TitlePrecision is the precision the title names ("int4", "GGUF Q8_0").
	TitlePrecision string
	// Tags are the Hub tags of the target's format, beside the library.
	Tags     []string
	What     string
	Pairing  string
	Experts  string
	HowToRun []string
	Warnings []string
	// Precision lines follow the precision table (e.g. bits per weight,
	// the quantization mode and recipe, in the format's own words).
	Precision []string
	// Copies names, in a head-only output, the trunk tensors it carries a
	// copy of (the manifest's component "trunk"), so its table does not
	// call them the trunk.
	Copies string
	// MLP, when set, is the model section's line on a dense MLP in place
	// of the SwiGLU one (a separate drafter's blocks).
	MLP string
}

// Card renders README.md, a Hugging Face model card, from a manifest, what
// its target says about it and, when there is one, a verify report.
func Card(m *Manifest, tc TargetCard, report *Report) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) } // a JSON string is a YAML scalar
	library := tc.Library
	if library == "" {
		library = m.Target
	}
	name := cardName(m)
	from := "`" + name + "`"
	if m.Source.Revision != "" && m.Source.Repo == name {
		from += " (revision `" + m.Source.Revision + "`)"
	}
	p("---")
	if m.Model.BaseModel != "" {
		p("base_model: %s", q(m.Model.BaseModel))
		switch {
		case !tc.Whole:
			p("base_model_relation: adapter") // a head that drafts next to the base model
		case quantized(m):
			p("base_model_relation: quantized")
		}
	}
	p("library_name: %s", library)
	if tc.Whole { // a head alone cannot generate text
		p("pipeline_tag: text-generation")
	}
	p("license: %s", q(m.Model.License))
	licenseName, licenseLink := m.Model.LicenseName, m.Model.LicenseLink
	if m.Model.License == "other" {
		licenseName = cmpOr(licenseName, "unknown")
		if licenseLink == "" && m.Model.BaseModel != "" {
			licenseLink = "https://huggingface.co/" + m.Model.BaseModel // its card states the license
		}
		p("license_name: %s", q(licenseName))
	}
	if licenseLink != "" {
		p("license_link: %s", q(licenseLink))
	}
	p("tags:")
	tags := []string{"mtp", "speculative-decoding", library}
	tags = append(tags, tc.Tags...)
	tags = append(tags, m.Model.Family, "mtpconv")
	seen := map[string]bool{}
	for _, t := range tags {
		if t != "" && !seen[t] {
			seen[t] = true
			p("- %s", q(t))
		}
	}
	p("---")
	p("")
	p("# %s", Title(m, tc))
	p("")
	p("This folder holds %s, exported from %s by %s %s.", tc.What, from, m.Tool.Name, m.Tool.Version)
	words := strings.NewReplacer("{base}", name, "{repo}", RepoID(m))
	if tc.Pairing != "" {
		p("%s", words.Replace(tc.Pairing))
	}
	for _, w := range tc.Warnings {
		p("")
		p("Warning: %s", w)
	}
	p("")
	p("## Precision")
	p("")
	p("| component | precision | tensors |")
	p("|---|---|---|")
	for _, row := range precisionRows(m) {
		if row.component == "trunk" && !tc.Whole && tc.Copies != "" {
			row.component = tc.Copies
		}
		p("| %s | %s | %d |", row.component, row.precision, row.count)
	}
	if len(tc.Precision) > 0 {
		p("")
		for _, l := range tc.Precision {
			p("%s", l)
		}
	}
	p("")
	p("Options: %s", options(m.Options))
	p("")
	p("## Model")
	p("")
	p("- family `%s`, hidden size %d, MTP depth %d", m.Model.Family, m.Model.HiddenSize, m.Model.MTPDepth)
	if m.Model.NumExperts > 0 {
		p("- experts: all %d routed experts (top-%d) are present in every MoE block, %s", m.Model.NumExperts, m.Model.ExpertsPerTok, tc.Experts)
	} else if tc.MLP != "" {
		p("- MLP: %s", tc.MLP)
	} else {
		p("- MLP: dense (SwiGLU) in every layer and in the MTP layer")
	}
	p("- norm convention: %s", m.Model.NormConvention)
	for _, w := range nonFiniteWarnings(m) {
		p("- warning: %s", w)
	}
	p("")
	p("## How to run")
	p("")
	for _, l := range tc.HowToRun {
		p("%s", words.Replace(l))
	}
	p("")
	b.WriteString(verificationHeading)
	p("%s", verificationText(report))
	p("")
	p("## Files")
	p("")
	p("| file | bytes | sha256 |")
	p("|---|---|---|")
	for _, f := range m.Files {
		p("| %s | %d | `%s` |", f.Name, f.Size, f.SHA256)
	}
	p("| %s | | written with this card |", FileName)
	return b.Bytes()
}

// verificationHeading starts the card's verification section, which
// verify --save refreshes (RefreshVerification).
const verificationHeading = "## Verification\n\n"

// verificationText is the body of the verification section: what a saved
// verify report found, or how to check the folder.
func verificationText(report *Report) string {
	if report == nil {
		return "Not yet run on this folder. Check it with `mtpconv verify . --src SOURCE` (exit 0 when every file, tensor and norm holds)."
	}
	status := "passed"
	if !report.OK {
		status = "FAILED with " + words.Count(len(report.Problems), "problem")
	}
	return fmt.Sprintf("`mtpconv verify` %s: %s and %s (%s) re-hashed, %s recomputed from the source.", status, words.Count(report.Files, "file"),
		words.Count(report.Tensors, "tensor"), words.Count(report.Entries, "stored entry", "stored entries"), words.Count(report.Recomputed, "tensor"))
}

// RefreshVerification replaces the body of a card's verification section
// (up to the next heading) with what report says, keeping every other byte,
// edits included. ok is false when the card has no such section (a README
// mtpconv did not write, or one whose section was removed).
func RefreshVerification(card []byte, report *Report) (out []byte, ok bool) {
	i := bytes.Index(card, []byte("\n"+verificationHeading))
	if i < 0 {
		return card, false
	}
	start := i + 1 + len(verificationHeading)
	end := len(card)
	if j := bytes.Index(card[start:], []byte("\n## ")); j >= 0 {
		end = start + j + 1
	}
	out = append(append(append([]byte{}, card[:start]...), verificationText(report)+"\n\n"...), card[end:]...)
	if end == len(card) { // the last section: no blank line after it
		out = append(append([]byte{}, card[:start]...), verificationText(report)+"\n"...)
	}
	return out, true
}

// Title is the card's title: the model without its org, what the output is,
// its runtime and precision ("Qwen3.6-35B-A3B MTP head for MLX (int4)";
// "Qwen3.6-35B-A3B with its MTP head for llama.cpp (GGUF Q4_K_M)" for an
// output that is the whole model).
func Title(m *Manifest, tc TargetCard) string {
	short := path.Base(cardName(m))
	consumer := cmpOr(tc.Consumer, m.Target)
	t := short + " MTP head for " + consumer
	if tc.Whole {
		t = short + " with its MTP head for " + consumer
	}
	if tc.TitlePrecision != "" {
		t += " (" + tc.TitlePrecision + ")"
	}
	return t
}

// RepoID is the Hub id the output is published as, for the card's
// snippets: the one the export was given, else its folder's name (what
// `hf upload` names a repo after by default).
func RepoID(m *Manifest) string {
	return cmpOr(m.Model.RepoID, "YOUR-ORG/"+path.Base(cardName(m))+"-MTP")
}

// cardName is the model the card is about: the base model, else the source's name.
func cardName(m *Manifest) string {
	name := m.Model.BaseModel
	if name == "" {
		name = m.Model.Name
	}
	if name == "" { // a manifest from before model names: never show a path
		name = path.Base(filepath.ToSlash(m.Source.Name))
	}
	return name
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type precisionRow struct {
	component, precision string
	count                int
}

func precisionRows(m *Manifest) []precisionRow {
	counts := map[[2]string]int{}
	for _, t := range m.Tensors {
		comp := t.Component
		if comp == "" {
			comp = "head"
		}
		counts[[2]string{comp, precisionWords(&t)}]++
	}
	var rows []precisionRow
	for k, n := range counts {
		rows = append(rows, precisionRow{k[0], k[1], n})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].component != rows[j].component {
			return componentOrder[rows[i].component] < componentOrder[rows[j].component]
		}
		return rows[i].precision < rows[j].precision
	})
	return rows
}

func options(o map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(o)) {
		parts = append(parts, fmt.Sprintf("`%s=%s`", k, o[k]))
	}
	return strings.Join(parts, ", ")
}

var componentOrder = map[string]int{"trunk": 0, "head": 1, "lm_head": 2}

// precisionWords says how a tensor is stored, in the words of its format.
func precisionWords(t *Tensor) string {
	q, moved, ok := t.StoredQuant()
	if !ok {
		return t.DType
	}
	c, err := codec.For(q.Mode)
	if err != nil {
		return string(q.Mode)
	}
	if moved {
		if len(t.Segments) > 0 && len(t.Segments[0].Block) == 2 && (t.Segments[0].Block[0] != 1 || int(t.Segments[0].Block[1]) != q.Group) {
			// Block FP8: its codes moved, each block's scale repeated (rows.Segment.MXScales).
			b := t.Segments[0].Block
			return c.Words(q.Params(), t.DType) + fmt.Sprintf(", the release's own codes, each %d × %d block's scale repeated per group", b[0], b[1])
		}
		return c.Words(q.Params(), t.DType) + ", the release's own codes and scales"
	}
	return c.Words(q.Params(), t.DType)
}

// quantized reports whether any tensor of the output is quantized.
func quantized(m *Manifest) bool {
	for i := range m.Tensors {
		if _, _, ok := m.Tensors[i].StoredQuant(); ok {
			return true
		}
	}
	return false
}
