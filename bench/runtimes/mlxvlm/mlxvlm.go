// Package mlxvlm is mtpconv bench's mlx-vlm runtime: mlx-vlm's own generation in
// the user's Python (--python), plain or through its speculative loop with an MTP
// drafter (draft_kind "mtp"): a drafter folder (mtpconv export --target mlx) next
// to the trunk, or the head inside the model folder (a --target combined output,
// or a checkpoint that carries mtp.* tensors: mlx-vlm's load_drafter splits it in
// memory). The counts are the loop's own (runtime_driver.py says which).
package mlxvlm

import (
	_ "embed"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/bench/runtimes"
	"github.com/mtpconv/mtpconv/bench/runtimes/pydriver"
	"github.com/mtpconv/mtpconv/formats/safetensors"
)

//go:embed runtime_driver.py
var source []byte

// Runtime is mlx-vlm.
type Runtime struct{ pydriver.Driver }

var rt = Runtime{pydriver.Driver{Runtime: "mlx-vlm", Source: source}}

func init() { runtimes.Register(rt) }

// Check needs the model folder (and the drafter folder, when given) and refuses what applies to servers only.
// The arguments after `--` (KEY=VALUE: mlx_vlm.generate keywords, dtype=...) are checked by the driver
// against the installed mlx-vlm.
func (r Runtime) Check(s runtimes.Setup) error {
	if err := r.CheckInProcess(s); err != nil {
		return err
	}
	if err := pydriver.Folder("--model", s.Model, "config.json"); err != nil {
		return err
	}
	if s.Head != "" {
		return pydriver.Folder("--head", s.Head, "config.json")
	}
	return nil
}

// Claims an mlx-vlm drafter as the head (config.json's model_type ends in _mtp), or a model folder whose
// weights MLX wrote (safetensors metadata format "mlx").
func (Runtime) Claims(s runtimes.Setup) bool {
	if s.Head != "" {
		mt, _ := pydriver.Config(s.Head)["model_type"].(string)
		return strings.HasSuffix(mt, "_mtp")
	}
	files, _ := filepath.Glob(filepath.Join(s.Model, "*.safetensors"))
	return len(files) > 0 && mlxWritten(files[0])
}

func mlxWritten(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	h, err := safetensors.ReadHeader(f, fi.Size(), path)
	return err == nil && h.Metadata["format"] == "mlx"
}

// HeadCount is the drafter's own default draft length (its block_size less the verified token), which
// mlx-vlm drafts when not told otherwise; 0 when the head is inside the model (mlx-vlm computes it there).
func (Runtime) HeadCount(s runtimes.Setup) int {
	if s.Head == "" {
		return 0
	}
	if b, ok := pydriver.Config(s.Head)["block_size"].(float64); ok && b > 1 {
		return int(b) - 1
	}
	return 0
}
