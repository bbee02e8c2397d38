package export

import (
	"errors"
	"testing"
)

// FailIntoStep makes the final phase of every --into of the test stop
// before its step k (counted from 0), as a kill or a failing rename there
// would; k < 0 lets it run through.
func FailIntoStep(t *testing.T, k int) {
	t.Cleanup(func() { stepFault = nil })
	stepFault = func(i int) error {
		if i == k {
			return errors.New("stopped by the test")
		}
		return nil
	}
}
