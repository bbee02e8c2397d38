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

	"github.com/mtpconv/mtpconv/internal/words"
	"github.com/mtpconv/mtpconv/quant/codec"
)

// CardFile is the model card's file name.
const CardFile = "README.md"

// TargetCard is what a target says about its outputs on a card: the Hub
// library, one sentence on what the folder holds, how it pairs with the
// trunk, how the experts are stored, how to run it (markdown), and warnings.
type TargetCard struct {
	Library  string
	What     string
	Pairing  string
	Experts  string
	HowToRun []string
	Warnings []string
	// Precision lines follow the precision table (e.g. bits per weight,
	// the quantization mode and recipe, in the format's own words).
	Precision []string
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
	name := m.Model.BaseModel
	if name == "" {
		name = m.Model.Name
	}
	if name == "" { // a manifest from before model names: never show a path
		name = path.Base(filepath.ToSlash(m.Source.Name))
	}
	from := "`" + name + "`"
	if m.Source.Revision != "" && m.Source.Repo == name {
		from += " (revision `" + m.Source.Revision + "`)"
	}
	p("---")
	if m.Model.BaseModel != "" {
		p("base_model: %s", q(m.Model.BaseModel))
		if quantized(m) {
			p("base_model_relation: quantized")
		}
	}
	p("library_name: %s", library)
	p("pipeline_tag: text-generation")
	p("license: %s", q(m.Model.License))
	p("tags:")
	for _, t := range []string{"mtp", "speculative-decoding", library, m.Model.Family, "mtpconv"} {
		p("- %s", q(t))
	}
	p("---")
	p("")
	p("# %s: MTP head (%s)", name, m.Target)
	p("")
	p("This folder holds %s, exported from %s by %s %s.", tc.What, from, m.Tool.Name, m.Tool.Version)
	if tc.Pairing != "" {
		p("%s", strings.ReplaceAll(tc.Pairing, "{base}", name))
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
		p("%s", l)
	}
	p("")
	p("## Verification")
	p("")
	if report != nil {
		status := "passed"
		if !report.OK {
			status = "FAILED with " + words.Count(len(report.Problems), "problem")
		}
		p("`mtpconv verify` %s: %s and %s (%s) re-hashed, %s recomputed from the source.", status, words.Count(report.Files, "file"), words.Count(report.Tensors, "tensor"),
			words.Count(report.Entries, "stored entry", "stored entries"), words.Count(report.Recomputed, "tensor"))
	} else {
		p("Not yet run on this folder. Check it with `mtpconv verify . --src SOURCE` (exit 0 when every file, tensor and norm holds).")
	}
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
	q, ok := t.Has(TQuantize)
	if !ok {
		return t.DType
	}
	c, err := codec.For(q.Mode)
	if err != nil {
		return string(q.Mode)
	}
	return c.Words(q.Params(), t.DType)
}

// quantized reports whether any tensor of the output is quantized.
func quantized(m *Manifest) bool {
	for i := range m.Tensors {
		if _, ok := m.Tensors[i].Has(TQuantize); ok {
			return true
		}
	}
	return false
}
