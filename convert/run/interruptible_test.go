package run

import (
	"context"
	"errors"
	"testing"
)

// Interruptible returns f's result when f finishes, and the context's error while f is
// still running when the context ends (f is released only after Do has
// returned, so Interruptible cannot have waited for it).
func TestInterruptible(t *testing.T) {
	t.Parallel()
	v, err := Interruptible(context.Background(), func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("%d %v", v, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	started, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { <-started; stop() }()
	_, err = Interruptible(ctx, func() (int, error) {
		close(started)
		<-release
		close(finished)
		return 1, nil
	})
	select {
	case <-finished:
		t.Fatal("Interruptible waited for f")
	default:
	}
	close(release)
	<-finished
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
