package manifests

import "github.com/mtpconv/mtpconv/convert/health"

// Summary is what `mtpconv inspect` says about one of this tool's outputs.
type Summary struct {
	Kind       string            `json:"kind"` // "mtpconv_output"
	Target     string            `json:"target"`
	Tool       Tool              `json:"tool"`
	Source     string            `json:"source"`
	Model      Model             `json:"model"`
	Options    map[string]string `json:"options"`
	Tensors    int               `json:"tensors"`
	Precisions []PrecisionCount  `json:"precisions"`
	Files      []File            `json:"files"`
	Into       *Into             `json:"into,omitempty"` // added into a folder another tool wrote
	Warnings   []string          `json:"warnings"`
	// LostHalves: the concat projection's halves the manifest records lost
	// (quant_error.parts; a head written with --allow-lossy-head): the
	// head cannot draft, and inspect --strict fails it.
	LostHalves []string `json:"lost_halves,omitempty"`
}

// PrecisionCount is how many tensors of a component have one precision.
type PrecisionCount struct {
	Component string `json:"component"`
	Precision string `json:"precision"`
	Tensors   int    `json:"tensors"`
}

// OldMLXLMWarning is the caveat of every MLX file that carries mtp.* keys.
const OldMLXLMWarning = "this MLX file carries mtp.* tensors: mlx-lm 0.30.7 to 0.31.3 add +1 to every norm a second time when mtp.* keys are present (silent garbage); use mlx-lm >= 0.32.0, which drops mtp.* without shifting"

// Summarize condenses a manifest, with its target's warnings.
func Summarize(m *Manifest, tc TargetCard) *Summary {
	s := &Summary{Kind: "mtpconv_output", Target: m.Target, Tool: m.Tool, Source: m.Source.Name, Model: m.Model,
		Options: m.Options, Tensors: len(m.Tensors), Files: m.Files, Into: m.Into, Warnings: []string{}}
	for _, r := range precisionRows(m) {
		s.Precisions = append(s.Precisions, PrecisionCount{r.component, r.precision, r.count})
	}
	s.Warnings = append(s.Warnings, tc.Warnings...)
	s.Warnings = append(s.Warnings, nonFiniteWarnings(m)...)
	lost, degraded := m.RecordedHealth()
	s.LostHalves = lost
	s.Warnings = append(s.Warnings, degraded...)
	return s
}

// RecordedHealth is what the recorded errors of the concat projection's
// halves (quant_error.parts) say, without a source: the halves lost, the
// halves degraded (health.JudgeErrors, as the export judged them).
func (m *Manifest) RecordedHealth() (lost, degraded []string) {
	for _, t := range m.Tensors {
		if q := t.QuantError; q != nil && len(q.Parts) > 0 {
			v := health.JudgeErrors(t.Name, q.Parts)
			lost = append(lost, v.Lost...)
			degraded = append(degraded, v.Degraded...)
		}
	}
	return lost, degraded
}
