package mlx_test

import (
	"context"
	"testing"

	_ "github.com/mtpconv/mtpconv/convert/families"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// DeepSeek-V4's drafter (the FP4 experts moved as mxfp4) verifies from the
// source: the moved codes and scales are the release's, byte for byte, and
// every other tensor recomputes.
func TestDeepSeekV4DrafterVerifies(t *testing.T) {
	t.Parallel()
	m, out := exportMLX(t, fixtures.Ensure(t, fixtures.DeepSeekV4), targets.Options{})
	rep, err := manifests.Verify(context.Background(), out, m.Checkpoint)
	if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != 32 {
		t.Fatalf("verify --src: %v %+v", err, rep)
	}
}
