package openvino

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/model"
	st "github.com/mtpconv/mtpconv/formats/safetensors"
)

// The files of an optimum-intel OpenVINO export of a Qwen3.5/3.6 model
// (`optimum-cli export openvino --task image-text-to-text`) that --into
// requires; OpenVINO GenAI loads the folder as the main model and finds our
// head beside them. GenAI grafts the trunk's lm_head onto the head, so only
// the MTP IR goes in.
var optimumFiles = []string{"openvino_language_model.xml", "openvino_text_embeddings_model.xml", model.ConfigFile}

var _ export.Intoer = target{}

// CheckInto accepts an optimum-intel export of the same model: its
// config.json agrees on the model type, hidden size, vocabulary, experts and
// MTP depth. It returns the two files that go into it, the .bin before the
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
	depth, declared := c.ConfigMTPDepth()
	src := m.Config
	for _, k := range []struct {
		key       string
		into, src any
		skip      bool
	}{
		{"model_type", c.ModelType, src.ModelType, false},
		{"text model_type", c.TextModelType, src.TextModelType, false},
		{"hidden_size", c.HiddenSize, src.HiddenSize, false},
		{"vocab_size", c.VocabSize, src.VocabSize, false},
		{"num_experts", c.NumExperts, src.NumExperts, false},
		{"mtp_num_hidden_layers", depth, m.MTPDepth, !declared},
	} {
		if !k.skip && k.into != k.src {
			return nil, fmt.Errorf("--into %s is an export of another model: its %s says %s %v, the source %v", dir, model.ConfigFile, k.key, k.into, k.src)
		}
	}
	return []string{LayerBin, LayerXML}, nil
}
