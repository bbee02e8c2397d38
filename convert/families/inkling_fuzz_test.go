package families

import "testing"

func FuzzConfigInkling(f *testing.F) { fuzzFamily(f, "inkling") }
