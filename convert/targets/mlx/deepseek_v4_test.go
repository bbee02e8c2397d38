package mlx_test

import (
	"context"
	"testing"

	_ "github.com/mtpconv/mtpconv/convert/families"
	"github.com/mtpconv/mtpconv/convert/targets"
	"github.com/mtpconv/mtpconv/internal/fixtures"
	"github.com/mtpconv/mtpconv/manifests"
)

// DeepSeek-V4's drafter (the FP4 experts moved as mxfp4; from the block-FP8
// release the FP8 weights moved as mxfp8, each block's scale repeated)
// verifies from the source: the moved codes and scales are the release's,
// byte for byte, and every other tensor recomputes.
func TestDeepSeekV4DrafterVerifies(t *testing.T) {
	t.Parallel()
	for _, name := range []string{fixtures.DeepSeekV4, fixtures.DeepSeekV4FP8Blocks} {
		m, out := exportMLX(t, fixtures.Ensure(t, name), targets.Options{})
		rep, err := manifests.Verify(context.Background(), out, m.Checkpoint)
		if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != 32 {
			t.Fatalf("%s: verify --src: %v %+v", name, err, rep)
		}
	}
}

// DeepSeek-V4-Flash-0731's DSpark drafter (a shard per stage; FP8 moved as
// mxfp8, FP4 as mxfp4) verifies from the source, every tensor recomputed.
func TestDSparkDrafterVerifies(t *testing.T) {
	t.Parallel()
	m, out := exportMLX(t, fixtures.Ensure(t, fixtures.DSparkV4Flash), targets.Options{})
	rep, err := manifests.Verify(context.Background(), out, m.Checkpoint)
	if err != nil || !rep.OK || rep.Recomputed != rep.Tensors || rep.Tensors != 80 {
		t.Fatalf("verify --src: %v %+v", err, rep)
	}
}
