package manifests

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A NaN or an infinity in the error statistics never reaches encoding/json:
// the manifest is refused with the tensor named.
func TestEncodeRefusesNonFiniteStatistics(t *testing.T) {
	cases := []struct {
		name     string
		max, rms float64
	}{
		{"NaN max", math.NaN(), 0.1},
		{"NaN rms", 0.1, math.NaN()},
		{"+Inf max", math.Inf(1), 0.1},
		{"-Inf rms", 0.1, math.Inf(-1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &Manifest{Schema: SchemaVersion, Tensors: []Tensor{
				{Name: "fine.weight", QuantError: &QuantError{MaxAbs: 0.5, RMS: 0.1}},
				{Name: "layers.0.bad.weight", QuantError: &QuantError{MaxAbs: c.max, RMS: c.rms}},
			}}
			_, err := m.Encode()
			if err == nil || !strings.Contains(err.Error(), "tensor layers.0.bad.weight") || strings.Contains(err.Error(), "unsupported value") {
				t.Fatalf("err = %v", err)
			}
			if err := m.Write(t.TempDir()); err == nil {
				t.Fatal("written")
			}
		})
	}
}

// Manifests of schema 2 (before nonfinite counts) are still read.
func TestLoadReadsOlderSchemas(t *testing.T) {
	for v, ok := range map[string]bool{"1": false, "2": true, "3": true, "4": false} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, FileName), []byte(`{"schema_version":`+v+`}`), 0o644)
		if _, err := Load(dir); (err == nil) != ok {
			t.Errorf("schema %s: err %v", v, err)
		}
	}
}
