package mlx_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert"
	_ "github.com/mtpconv/mtpconv/convert/target/mlx"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// The drafter's model_type and the keys its config adds come from the
// family's MLX table; combined's refusal is the family's sentence.
func TestTargetsReadFamilyTable(t *testing.T) {
	m := testmodel.Load(t, fixtures.Next)
	m.Spec.MLX.DrafterModelType = "test_mtp"
	m.Spec.MLX.DrafterTextConfig = func(m *convert.Model, text map[string]any) { text["test_key"] = 7 }
	p, err := testmodel.Target(t, "mlx").Plan(m, convert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ModelType string         `json:"model_type"`
		Text      map[string]any `json:"text_config"`
	}
	for _, f := range p.Files {
		if f.Name == "config.json" {
			if err := json.Unmarshal(f.Contents, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, rope := cfg.Text["rope_parameters"]
	if cfg.ModelType != "test_mtp" || cfg.Text["test_key"] != 7.0 || rope {
		t.Errorf("config %+v", cfg)
	}
	m.Spec.MLX.CombinedRefusal = "the test family's combined file has no loader"
	if _, err := testmodel.Target(t, "combined").Plan(m, convert.Options{}); err == nil || !strings.Contains(err.Error(), "the test family's combined file has no loader") {
		t.Errorf("combined: %v", err)
	}
}
