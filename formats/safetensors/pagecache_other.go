//go:build !linux

package safetensors

import "os"

func cachedFraction(f *os.File, off, n int64) (float64, bool) { return 0, false }

func dropCached(f *os.File, off, n int64) {}
