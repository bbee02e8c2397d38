//go:build !linux

package gguf

import "os"

// kernelCopy: no kernel copy on this platform; CopyRange reads and writes.
func kernelCopy(dst, src *os.File, c Copy) (bool, error) { return false, nil }
