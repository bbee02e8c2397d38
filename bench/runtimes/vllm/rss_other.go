//go:build !linux

package vllm

// groupPeakRSS reads /proc, which only Linux has; elsewhere the server's own
// process reading (proc.Process.PeakRSS) stands.
func groupPeakRSS(int) (int64, bool) { return 0, false }
