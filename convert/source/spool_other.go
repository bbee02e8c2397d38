//go:build !unix

package source

import "os"

// Without flock no lock dies with its process, so a spool's owner cannot
// be told gone: spools of killed runs are left to the system's temp cleaning.
func lockSpool(dir string) (*os.File, error) { return nil, nil }

func spoolAbandoned(dir string) bool { return false }
