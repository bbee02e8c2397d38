package export_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtpconv/mtpconv/convert/export"
	"github.com/mtpconv/mtpconv/convert/run"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/internal/testmodel"

	_ "github.com/mtpconv/mtpconv/convert/targets/mlx"
	_ "github.com/mtpconv/mtpconv/convert/targets/openvino"
)

// An interruption after the last chunk (here: as the first file is
// announced complete) still stops the export, and nothing is left: no
// output, no partial folder, no lock.
func TestInterruptAfterLastChunkLeavesNothing(t *testing.T) {
	for _, target := range []string{"mlx", "openvino"} {
		t.Run(target, func(t *testing.T) {
			m := testmodel.Load(t, fixtures.Qwen36)
			root := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := export.Request{Model: m, Target: target, Out: filepath.Join(root, "out"), Version: "test",
				Options: targets.Options{GroupSize: 64, RouterBits: 8, Set: map[string]bool{}},
				OnFile:  func(run.FileRecord) { cancel() }}
			_, err := export.Export(ctx, req)
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("export after the interruption: %v", err)
			}
			if left, _ := os.ReadDir(root); len(left) != 0 {
				t.Errorf("left %v", left)
			}
		})
	}
}
