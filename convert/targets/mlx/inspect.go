package mlx

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mtpconv/mtpconv/convert/health"
	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/formats/jsonobj"
)

// FolderReport is what inspect says of an MLX model folder (one
// mlx_lm.convert or an mlx-community upload made): above all whether it
// holds an MTP head, and if not, the command that adds one.
type FolderReport struct {
	Kind         string   `json:"kind"` // "mlx_folder"
	Dir          string   `json:"dir"`
	ModelType    string   `json:"model_type"`
	Quantization string   `json:"quantization"`
	WeightFiles  []string `json:"weight_files"`
	MTPHead      bool     `json:"mtp_head"`
	HeadFiles    []string `json:"head_files,omitempty"` // the weight files holding mtp.* tensors
	// Drafter: the folder is an mlx-vlm drafter (its model_type a family's
	// drafter model_type): every tensor is the head, none has an mtp. name.
	Drafter   bool   `json:"drafter,omitempty"`
	BaseModel string `json:"base_model,omitempty"` // from the folder's model card
	AddHead   string `json:"add_head_command,omitempty"`
	Why       string `json:"why_no_command,omitempty"` // when no command can add one
}

var (
	_ targets.FolderInspector = drafter{}
	_ targets.HeadJudge       = drafter{}
	_ targets.HeadJudge       = combined{}
)

// IsInspectedFolder: an MLX model folder (isFolder).
func (drafter) IsInspectedFolder(dir string) bool { return isFolder(dir) }

// InspectFolder describes an MLX model folder mtpconv did not write and
// judges the head it holds.
func (drafter) InspectFolder(dir string) (targets.Inspection, error) {
	r, err := inspectFolder(dir)
	if err != nil {
		return nil, err
	}
	fi := &folderInspection{FolderReport: r}
	if fi.HeadHealth, err = headHealth(dir); err != nil {
		return nil, err
	}
	return fi, nil
}

// HeadHealth judges the head of an output folder of the target (headHealth).
func (drafter) HeadHealth(dir string) (*health.Report, error)  { return headHealth(dir) }
func (combined) HeadHealth(dir string) (*health.Report, error) { return headHealth(dir) }

// folderInspection is inspect's report of an MLX folder: the folder, then
// its head's health.
type folderInspection struct {
	*FolderReport
	HeadHealth *health.Report `json:"head_health,omitempty"`
}

func (fi *folderInspection) WriteText(w io.Writer) {
	fi.FolderReport.WriteText(w)
	if fi.HeadHealth != nil {
		fi.HeadHealth.WriteText(w)
	}
}

// Strict fails on the head's health (a folder without a head is no failure).
func (fi *folderInspection) Strict() error {
	if fi.HeadHealth == nil {
		return nil
	}
	return fi.HeadHealth.Err()
}

// isFolder reports whether dir looks like an MLX model folder: a
// config.json beside weight files that MLX wrote (metadata format "mlx").
func isFolder(dir string) bool {
	if _, err := source.Dir(dir).Open(model.ConfigFile); err != nil {
		return false
	}
	names, _ := filepath.Glob(filepath.Join(dir, weightGlob))
	for _, n := range names {
		if h, err := readHeader(n); err == nil && h.Metadata["format"] == "mlx" {
			return true
		}
	}
	return false
}

// inspectFolder describes an MLX model folder mtpconv did not write.
func inspectFolder(dir string) (*FolderReport, error) {
	f, err := readFolder(dir)
	if err != nil {
		return nil, err
	}
	r := &FolderReport{Kind: "mlx_folder", Dir: dir, ModelType: f.cfg.ModelType, WeightFiles: f.weights, HeadFiles: f.heads, MTPHead: len(f.heads) > 0,
		Quantization: f.describeQuant()}
	if card, err := model.ReadCard(source.Dir(dir)); err == nil {
		if b := model.FrontMatter(card, "base_model"); model.IsHubID(b) {
			r.BaseModel = b
		}
	}
	if r.MTPHead {
		return r, nil
	}
	// An mlx-vlm drafter (written by mtpconv or by mlx-vlm itself, with or
	// without a manifest) is the head: not a trunk that lacks one.
	if d := familyOf(f.config, f.cfg.ModelType); d != nil && d.MLX.DrafterModelType == f.cfg.ModelType {
		r.Drafter, r.MTPHead, r.HeadFiles = true, true, f.weights
		return r, nil
	}
	fam, err := f.cfg.Family()
	switch {
	case err != nil:
		r.Why = err.Error()
	case fam.MLX.CombinedRefusal != "":
		r.Why = fam.MLX.CombinedRefusal
	default:
		src := "SRC"
		if r.BaseModel != "" {
			src = "hf://" + r.BaseModel
		}
		r.AddHead = fmt.Sprintf("mtpconv export --src %s --target combined --into %s", src, targets.ShellQuote(dir))
	}
	return r, nil
}

// describeQuant says how the folder's weights are stored.
func (f *folder) describeQuant() string {
	if f.quant == nil {
		if f.floatDType != "" {
			return strings.ToLower(string(f.floatDType))
		}
		return "none"
	}
	s := fmt.Sprintf("%s %d-bit, group %d", f.quant.Mode, f.quant.Bits, f.quant.GroupSize)
	q, _ := f.root.Get("quantization")
	entries, _ := jsonobj.Decode(q)
	bits := map[int]bool{}
	n := 0
	for _, e := range entries {
		var m folderQuant
		if raw, ok := e.Value.(json.RawMessage); ok && json.Unmarshal(raw, &m) == nil && m.Bits > 0 {
			bits[m.Bits] = true
			n++
		}
	}
	if n > 0 {
		var bs []string
		for b := range bits {
			bs = append(bs, strconv.Itoa(b))
		}
		sort.Strings(bs)
		s += fmt.Sprintf("; %d modules with their own entry (%s bits)", n, strings.Join(bs, ", "))
	}
	return s
}

// WriteText prints the report for people.
func (r *FolderReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "MLX folder:    %s (model_type %s)\n", r.Dir, r.ModelType)
	fmt.Fprintf(w, "quantization:  %s\n", r.Quantization)
	fmt.Fprintf(w, "weight files:  %s\n", strings.Join(r.WeightFiles, ", "))
	if r.BaseModel != "" {
		fmt.Fprintf(w, "base model:    %s (from its model card)\n", r.BaseModel)
	}
	if r.Drafter {
		fmt.Fprintf(w, "MTP head:      an mlx-vlm drafter (model_type %s): every tensor of %s is the head\n", r.ModelType, strings.Join(r.HeadFiles, ", "))
		return
	}
	if r.MTPHead {
		fmt.Fprintf(w, "MTP head:      yes, in %s\n", strings.Join(r.HeadFiles, ", "))
		return
	}
	fmt.Fprintf(w, "MTP head:      none\n")
	if r.AddHead == "" {
		fmt.Fprintf(w, "mtpconv cannot add one: %s\n", r.Why)
		return
	}
	fmt.Fprintf(w, "add one with:  %s\n", r.AddHead)
	if strings.Contains(r.AddHead, "--src SRC") {
		fmt.Fprintf(w, "               (SRC: the checkpoint this folder was converted from, e.g. hf://ORG/NAME or a local folder)\n")
	}
}
