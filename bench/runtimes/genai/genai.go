// Package genai is mtpconv bench's OpenVINO GenAI runtime: a
// ContinuousBatchingPipeline in the user's Python (--python), plain or with the
// MTP model as its draft model: the openvino_mtp_model.xml inside the model
// folder (an optimum-intel export, or one mtpconv added the head into with
// --into), or a head folder of its own (mtpconv export --target openvino --out).
// The counts are GenAI's own per-request extended perf metrics.
package genai

import (
	_ "embed"
	"fmt"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/pydriver"
)

//go:embed runtime_driver.py
var source []byte

// Runtime is OpenVINO GenAI.
type Runtime struct{ pydriver.Driver }

var rt = Runtime{pydriver.Driver{Runtime: "openvino-genai", Source: source}}

func init() { runtimes.Register(rt) }

// The IR files of a model folder GenAI runs, and of its MTP model.
var (
	modelIR = []string{"openvino_language_model.xml", "openvino_model.xml"}
	mtpIR   = "openvino_mtp_model.xml"
)

// Check needs an OpenVINO model folder and an MTP model (in the head folder, or in the model folder when no
// head is given), and refuses what applies to servers only. The arguments after `--` (KEY=VALUE: device=,
// OpenVINO properties, SchedulerConfig fields) are checked by the driver.
func (r Runtime) Check(s runtimes.Setup) error {
	if err := r.CheckInProcess(s); err != nil {
		return err
	}
	if err := pydriver.Folder("--model", s.Model, modelIR...); err != nil {
		return err
	}
	if s.Head != "" {
		return pydriver.Folder("--head", s.Head, mtpIR)
	}
	if err := pydriver.Folder("--model", s.Model, mtpIR); err != nil {
		return fmt.Errorf("%w: give the MTP model's folder as --head (mtpconv export --target openvino), or add it to the model folder (--target openvino --into)", err)
	}
	return nil
}

// Claims an OpenVINO model folder.
func (Runtime) Claims(s runtimes.Setup) bool {
	return pydriver.Folder("--model", s.Model, modelIR...) == nil
}

// HeadCount is the number of MTP layers the model's config.json declares (0 when it declares none).
func (Runtime) HeadCount(s runtimes.Setup) int {
	cfg := pydriver.Config(s.Model)
	for _, c := range []map[string]any{cfg, asMap(cfg["text_config"])} {
		for _, k := range []string{"mtp_num_hidden_layers", "num_nextn_predict_layers"} {
			if n, ok := c[k].(float64); ok && n > 0 {
				return int(n)
			}
		}
	}
	return 0
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
