//go:build !linux

package proc

// GroupPeakRSS reads /proc, which only Linux has.
func (p *Process) GroupPeakRSS() (int64, bool) { return 0, false }
