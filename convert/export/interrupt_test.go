package export_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
			req := export.Request{Model: m, Target: target, Dest: export.Out(filepath.Join(root, "out")), Version: "test",
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

// An interruption however late, up to the final rename, stops the export:
// here it comes as the commit begins (the staging marker removed) while a
// leftover of an earlier run is being cleared, before an earlier output is
// replaced (--force). The earlier output stays as it was, nothing else is
// left, and the error says so.
func TestInterruptAtCommitKeepsTheEarlierOutput(t *testing.T) {
	m := testmodel.Load(t, fixtures.Qwen36)
	root := t.TempDir()
	out := filepath.Join(root, "out")
	req := export.Request{Model: m, Target: "mlx", Dest: export.Out(out), Version: "test",
		Options: targets.Options{HeadPrecision: "int4", Set: map[string]bool{targets.OptHeadPrecision: true}}}
	if _, err := export.Export(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		before[e.Name()], _ = os.ReadFile(filepath.Join(out, e.Name()))
	}
	// A leftover the commit clears first, large enough that the
	// interruption below lands while it is being removed.
	old := filepath.Join(root, ".out.partial.old")
	os.MkdirAll(old, 0o755)
	for i := range 20000 {
		os.WriteFile(filepath.Join(old, strconv.Itoa(i)), nil, 0o644)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := filepath.Join(root, ".out.partial", ".mtpconv-plan")
	go func() {
		seen := false
		for {
			_, err := os.Stat(marker)
			if err == nil {
				seen = true
			} else if seen {
				cancel() // the commit has begun
				return
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	req.Force = true
	_, err := export.Export(ctx, req)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted; nothing was written") {
		t.Fatalf("export interrupted at its commit: %v", err)
	}
	for name, b := range before {
		if got, _ := os.ReadFile(filepath.Join(out, name)); !bytes.Equal(got, b) {
			t.Errorf("%s of the earlier output changed", name)
		}
	}
	if left, _ := os.ReadDir(root); len(left) != 1 {
		t.Errorf("left %v", left)
	}
}
