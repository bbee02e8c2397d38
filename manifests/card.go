package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Card renders README.md, a Hugging Face model card, from a manifest and,
// when there is one, a verify report.
func Card(m *Manifest, report *Report) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) } // a JSON string is a YAML scalar
	library := map[string]string{"mlx": "mlx", "combined": "mlx", "openvino": "openvino"}[m.Target]
	if library == "" {
		library = m.Target
	}
	p("---")
	p("base_model: %s", q(m.Model.BaseModel))
	p("base_model_relation: quantized")
	p("library_name: %s", library)
	p("pipeline_tag: text-generation")
	p("license: %s", q(m.Model.License))
	p("tags:")
	for _, t := range []string{"mtp", "speculative-decoding", library, m.Model.Family, "mtpconv"} {
		p("- %s", q(t))
	}
	p("---")
	p("")
	what := map[string]string{
		"mlx":      "the multi-token-prediction (MTP) head as an MLX speculative drafter (mlx-vlm's `qwen3_5_mtp` format)",
		"combined": "one MLX file holding the trunk in stock mlx-lm's layout plus the MTP head inline (`mtp.*`)",
		"openvino": "the MTP layer and an lm_head as OpenVINO IR",
	}[m.Target]
	p("# %s: MTP head (%s)", m.Model.BaseModel, m.Target)
	p("")
	p("This folder holds %s, exported from `%s` by %s %s.", what, m.Model.BaseModel, m.Tool.Name, m.Tool.Version)
	switch m.Target {
	case "mlx":
		p("It pairs with an MLX conversion of the same trunk (`%s`): the drafter shares the trunk's embedding and lm_head.", m.Model.BaseModel)
	case "combined":
		p("The trunk is the whole model; the head in the same file drafts for it.")
	}
	p("")
	p("## Precision")
	p("")
	p("| component | precision | tensors |")
	p("|---|---|---|")
	for _, row := range precisionRows(m) {
		p("| %s | %s | %d |", row.component, row.precision, row.count)
	}
	p("")
	p("Options: %s", options(m.Options))
	p("")
	p("## Model")
	p("")
	p("- family `%s`, hidden size %d, MTP depth %d", m.Model.Family, m.Model.HiddenSize, m.Model.MTPDepth)
	p("- experts: all %d routed experts (top-%d) are present in every MoE block, stacked as `switch_mlp` `[E, out, in]`", m.Model.NumExperts, m.Model.ExpertsPerTok)
	p("- norm convention: %s", m.Model.NormConvention)
	for _, w := range nonFiniteWarnings(m) {
		p("- warning: %s", w)
	}
	p("")
	p("## How to run")
	p("")
	switch m.Target {
	case "mlx":
		p("With mlx-vlm (0.7.10 tested) as the drafter of the matching trunk:")
		p("")
		p("```python")
		p("from mlx_vlm.speculative.drafters import load_drafter")
		p("drafter, kind = load_drafter(\"PATH/TO/THIS/FOLDER\")  # kind == \"mtp\"")
		p("```")
	case "combined":
		p("The trunk loads with stock mlx-lm (0.32.2 tested; versions 0.30.7 to 0.31.3 shift the norms a second time when `mtp.*` keys are present, do not use them):")
		p("")
		p("```sh")
		p("mlx_lm.generate --model PATH/TO/THIS/FOLDER --prompt \"Hello\"")
		p("```")
		p("")
		p("One-file engines such as lemon-mlx-engine read the `mtp.*` head from the same file.")
	case "openvino":
		p("With the OpenVINO runtime (2026.4.1 tested), next to the trunk that produces `hidden_states` (after its final norm) and the embeddings of the next tokens:")
		p("")
		p("```python")
		p("import openvino as ov")
		p("core = ov.Core()")
		p("layer = core.compile_model(\"openvino_mtp_layer.xml\", \"CPU\")")
		p("lm_head = core.compile_model(\"openvino_mtp_lm_head.xml\", \"CPU\")")
		p("req = layer.create_infer_request()  # holds the MTP layer's own KV cache; req.reset_state() starts over")
		p("h = req.infer({\"inputs_embeds\": e, \"hidden_states\": h_trunk, \"attention_mask\": mask,")
		p("               \"position_ids\": pos, \"beam_idx\": beam})[\"last_hidden_state\"]")
		p("draft_token = lm_head(h[:, -1:])[\"logits\"].argmax(-1)")
		p("```")
	}
	p("")
	p("## Verification")
	p("")
	if report != nil {
		status := "passed"
		if !report.OK {
			status = fmt.Sprintf("FAILED with %d problems", len(report.Problems))
		}
		p("`mtpconv verify` %s: %d files and %d tensors re-hashed, %d tensors recomputed from the source.", status, report.Files, report.Entries, report.Recomputed)
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
		comp := "head"
		if m.Target == "combined" && !strings.HasPrefix(t.Name, "mtp.") {
			comp = "trunk"
		}
		prec := t.DType
		if q, ok := t.Has("quantize"); ok {
			prec = fmt.Sprintf("%d-bit affine, group %d (%s scales)", q.Bits, q.Group, t.DType)
		}
		counts[[2]string{comp, prec}]++
	}
	var rows []precisionRow
	for k, n := range counts {
		rows = append(rows, precisionRow{k[0], k[1], n})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].component != rows[j].component {
			return rows[i].component > rows[j].component // trunk before head
		}
		return rows[i].precision < rows[j].precision
	})
	return rows
}

func options(o map[string]string) string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("`%s=%s`", k, o[k]))
	}
	return strings.Join(parts, ", ")
}
