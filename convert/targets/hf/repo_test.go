package hf

import (
	"testing"

	"github.com/mtpconv/mtpconv/convert/model"
	"github.com/mtpconv/mtpconv/convert/source"
	"github.com/mtpconv/mtpconv/internal/testmodel"
)

// repoSpec and makeRepo are testmodel's HF repos, spelled short.
type repoSpec = testmodel.HFRepo

const (
	trunkInt8   = testmodel.TrunkInt8
	trunkPacked = testmodel.TrunkPacked
)

func makeRepo(t *testing.T, rs repoSpec) string { t.Helper(); return rs.Write(t) }

// loadRepo describes a repo as inspect does.
func loadRepo(t *testing.T, dir string) *model.Model {
	t.Helper()
	m, err := Load(source.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Checkpoint.Close() })
	return m
}
