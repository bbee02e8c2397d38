package run

import "context"

// Interruptible runs f, work that does not watch a context (a repo's
// quantization config judged against every head module, with thousands of
// patterns), and returns its result, or ctx's error as soon as ctx ends
// first: f is then left to finish on its own goroutine and its result is
// dropped, so f must change nothing a caller could see (it plans or judges,
// it does not write).
func Interruptible[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
