package openvino

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/targets"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The files of an optimum-intel OpenVINO export of a Qwen3.5/3.6 model
// (`optimum-cli export openvino --task image-text-to-text`) that --into
// requires; OpenVINO GenAI loads the folder as the main model and finds our
// head beside them. GenAI grafts the trunk's lm_head onto the head, so only
// the MTP IR goes in.
var optimumFiles = []string{"openvino_language_model.xml", "openvino_text_embeddings_model.xml", model.ConfigFile}

var _ targets.Intoer = target{}

// CheckInto accepts an optimum-intel export of the same model: its
// config.json agrees on every value the head depends on (Config.HeadValues)
// and on the MTP depth. It returns the two files that go into it, the .bin before the
// .xml that refers to it.
func (target) CheckInto(dir string, m *model.Model) ([]string, error) {
	var missing []string
	for _, f := range optimumFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("--into %s is not an optimum-intel OpenVINO export of a Qwen3.5/3.6 model (image-text-to-text layout): %s missing", dir, strings.Join(missing, ", "))
	}
	raw, err := st.ReadRegularFile(filepath.Join(dir, model.ConfigFile), model.MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %w", dir, err)
	}
	c, err := model.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("--into %s: %s: %w", dir, model.ConfigFile, err)
	}
	theirs := c.HeadValues()
	for i, ours := range m.Config.HeadValues() {
		if theirs[i].Value != ours.Value {
			return nil, fmt.Errorf("--into %s is an export of another model: its %s says %s %v, the source %v", dir, model.ConfigFile, theirs[i].Key, theirs[i].Value, ours.Value)
		}
	}
	if depth, declared := c.ConfigMTPDepth(); declared && depth != m.MTPDepth {
		return nil, fmt.Errorf("--into %s is an export of another model: its %s says mtp_num_hidden_layers %v, the source %v", dir, model.ConfigFile, depth, m.MTPDepth)
	}
	return []string{LayerBin, LayerXML}, nil
}
